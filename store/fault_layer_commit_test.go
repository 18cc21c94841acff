package store

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"golang.org/x/sys/unix"
)

// TestGrowAfterCatalogLockTimeout: a catalog lock another process holds
// past the timeout fails the add that needs a new layer and the create
// that come meanwhile, and only those calls (doc.go, fault model). Once
// the lock is gone, the filter grows into the layer file the failed add
// made, creates work, and after Close and Open every acknowledged key is
// there and the filters directory holds exactly the catalog's layers.
// (Before, the layer file was left in the way: every later add that
// needed the layer, and every later create, failed with "file already
// exists" until the store was reopened.)
func TestGrowAfterCatalogLockTimeout(t *testing.T) {
	t.Parallel() // waits out catalog.Wait: beside the other waiting tests, not after them
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 20})
	must(t, err)
	for i := range 20 {
		must(t, second(b.Add(key(i))))
	}
	// Another process reads the catalog and holds bbolt's shared lock.
	var addErr, createErr error
	withCatalogReadLocked(t, dir, func() {
		_, addErr = b.Add(key(20)) // needs layer 1
		_, createErr = s.CreateBloom("c", BloomConfig{Capacity: 20})
	})
	for what, err := range map[string]error{"the add that needed a layer": addErr, "the create": createErr} {
		if err == nil || errors.Is(err, ErrFailed) {
			t.Fatalf("%s with the catalog locked: %v, want the lock's timeout, not a failed store", what, err)
		}
	}
	if in := mustInfo(t, b); in.Layers != 1 {
		t.Fatalf("layers after the failed add: %d, want 1", in.Layers)
	}
	for i := 20; i < 60; i++ {
		if _, err := b.Add(key(i)); err != nil {
			t.Fatalf("add %d after the lock was released: %v", i, err)
		}
	}
	if _, err := s.CreateBloom("c", BloomConfig{Capacity: 20}); err != nil {
		t.Fatalf("create after the lock was released: %v", err)
	}
	layers := mustInfo(t, b).Layers
	if layers < 2 {
		t.Fatalf("layers after 60 adds at capacity 20: %d", layers)
	}
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	defer s.Close()
	b, err = s.Bloom("b")
	must(t, err)
	for i := range 60 {
		if i != 20 && !b.Has(key(i)) {
			t.Fatalf("acknowledged key %d absent after reopening", i)
		}
	}
	c, err := s.Bloom("c")
	must(t, err)
	var want []string
	for _, h := range []*Bloom{b, c} {
		for l := range mustInfo(t, h).Layers {
			want = append(want, filepath.Base(format.LayerPath(dir, h.b.id, l)))
		}
	}
	ents, err := os.ReadDir(filepath.Join(dir, format.FiltersName))
	must(t, err)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("filter files after reopening: %v, want %v", got, want)
	}
}

// TestDropRemovesSpareLayer: Drop of a filter whose growth failed at the
// catalog commit (the catalog locked past the timeout) removes the layer
// file that growth made, which the catalog never recorded, with the
// filter's own files. Drop used to leave it for the next Open to remove.
func TestDropRemovesSpareLayer(t *testing.T) {
	t.Parallel() // waits out catalog.Wait: beside the other waiting tests, not after them
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 20})
	must(t, err)
	for i := range 20 {
		must(t, second(b.Add(key(i))))
	}
	var addErr error
	withCatalogReadLocked(t, dir, func() { _, addErr = b.Add(key(20)) }) // needs layer 1
	spare := filepath.Join(dir, format.FiltersName, "1-1.flt")
	if _, err := os.Stat(spare); addErr == nil || err != nil {
		t.Fatalf("the add with the catalog locked: %v; its layer file: %v (the test misses the case)", addErr, err)
	}
	must(t, s.Drop("b"))
	if left, _ := filepath.Glob(filepath.Join(dir, format.FiltersName, "*")); len(left) != 0 {
		t.Fatalf("files left after Drop: %v", left)
	}
}

// withCatalogReadLocked runs fn while another reader holds bbolt's shared
// lock on dir's catalog (what a read-only Open takes): a writer's catalog
// commits meanwhile wait for it until their timeout.
func withCatalogReadLocked(t *testing.T, dir string, fn func()) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, format.CatalogName))
	must(t, err)
	defer f.Close()
	must(t, unix.Flock(int(f.Fd()), unix.LOCK_SH))
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)
	fn()
}
