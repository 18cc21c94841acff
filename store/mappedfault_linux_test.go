package store

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/mmapbits"
)

// twoFilters opens a store in a new directory with a Bloom filter "bad"
// and a cuckoo filter "good" of 2000 keys each, checkpointed, and returns
// them and the path of bad's layer file.
func twoFilters(t *testing.T) (dir string, s *Store, bad *Bloom, good *Cuckoo, path string) {
	t.Helper()
	dir = t.TempDir()
	s = mustOpen(t, dir, nil)
	bad, err := s.CreateBloom("bad", BloomConfig{Capacity: 100_000, NonScaling: true})
	must(t, err)
	good, err = s.CreateCuckoo("good", CuckooConfig{Capacity: 10_000, NonScaling: true})
	must(t, err)
	for i := range 2000 {
		if _, err := bad.Add(key(i)); err != nil {
			t.Fatal(err)
		}
		if err := good.Add(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	must(t, s.Checkpoint())
	return dir, s, bad, good, bad.base().path(0)
}

// TestReadsOfATruncatedLayerFail: a layer file that another process
// truncates while the store has it mapped makes Check, Fill and WriteTo,
// which read the whole filter through the mapping, return an error naming
// the file and wrapping ErrCorrupt, where the fault (SIGBUS) killed the
// process before; Check goes on to the other filters. (Lookups and changes
// of such a filter still fault: store doc, "Fault model".)
func TestReadsOfATruncatedLayerFail(t *testing.T) {
	_, s, bad, good, path := twoFilters(t)
	fi, err := os.Stat(path)
	must(t, err)
	// The header and the first data page stay.
	must(t, os.Truncate(path, mmapbits.HeaderSize+mmapbits.PageSize))

	rep, err := s.Check()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Check of a truncated layer: %v, want ErrCorrupt naming %s as truncated", err, path)
	}
	if !strings.Contains(err.Error(), "SIGBUS at 0x") {
		t.Errorf("Check's error does not give the fault's address: %v", err)
	}
	t.Logf("Check: %v", err)
	if rep == nil || rep.Filters != 2 || len(rep.Problems) != 1 {
		t.Fatalf("Check's report: %+v, want both filters checked and one problem", rep)
	}
	if _, err := bad.Fill(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Fill of a truncated layer: %v, want ErrCorrupt naming %s", err, path)
	}
	if _, err := bad.WriteTo(io.Discard); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("WriteTo of a truncated layer: %v, want ErrCorrupt naming %s", err, path)
	}
	if _, err := good.Fill(); err != nil {
		t.Fatalf("Fill of the other filter: %v", err)
	}
	// Give the file its length back (its lost pages read as zeros) so
	// that Close's checkpoint, which reads every page, does not fault.
	must(t, os.Truncate(path, fi.Size()))
	s.Close()
}

// TestCheckpointOfATruncatedLayerFailsTheStore: a checkpoint that reads a
// changed page of a layer file truncated while mapped (its checksum
// update) fails the store, with an error naming the file, where the fault
// killed the process before (an adversarial reviewer's run: one Add after
// the truncation, then Close). The next Open opens that filter broken and
// the other one whole.
func TestCheckpointOfATruncatedLayerFailsTheStore(t *testing.T) {
	dir, s, bad, _, path := twoFilters(t)
	must(t, os.Truncate(path, mmapbits.HeaderSize+mmapbits.PageSize))
	// A change to the page that is left, as an Add landing there makes.
	b := bad.base()
	b.regions[0].Touch(0, 1)
	b.dirty.Store(true)
	err := s.Checkpoint()
	if !errors.Is(err, ErrFailed) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("a checkpoint over a truncated layer: %v, want ErrFailed and ErrCorrupt naming %s", err, path)
	}
	if err := s.Close(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Close of the failed store: %v, want its failure", err)
	}
	s = mustOpen(t, dir, nil)
	defer s.Close()
	bad, err = s.Bloom("bad")
	must(t, err)
	if _, err := bad.Add(key(0)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("reopened, an add to the truncated filter: %v, want ErrCorrupt for its size", err)
	}
	if !bad.Has(key(5)) {
		t.Fatal("reopened, the broken filter answers absent")
	}
	good, err := s.Cuckoo("good")
	must(t, err)
	for i := range 2000 {
		if !good.Has(key(i)) {
			t.Fatalf("reopened, key %d of the other filter absent", i)
		}
	}
}
