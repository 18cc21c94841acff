package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
)

// TestReadOnlyOpenBesideStoreCreation: a read-only Open that finds no
// catalog while a writer makes the store (the writer's catalog, WAL
// segment and filter file all made before the reader lists the
// directory) opens the new store, where it failed with ErrCorrupt,
// "catalog.db is missing but the directory holds [...] (restore the
// catalog from a backup)" (an adversarial review's racing opens: 2 to 4
// of 500 stores being made). A directory that holds a WAL segment and
// still no catalog stays ErrCorrupt.
func TestReadOnlyOpenBesideStoreCreation(t *testing.T) {
	dir := t.TempDir()
	made := false
	roAfterNoCatalog = func() {
		if made {
			return
		}
		made = true
		s := mustOpen(t, dir, nil)
		b, err := s.CreateBloom("b", BloomConfig{Capacity: 100})
		must(t, err)
		must(t, second(b.Add([]byte("k"))))
		must(t, s.Close())
	}
	defer func() { roAfterNoCatalog = nil }()
	r, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open beside the store's creation: %v", err)
	}
	defer r.Close()
	if !made {
		t.Fatal("the seam did not run: the test no longer makes the store in between")
	}
	b, err := r.Bloom("b")
	must(t, err)
	if !b.Has([]byte("k")) {
		t.Fatal("the key added before the read-only Open read the catalog reads absent")
	}

	// The catalog lost for good: still ErrCorrupt.
	lost := t.TempDir()
	s := mustOpen(t, lost, nil)
	must(t, s.Close())
	must(t, os.Remove(filepath.Join(lost, format.CatalogName)))
	if _, err := Open(lost, &Options{ReadOnly: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read-only Open of a store without its catalog: %v, want ErrCorrupt", err)
	}
}
