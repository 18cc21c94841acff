package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/store"
)

// Shared read-only access to a store directory: the catalog, the WAL
// records after the checkpoint, and a snapshot store for answers.

// readCatalog reads the catalog of dir, first telling a missing directory
// apart from one that is not a store.
func readCatalog(dir string) (*store.CatalogSnapshot, error) {
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

// readCatalogGuarded is store.ReadCatalog, with a panic or memory fault
// inside it (bbolt faults on some corrupt catalog files) turned into an
// error wrapping store.ErrCorrupt.
func readCatalogGuarded(dir string) (*store.CatalogSnapshot, error) {
	return guard(filepath.Join(dir, "catalog.db"), func() (*store.CatalogSnapshot, error) { return store.ReadCatalog(dir) })
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
func findFilter(dir string, cat *store.CatalogSnapshot, name string) (*store.FilterRecord, error) {
	for i := range cat.Filters {
		if cat.Filters[i].Name == name {
			return &cat.Filters[i], nil
		}
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

// openSnapshot opens a read-only snapshot store: no lock, nothing written,
// the WAL after the checkpoint replayed into private copies of the pages.
// A live writer can drop a filter between the snapshot's catalog read and
// its opening of the files; when an open fails and the catalog changed
// meanwhile, it tries again.
func openSnapshot(dir string) (*store.Store, error) {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		before, berr := readCatalogGuarded(dir)
		var s *store.Store
		s, err = guard(dir, func() (*store.Store, error) { return store.Open(dir, &store.Options{ReadOnly: true}) })
		if err == nil {
			return s, nil
		}
		after, aerr := readCatalogGuarded(dir)
		if berr != nil || aerr != nil || reflect.DeepEqual(before, after) {
			return nil, err // the store did not move: the failure is real
		}
	}
	return nil, err
}

// filterHandle is a kind-independent view of a snapshot store's filter.
type filterHandle struct {
	kind   string
	has    func(key []byte) bool
	count  func(key []byte) uint64 // cuckoo, counting
	info   func() store.Info
	bitmap *store.Bitmap
}

// lookupHandle returns the handle of name in s, whatever its kind.
func lookupHandle(s *store.Store, name string) (*filterHandle, error) {
	if f, err := s.Bloom(name); err == nil {
		return &filterHandle{kind: "bloom", has: f.Has, info: f.Info}, nil
	} else if !errors.Is(err, store.ErrWrongKind) {
		return nil, err
	}
	if f, err := s.Cuckoo(name); err == nil {
		return &filterHandle{kind: "cuckoo", has: f.Has, count: f.Count, info: f.Info}, nil
	}
	if f, err := s.Counting(name); err == nil {
		return &filterHandle{kind: "counting", has: f.Has, count: f.Count, info: f.Info}, nil
	}
	f, err := s.Bitmap(name)
	if err != nil {
		return nil, err
	}
	return &filterHandle{kind: "bitmap", info: f.Info, bitmap: f}, nil
}

// pendingFilter is what the WAL records after the checkpoint say about
// one filter id.
type pendingFilter struct {
	records  int
	byOp     map[store.WALOp]int
	writes   int // word writes
	firstLSN uint64
	lastLSN  uint64
	layers   map[int]*pendingLayer
}

// pendingLayer is the records after the checkpoint for one layer.
type pendingLayer struct {
	records int
	delta   int64    // change of the layer's item count replay makes
	ov      *overlay // nil unless requested
}

// pendingSet is every record after the checkpoint, by filter id.
type pendingSet struct {
	checkpoint uint64
	total      int
	byID       map[uint64]*pendingFilter
}

func (p *pendingSet) of(id uint64) *pendingFilter {
	if f := p.byID[id]; f != nil {
		return f
	}
	return &pendingFilter{byOp: map[store.WALOp]int{}, layers: map[int]*pendingLayer{}}
}

// scanPending reads the WAL records after cat's checkpoint with
// store.ScanWAL (a torn tail ends the scan). With overlays, it also builds
// for every filter of cat the words those records change: after-images,
// and the bits of Bloom adds.
func scanPending(dir string, cat *store.CatalogSnapshot, overlays bool) (*pendingSet, error) {
	p := &pendingSet{checkpoint: cat.CheckpointLSN, byID: map[uint64]*pendingFilter{}}
	byID := map[uint64]*store.FilterRecord{}
	for i := range cat.Filters {
		byID[cat.Filters[i].ID] = &cat.Filters[i]
	}
	var pos []uint16
	err := store.ScanWAL(dir, cat.CheckpointLSN+1, func(at store.WALPosition, payload []byte) error {
		r, err := store.DecodeWALRecord(payload)
		if err != nil {
			return fmt.Errorf("%s offset %d (LSN %d): %w", relPath(dir, at.Segment), at.Offset, at.LSN, err)
		}
		f := p.byID[r.FilterID]
		if f == nil {
			f = p.of(r.FilterID)
			f.firstLSN = at.LSN
			p.byID[r.FilterID] = f
		}
		p.total++
		f.records++
		f.byOp[r.Op]++
		f.writes += len(r.Writes)
		f.lastLSN = at.LSN
		l := f.layers[r.Layer]
		if l == nil {
			l = &pendingLayer{}
			f.layers[r.Layer] = l
		}
		l.records++
		if r.Op == store.WALOpHash {
			l.delta++
		} else {
			l.delta += int64(r.Delta)
		}
		fr := byID[r.FilterID]
		if !overlays || fr == nil || r.Layer >= len(fr.Layers) {
			return nil
		}
		pos = addToOverlay(l, fr.Layers[r.Layer].Header, r, pos)
		return nil
	})
	return p, err
}

// addToOverlay records in l's overlay the words record r changes in a
// layer with header h: after-images, or the bits of a Bloom add. pos is
// scratch space, returned for reuse.
func addToOverlay(l *pendingLayer, h mmapbits.Header, r store.WALRecord, pos []uint16) []uint16 {
	if l.ov == nil {
		l.ov = &overlay{set: map[uint64]uint64{}, or: map[uint64]uint64{}}
	}
	switch {
	case r.Op == store.WALOpHash && h.Kind == mmapbits.KindBloom:
		g := bloom.Geometry{Blocks: h.Size, K: h.K, Salt: h.Salt}
		if g.Validate() != nil {
			return pos
		}
		var block uint64
		block, pos = g.Locate(r.Hash, pos[:0])
		for _, q := range pos {
			l.ov.or[block*bloom.BlockWords+uint64(q)/64] |= 1 << (q % 64)
		}
	case r.Op == store.WALOpWords:
		for _, w := range r.Writes {
			l.ov.set[w.Index] = w.Value
			delete(l.ov.or, w.Index)
		}
	}
	return pos
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

// opsDesc describes record counts by op: "hash 3, words 2".
func opsDesc(byOp map[store.WALOp]int) string {
	var parts []string
	for _, op := range []store.WALOp{store.WALOpHash, store.WALOpWords} {
		if n := byOp[op]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", op, n))
		}
	}
	return strings.Join(parts, ", ")
}

// filterState is the state ls and info show: ok, incomplete, or needs
// recovery (WAL records after the checkpoint name the filter).
func filterState(incomplete bool, pending int) string {
	switch {
	case incomplete:
		return "incomplete"
	case pending > 0:
		return fmt.Sprintf("needs recovery (%d)", pending)
	}
	return "ok"
}

// filterParams describes a filter's configuration from its catalog record.
func filterParams(f *store.FilterRecord) string {
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
