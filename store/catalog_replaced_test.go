package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
)

// TestCatalogReplacedUnderWriter: a catalog.db replaced from outside while
// a writer runs (an older copy of it renamed over it) makes the writer's
// next catalog change fail with ErrCorrupt: the checkpoint fails the store
// and writes nothing, so its WAL keeps every acknowledged key, and the
// store opens with all of them once the right catalog is put back. The
// writer used to checkpoint into the older copy, return nil from
// Checkpoint and Close, and drop the WAL segments on its word.
func TestCatalogReplacedUnderWriter(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	a, err := s.CreateBloom("a", BloomConfig{Capacity: 10000})
	must(t, err)
	for i := range 100 {
		must(t, second(a.Add(key(i))))
	}
	must(t, s.Checkpoint())
	path := filepath.Join(dir, format.CatalogName)
	old, err := os.ReadFile(path)
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 10000})
	must(t, err)
	for i := 100; i < 200; i++ {
		must(t, second(a.Add(key(i))))
		must(t, second(b.Add(key(i))))
	}
	must(t, s.Checkpoint())
	good, err := os.ReadFile(path)
	must(t, err)

	tmp := path + ".outside"
	must(t, os.WriteFile(tmp, old, 0o644))
	must(t, os.Rename(tmp, path))
	for i := 200; i < 300; i++ {
		must(t, second(a.Add(key(i)))) // the WAL has them
	}
	if err := s.Checkpoint(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Checkpoint into a replaced catalog: %v, want ErrCorrupt", err)
	}
	if _, err := s.CreateBloom("c", BloomConfig{Capacity: 100}); err == nil {
		t.Fatal("CreateBloom after the failed checkpoint succeeded")
	}
	if err := s.Close(); err == nil {
		t.Fatal("Close of the failed store returned nil")
	}
	if now, err := os.ReadFile(path); err != nil || string(now) != string(old) {
		t.Fatalf("the replaced catalog was written to (%v)", err)
	}

	must(t, os.WriteFile(tmp, good, 0o644)) // the operator puts it back
	must(t, os.Rename(tmp, path))
	s = mustOpen(t, dir, nil)
	defer s.Close()
	a, err = s.Bloom("a")
	must(t, err)
	b, err = s.Bloom("b")
	must(t, err)
	for i := range 300 {
		if !a.Has(key(i)) || (i >= 100 && i < 200 && !b.Has(key(i))) {
			t.Fatalf("key %d absent after the catalog was put back", i)
		}
	}
}
