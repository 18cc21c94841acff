package store

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/filterstore/filterstore/mmapbits"
)

// This file is the read-only surface cmd/inspect and the fuzz targets use:
// the catalog, WAL records and file paths as plain values. Nothing here
// writes or takes the writer lock.

// CatalogSnapshot is the catalog of a store directory as read at one
// instant.
type CatalogSnapshot struct {
	// StoreID is the store's identity, also in every filter file header
	// and WAL segment header; 0 for a store from before identities.
	StoreID uint64
	// CheckpointLSN is the latest checkpoint: every WAL record at or below
	// it is reflected in the synced files of every filter that is not
	// broken (see FilterRecord.SyncedLSN).
	CheckpointLSN uint64
	// NextID is the id the next created filter gets.
	NextID  uint64
	Filters []FilterRecord // sorted by name
}

// FilterRecord is one filter's catalog entry.
type FilterRecord struct {
	Name string
	ID   uint64
	// SyncedLSN is the checkpoint this filter's files reflect: its WAL
	// records after it are replayed on recovery.
	SyncedLSN       uint64
	Kind            mmapbits.Kind
	Incomplete      bool // a bulk Load began and did not end
	Capacity        uint64
	ErrorRate       float64
	Expansion       uint
	NonScaling      bool
	BucketSize      int
	FingerprintBits int
	MaxIterations   int
	Bits            uint64
	Layers          []LayerRecord
}

// LayerRecord is one layer of a filter as the catalog records it.
type LayerRecord struct {
	// Path is the layer's file.
	Path string
	// Header is the header the file must carry; a file whose header
	// differs does not belong to this catalog.
	Header mmapbits.Header
	// Items is the layer's item count as of the checkpoint.
	Items uint64
}

// ReadCatalog reads the catalog of the store in dir with bbolt's read-only
// mode (shared lock, waiting at most a few seconds for a writer's
// transaction). It never creates or changes anything.
func ReadCatalog(dir string) (*CatalogSnapshot, error) {
	c := &catalog{path: filepath.Join(dir, catalogFile)}
	if _, err := os.Stat(c.path); err != nil {
		return nil, fmt.Errorf("store: %s is not a store directory (no %s): %w", dir, catalogFile, err)
	}
	st, err := c.load()
	if err != nil {
		return nil, err
	}
	out := &CatalogSnapshot{StoreID: st.storeID, CheckpointLSN: st.checkpoint, NextID: st.nextID}
	for name, m := range st.filters {
		out.Filters = append(out.Filters, filterRecord(dir, name, m, st.storeID))
	}
	sort.Slice(out.Filters, func(i, j int) bool { return out.Filters[i].Name < out.Filters[j].Name })
	return out, nil
}

func filterRecord(dir, name string, m *filterMeta, storeID uint64) FilterRecord {
	r := FilterRecord{Name: name, ID: m.ID, SyncedLSN: m.SyncedLSN, Kind: m.Kind, Incomplete: m.State == stateLoading,
		Capacity: m.Capacity, ErrorRate: m.ErrorRate, Expansion: uint(m.Expansion), NonScaling: m.NonScaling,
		BucketSize: int(m.BucketSize), FingerprintBits: int(m.FingerprintBits), MaxIterations: int(m.MaxIterations), Bits: m.Bits}
	for i, l := range m.Layers {
		r.Layers = append(r.Layers, LayerRecord{Path: LayerPath(dir, m.ID, i), Header: m.header(i, storeID), Items: l.Items})
	}
	return r
}

// LayerPath returns the file of a filter layer in a store directory.
func LayerPath(dir string, id uint64, layer int) string {
	return filepath.Join(dir, filtersDir, fmt.Sprintf("%d-%d.flt", id, layer))
}

// WALDir returns the WAL directory of a store directory.
func WALDir(dir string) string { return filepath.Join(dir, walDir) }

// WALOp names the kind of a WAL record.
type WALOp string

// The kinds of WAL record (see the record format in record.go).
const (
	// WALOpHash: a Bloom add, logged as the key's hash.
	WALOpHash WALOp = "hash"
	// WALOpWords: after-images of words (cuckoo, counting, bitmap).
	WALOpWords WALOp = "words"
)

// WALRecord is a decoded store WAL payload.
type WALRecord struct {
	Op       WALOp
	FilterID uint64
	Layer    int
	Hash     uint64      // WALOpHash
	Delta    int         // WALOpWords: change of the layer's item count
	Writes   []WordWrite // WALOpWords, in application order
}

// WordWrite is one after-image: word Index of the layer gets Value.
type WordWrite struct{ Index, Value uint64 }

// DecodeWALRecord decodes a store WAL payload. Every failure wraps
// ErrCorrupt; a declared write count cannot make it allocate more than the
// payload holds.
func DecodeWALRecord(p []byte) (WALRecord, error) {
	r, err := decodeRecord(p)
	if err != nil {
		return WALRecord{}, err
	}
	out := WALRecord{FilterID: r.id, Layer: r.layer, Hash: r.hash, Delta: int(r.delta)}
	if r.op == opHash {
		out.Op = WALOpHash
	} else {
		out.Op = WALOpWords
		out.Writes = make([]WordWrite, len(r.writes))
		for i, w := range r.writes {
			out.Writes[i] = WordWrite{w.idx, w.val}
		}
	}
	return out, nil
}

// AppendWALRecord encodes r as a store WAL payload (the inverse of
// DecodeWALRecord), for tests and fuzzing.
func AppendWALRecord(b []byte, r WALRecord) []byte {
	if r.Op == WALOpHash {
		return appendHashRecord(b, r.FilterID, r.Layer, r.Hash)
	}
	ws := make([]wordWrite, len(r.Writes))
	for i, w := range r.Writes {
		ws[i] = wordWrite{w.Index, w.Value}
	}
	return appendWordsRecord(b, r.FilterID, r.Layer, int8(r.Delta), ws)
}
