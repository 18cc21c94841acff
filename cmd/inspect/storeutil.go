package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/regfile"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/store"
)

// Shared read-only access to a store directory: the catalog, and a
// read-only store for answers.

// The store's inspect-only names (its catalog snapshot, WAL records and
// file layout), aliased here so that the rest of the command, tests
// included, names the package they live in only in this file and in
// walscan.go.
type (
	catalogSnapshot = catalog.Snapshot
	filterRecord    = catalog.Filter
	layerRecord     = catalog.Layer
	walRecord       = format.WALRecord
	walOp           = format.WALOp
)

// The WAL record ops.
const (
	walOpHash  = format.WALOpHash
	walOpWords = format.WALOpWords
	walOpBatch = format.WALOpBatch
	walOpLoad  = format.WALOpLoad
	walOpExt   = format.WALOpExternal
)

// decodeWALRecord decodes a WAL record's payload.
func decodeWALRecord(p []byte) (walRecord, error) { return format.DecodeWALRecord(p) }

// appendWALRecord encodes r after b (tests write records with it).
func appendWALRecord(b []byte, r walRecord) []byte { return format.AppendWALRecord(b, r) }

// walDir is the store's WAL directory.
func walDir(dir string) string { return format.WALDir(dir) }

// readCatalog reads the catalog of dir, first telling a missing directory
// apart from one that is not a store.
func readCatalog(dir string) (*catalogSnapshot, error) {
	st, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such directory", dir)
		}
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory (for a lone .flt file use 'inspect file')", dir)
	}
	return readCatalogGuarded(dir)
}

// readCatalogGuarded is catalog.Read, with a panic or memory fault
// inside it (bbolt faults on some corrupt catalog files) turned into an
// error wrapping store.ErrCorrupt.
func readCatalogGuarded(dir string) (*catalogSnapshot, error) {
	return guard(filepath.Join(dir, "catalog.db"), func() (*catalogSnapshot, error) { return catalog.Read(dir) })
}

// guard runs fn and turns a panic (run enables panics on memory faults)
// into an error wrapping store.ErrCorrupt that names what was being read.
func guard[T any](what string, fn func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: %w: reading it crashed the reader: %v", what, store.ErrCorrupt, r)
		}
	}()
	return fn()
}

// findFilter returns the catalog record of name.
func findFilter(dir string, cat *catalogSnapshot, name string) (*filterRecord, error) {
	if f := filterNamed(cat, name); f != nil {
		return f, nil
	}
	var names []string
	for _, f := range cat.Filters {
		names = append(names, fmtKey(f.Name))
	}
	have := "it has no filters"
	if len(names) > 0 {
		have = "it has " + strings.Join(names, ", ")
	}
	return nil, fmt.Errorf("no filter named %s in %s (%s): %w", fmtKey(name), dir, have, store.ErrNotFound)
}

// openStore opens a read-only store: no lock, nothing written, the WAL
// after each filter's checkpoint read into an overlay. It sees a filter
// dropped meanwhile as absent, and one whose files are missing or damaged
// as broken. Its mappings use small pages: a command looks up a few keys,
// in a filter that may not be in the page cache, and each should read 4
// KiB from disk, not the 2 MiB of a huge page.
//
// A writer that checkpoints (or renames) during each of the store's own
// read-only open attempts makes it fail with ErrLocked, "try again": it
// tries again, a few times, after growing pauses (1.5 s in all), before
// it gives that error up.
func openStore(dir string) (*store.Store, error) {
	for try := 0; ; try++ {
		s, err := guard(dir, func() (*store.Store, error) {
			return storeOpen(dir, &store.Options{ReadOnly: true, SmallPages: true})
		})
		if err == nil || !errors.Is(err, store.ErrLocked) || try == len(openRetryPauses) {
			return s, err
		}
		time.Sleep(openRetryPauses[try])
	}
}

// storeOpen is store.Open; tests replace it.
var storeOpen = store.Open

// openRetryPauses are openStore's pauses before its retries.
var openRetryPauses = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 750 * time.Millisecond}

// filterHandle is a kind-independent view of a read-only store's filter.
type filterHandle struct {
	kind   string
	has    func(key []byte) bool
	count  func(key []byte) uint64 // cuckoo, counting
	info   func() (store.Info, error)
	fill   func() (store.FillInfo, error) // counted in wholeFilterReads
	bitmap *store.Bitmap
}

// lookupHandle returns the handle of name in s, whatever its kind.
func lookupHandle(s *store.Store, name string) (*filterHandle, error) {
	if f, err := s.Bloom(name); err == nil {
		return &filterHandle{kind: "bloom", has: f.Has, info: f.Info, fill: countedFill(f.Fill)}, nil
	} else if !errors.Is(err, store.ErrWrongKind) {
		return nil, err
	}
	if f, err := s.Cuckoo(name); err == nil {
		return &filterHandle{kind: "cuckoo", has: f.Has, count: f.Count, info: f.Info, fill: countedFill(f.Fill)}, nil
	}
	if f, err := s.Counting(name); err == nil {
		return &filterHandle{kind: "counting", has: f.Has, count: f.Count, info: f.Info, fill: countedFill(f.Fill)}, nil
	}
	f, err := s.Bitmap(name)
	if err != nil {
		return nil, err
	}
	return &filterHandle{kind: "bitmap", info: f.Info, fill: countedFill(f.Fill), bitmap: f}, nil
}

// wholeFilterReads counts the calls of the store's Fill, which reads
// every data word of a filter, so a test can prove that a command (check)
// makes none. (Info and List read no data.)
var wholeFilterReads atomic.Uint64

// countedFill is fill, counted in wholeFilterReads.
func countedFill(fill func() (store.FillInfo, error)) func() (store.FillInfo, error) {
	return func() (store.FillInfo, error) {
		wholeFilterReads.Add(1)
		return fill()
	}
}

// fillOf is the fill ratio of the filter name in s, read from its data
// (Fill); NaN if it cannot be had.
func fillOf(s *store.Store, name string) float64 {
	h, err := lookupHandle(s, name)
	if err != nil {
		return math.NaN()
	}
	f, err := h.fill()
	if err != nil {
		return math.NaN()
	}
	return f.Ratio
}

// sortedIDs returns the keys of m in increasing order.
func sortedIDs[V any](m map[uint64]V) []uint64 {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// opsDesc describes record counts by op: "hash 3, words 2, load 1".
func opsDesc(byOp map[walOp]int) string {
	var parts []string
	for _, op := range []walOp{walOpHash, walOpWords, walOpLoad} {
		if n := byOp[op]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", op, n))
		}
	}
	return strings.Join(parts, ", ")
}

// filterParams describes a filter's configuration from its catalog record.
func filterParams(f *filterRecord) string {
	switch f.Kind {
	case mmapbits.KindBloom:
		growth := fmt.Sprintf("scaling, expansion %d", f.Expansion)
		if f.NonScaling {
			growth = "non-scaling"
		}
		return fmt.Sprintf("capacity %d, error rate %g, %s", f.Capacity, f.ErrorRate, growth)
	case mmapbits.KindCounting:
		growth := "adds beyond capacity allowed"
		if f.NonScaling {
			growth = "non-scaling"
		}
		return fmt.Sprintf("capacity %d, error rate %g, %s", f.Capacity, f.ErrorRate, growth)
	case mmapbits.KindCuckoo:
		growth := fmt.Sprintf("expansion %d", f.Expansion)
		if f.Expansion == 0 {
			growth = "no expansion"
		}
		return fmt.Sprintf("capacity %d, bucket size %d, fingerprint bits %d, max iterations %d, %s",
			f.Capacity, f.BucketSize, f.FingerprintBits, f.MaxIterations, growth)
	case mmapbits.KindBitmap:
		return fmt.Sprintf("%d bits", f.Bits)
	}
	return ""
}

// filtersDir is the directory of the store's layer files.
func filtersDir(dir string) string { return format.FiltersDir(dir) }

// parseLayerName parses a layer file's name (format.ParseLayerName).
func parseLayerName(name string) (id uint64, layer int, ok bool) { return format.ParseLayerName(name) }

// layerDataBytes is the size of a layer file's data pages, as the
// catalog's header implies.
func layerDataBytes(l layerRecord) int64 { return l.Header.FileSize() - mmapbits.HeaderSize }

// unreadable reports whether err is a failure to read a file rather than
// a finding about what it holds: permission denied, or an I/O error. Such
// a file could not be read (exit status 2), which says nothing about its
// data being corrupt (1).
func unreadable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EIO)
}

// outOfResources reports the system's refusal for want of file
// descriptors or memory: nothing about the file (exit status 2), as the
// store's Open does not take it for a broken filter either.
func outOfResources(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EAGAIN)
}

// layerUnreadable returns the error opening the first layer file of f
// that exists but cannot be read (see unreadable), or nil. Only regular
// files are opened (a FIFO would block).
func layerUnreadable(f *filterRecord) error {
	for _, l := range f.Layers {
		fh, err := regfile.Open(l.Path, os.O_RDONLY)
		if err == nil {
			fh.Close()
			continue
		}
		if unreadable(err) {
			return err
		}
	}
	return nil
}
