package catalog

import (
	"fmt"
	"os"
	"sort"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// This file is the read-only view cmd/inspect and the tests use: the
// catalog as plain values, with each layer's file and the header it must
// carry. Nothing here writes or takes the writer lock.

// Snapshot is the catalog of a store directory as read at one instant.
type Snapshot struct {
	// StoreID is the store's identity, also in every filter file header
	// and WAL segment header; 0 for a store from before identities.
	StoreID uint64
	// CheckpointLSN is the latest checkpoint: every WAL record at or below
	// it is reflected in the synced files of every filter that is not
	// broken (see Filter.SyncedLSN).
	CheckpointLSN uint64
	// NextID is the id the next created filter gets.
	NextID  uint64
	Filters []Filter // sorted by name
}

// Filter is one filter's catalog entry.
type Filter struct {
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
	Layers          []Layer
}

// Layer is one layer of a filter as the catalog records it.
type Layer struct {
	// Path is the layer's file.
	Path string
	// Header is the header the file must carry; a file whose header
	// differs does not belong to this catalog.
	Header mmapbits.Header
	// Items is the layer's item count as of the filter's checkpoint.
	Items uint64
}

// Read reads the catalog of the store in dir with bbolt's read-only mode
// (shared lock, waiting at most Wait for a writer's transaction). It never
// creates or changes anything.
func Read(dir string) (*Snapshot, error) {
	c := New(dir)
	if _, err := os.Stat(c.Path); err != nil {
		return nil, fmt.Errorf("store: %s is not a store directory (no %s): %w", dir, format.CatalogName, err)
	}
	st, err := c.Load()
	if err != nil {
		return nil, err
	}
	out := &Snapshot{StoreID: st.StoreID, CheckpointLSN: st.Checkpoint, NextID: st.NextID}
	for name, m := range st.Filters {
		out.Filters = append(out.Filters, snapshotFilter(dir, name, m, st.StoreID))
	}
	sort.Slice(out.Filters, func(i, j int) bool { return out.Filters[i].Name < out.Filters[j].Name })
	return out, nil
}

func snapshotFilter(dir, name string, m *format.FilterMeta, storeID uint64) Filter {
	f := Filter{Name: name, ID: m.ID, SyncedLSN: m.SyncedLSN, Kind: m.Kind, Incomplete: m.State == format.StateLoading,
		Capacity: m.Capacity, ErrorRate: m.ErrorRate, Expansion: uint(m.Expansion), NonScaling: m.NonScaling,
		BucketSize: int(m.BucketSize), FingerprintBits: int(m.FingerprintBits), MaxIterations: int(m.MaxIterations), Bits: m.Bits}
	for i, l := range m.Layers {
		f.Layers = append(f.Layers, Layer{Path: format.LayerPath(dir, m.ID, i), Header: m.Header(i, storeID), Items: l.Items})
	}
	return f
}
