package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/fserr"
	"github.com/filterstore/filterstore/mmapbits"
)

func TestCatalogRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c := New(dir)
	if _, err := c.Load(); !errors.Is(err, ErrNoCatalog) {
		t.Fatalf("Load of a directory without a catalog: %v, want ErrNoCatalog", err)
	}
	if _, err := Read(dir); err == nil {
		t.Fatal("Read of a directory without a catalog succeeded")
	}
	id, err := NewStoreID()
	if err != nil || id == 0 {
		t.Fatalf("NewStoreID = %d, %v", id, err)
	}
	if err := c.Create(id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, format.CatalogTmpName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary catalog left behind: %v", err)
	}
	m := &format.FilterMeta{ID: 1, Kind: mmapbits.KindBitmap, Capacity: 64, Bits: 64, NonScaling: true, State: format.StateLoading,
		Layers: []format.LayerMeta{{Capacity: 64, Size: 64, DataPages: 1, Items: 3}}}
	if err := c.PutFilters(2, map[string]*format.FilterMeta{"b": m}); err != nil {
		t.Fatal(err)
	}
	m.SyncedLSN = 7
	if _, err := c.Checkpoint(7, 0, map[string]*format.FilterMeta{"b": m}, nil); err != nil {
		t.Fatal(err)
	}
	st, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if st.StoreID != id || st.Checkpoint != 7 || st.NextID != 2 || len(st.Filters) != 1 || st.Filters["b"].SyncedLSN != 7 {
		t.Fatalf("Load = %+v", st)
	}
	snap, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := snap.Filters[0]
	if snap.StoreID != id || snap.CheckpointLSN != 7 || f.Name != "b" || !f.Incomplete || f.Bits != 64 ||
		f.Layers[0].Path != format.LayerPath(dir, 1, 0) || f.Layers[0].Header != m.Header(0, id) || f.Layers[0].Items != 3 {
		t.Fatalf("Read = %+v", snap)
	}
	if err := c.DeleteFilter("b"); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Load(); err != nil || len(st.Filters) != 0 {
		t.Fatalf("after DeleteFilter: %+v, %v", st, err)
	}
}

// TestCheckpointForgetsDeadEntries: a checkpoint given the names of the
// live filters deletes, in its own transaction, every other entry (left by
// a create whose commit landed although it reported a failure), returns
// their names, and keeps the live ones, with metas or without (a broken
// filter has none); without live names it deletes nothing.
func TestCheckpointForgetsDeadEntries(t *testing.T) {
	dir := t.TempDir()
	c := New(dir)
	id, err := NewStoreID()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(id); err != nil {
		t.Fatal(err)
	}
	meta := func(id uint64) *format.FilterMeta {
		return &format.FilterMeta{ID: id, Kind: mmapbits.KindBitmap, Capacity: 64, Bits: 64, NonScaling: true,
			Layers: []format.LayerMeta{{Capacity: 64, Size: 64, DataPages: 1}}}
	}
	all := map[string]*format.FilterMeta{"a": meta(1), "broken": meta(2), "dead": meta(3), "dead2": meta(4)}
	if err := c.PutFilters(5, all); err != nil {
		t.Fatal(err)
	}
	if gone, err := c.Checkpoint(3, 0, map[string]*format.FilterMeta{"a": meta(1)}, nil); err != nil || len(gone) != 0 {
		t.Fatalf("Checkpoint without live names: gone %v, %v", gone, err)
	}
	gone, err := c.Checkpoint(4, 0, map[string]*format.FilterMeta{"a": meta(1)}, map[string]bool{"a": true, "broken": true})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(gone)
	if !slices.Equal(gone, []string{"dead", "dead2"}) {
		t.Fatalf("Checkpoint deleted %v, want [dead dead2]", gone)
	}
	st, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	if st.Checkpoint != 4 || len(st.Filters) != 2 || st.Filters["a"] == nil || st.Filters["broken"] == nil {
		t.Fatalf("after the checkpoint: %+v", st)
	}
}

func TestCatalogDamaged(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		data []byte
	}{{"empty", nil}, {"garbage", []byte("not a bbolt file at all, but long enough to look like one")}} {
		if err := os.WriteFile(format.CatalogPath(dir), tc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := New(dir).Load(); !errors.Is(err, fserr.ErrCorrupt) {
			t.Errorf("%s catalog: %v, want ErrCorrupt", tc.name, err)
		}
		if got, err := os.ReadFile(format.CatalogPath(dir)); err != nil || string(got) != string(tc.data) {
			t.Errorf("%s catalog: Load changed the file", tc.name)
		}
	}
}

// TestCatalogRenameFilter: a rename moves the entry, replaces one under the
// new name, and leaves everything as it was when from is missing.
func TestCatalogRenameFilter(t *testing.T) {
	dir := t.TempDir()
	c := New(dir)
	if err := c.Create(1); err != nil {
		t.Fatal(err)
	}
	meta := func(id uint64) *format.FilterMeta {
		return &format.FilterMeta{ID: id, Kind: mmapbits.KindBitmap, Capacity: 64, Bits: 64, NonScaling: true,
			Layers: []format.LayerMeta{{Capacity: 64, Size: 64, DataPages: 1, Items: id}}}
	}
	if err := c.PutFilters(4, map[string]*format.FilterMeta{"a": meta(1), "b": meta(2), "c": meta(3)}); err != nil {
		t.Fatal(err)
	}
	ids := func() map[string]uint64 {
		t.Helper()
		st, err := c.Load()
		if err != nil {
			t.Fatal(err)
		}
		out := make(map[string]uint64)
		for n, m := range st.Filters {
			if m.Layers[0].Items != m.ID {
				t.Fatalf("filter %q: entry of id %d carries the items of %d", n, m.ID, m.Layers[0].Items)
			}
			out[n] = m.ID
		}
		return out
	}
	if err := c.RenameFilter("a", "x"); err != nil {
		t.Fatal(err)
	}
	if got := ids(); len(got) != 3 || got["x"] != 1 || got["b"] != 2 || got["c"] != 3 {
		t.Fatalf("after renaming a to x: %v", got)
	}
	if err := c.RenameFilter("b", "c"); err != nil {
		t.Fatal(err)
	}
	if got := ids(); len(got) != 2 || got["x"] != 1 || got["c"] != 2 {
		t.Fatalf("after renaming b over c: %v", got)
	}
	if err := c.RenameFilter("missing", "x"); !errors.Is(err, fserr.ErrNotFound) {
		t.Fatalf("rename of a missing entry: %v, want ErrNotFound", err)
	}
	if got := ids(); len(got) != 2 || got["x"] != 1 || got["c"] != 2 {
		t.Fatalf("a failed rename changed the catalog: %v", got)
	}
}
