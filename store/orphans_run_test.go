package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
)

// TestTwoFailedCreatesThenReopen: two creates whose catalog commit fails
// (the catalog locked by another process past the timeout) leave a zero
// layer file each, at the catalog's next id and the one after it, since a
// failed create's id is not reused; the next Open removes both as a
// failed create's leftovers and the store goes on. Open used to fail with
// ErrCorrupt ("3-0.flt is this store's, but the catalog (next id 2)
// names no such filter") and the store would not open until the file
// was deleted by hand.
func TestTwoFailedCreatesThenReopen(t *testing.T) {
	t.Parallel() // waits out catalog.Wait: beside the other waiting tests, not after them
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	a, err := s.CreateBloom("a", BloomConfig{Capacity: 100})
	must(t, err)
	must(t, second(a.Add(key(1))))
	var err1, err2 error
	withCatalogReadLocked(t, dir, func() {
		_, err1 = s.CreateBloom("b", BloomConfig{Capacity: 100})
		_, err2 = s.CreateBloom("c", BloomConfig{Capacity: 100})
	})
	if err1 == nil || err2 == nil {
		t.Fatalf("creates with the catalog locked: %v, %v; want both to fail", err1, err2)
	}
	must(t, s.Close())
	for _, name := range []string{"2-0.flt", "3-0.flt"} {
		if _, err := os.Stat(filepath.Join(dir, format.FiltersName, name)); err != nil {
			t.Fatalf("the failed create's %s is not there: the test misses the case (%v)", name, err)
		}
	}
	s = mustOpen(t, dir, nil)
	defer s.Close()
	for _, name := range []string{"2-0.flt", "3-0.flt"} {
		if _, err := os.Stat(filepath.Join(dir, format.FiltersName, name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left after Open: %v", name, err)
		}
	}
	a, err = s.Bloom("a")
	must(t, err)
	if !a.Has(key(1)) {
		t.Fatal("a's key absent")
	}
	if _, err := s.CreateBloom("b", BloomConfig{Capacity: 100}); err != nil {
		t.Fatalf("create after the reopen: %v", err)
	}
}

// TestEmptyFilesPastAGapRefused: zero layer files of this store that do
// not run on from the catalog's next id without a gap are not a failed
// create's leftovers: a catalog older than the files (copied before the
// filters were created, put back) still fails Open with ErrCorrupt and
// changes nothing.
func TestEmptyFilesPastAGapRefused(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	a, err := s.CreateBloom("a", BloomConfig{Capacity: 100})
	must(t, err)
	must(t, second(a.Add(key(1))))
	must(t, s.Checkpoint())
	path := filepath.Join(dir, format.CatalogName)
	old, err := os.ReadFile(path)
	must(t, err)
	for _, name := range []string{"b", "c", "d"} { // ids 2, 3, 4; no adds
		_, err := s.CreateBloom(name, BloomConfig{Capacity: 100})
		must(t, err)
	}
	must(t, s.Drop("c"))
	must(t, s.Close())
	must(t, os.WriteFile(path, old, 0o644)) // the older catalog put back
	if s, err := Open(dir, nil); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open with 2-0.flt and 4-0.flt past next id 2: %v, want ErrCorrupt", err)
	}
	for _, name := range []string{"2-0.flt", "4-0.flt"} {
		if _, err := os.Stat(filepath.Join(dir, format.FiltersName, name)); err != nil {
			t.Fatalf("the refused Open removed %s: %v", name, err)
		}
	}
}

// TestHeaderlessTmpRemoved: a layer file's temporary file shorter than a
// header (a create killed between creating it and writing its header)
// is removed by the next Open, whatever its id; a file of that size
// without the temporary suffix is not this store's provably and stays.
// Such temporary files used to stay for good: nothing proved them ours,
// and no later create reused their name.
func TestHeaderlessTmpRemoved(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	_, err := s.CreateBloom("a", BloomConfig{Capacity: 100})
	must(t, err)
	must(t, s.Close())
	fdir := filepath.Join(dir, format.FiltersName)
	must(t, os.WriteFile(filepath.Join(fdir, "7-0.flt.tmp"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(fdir, "1-1.flt.tmp"), make([]byte, 100), 0o644))
	must(t, os.WriteFile(filepath.Join(fdir, "9-0.flt"), nil, 0o644))
	// A full-size temporary file whose header page a power loss took
	// (before, Open left it: "its header cannot be read"), and one of
	// zeros but a byte, which is no proof and stays.
	must(t, os.WriteFile(filepath.Join(fdir, "8-0.flt.tmp"), make([]byte, 3*4096), 0o644))
	notZero := make([]byte, 3*4096)
	notZero[4095] = 1
	must(t, os.WriteFile(filepath.Join(fdir, "6-0.flt.tmp"), notZero, 0o644))
	s = mustOpen(t, dir, nil)
	must(t, s.Close())
	for name, want := range map[string]bool{"7-0.flt.tmp": false, "1-1.flt.tmp": false, "8-0.flt.tmp": false, "6-0.flt.tmp": true, "9-0.flt": true, "1-0.flt": true} {
		_, err := os.Stat(filepath.Join(fdir, name))
		if (err == nil) != want {
			t.Errorf("%s after Open: %v, want there: %v", name, err, want)
		}
	}
}
