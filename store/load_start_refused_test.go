package store

import (
	"errors"
	"testing"
)

// TestLoadRefusedAtStartLeavesFilterWhole: a Load whose first catalog
// commit (marking the filter as loading) is refused without writing
// anything, here by another reader holding the catalog's lock past the
// timeout, fails only the call, and leaves the filter as it was, across a
// crash too: no load record in the WAL, which the next Open would have
// replayed into an incomplete filter (every lookup "maybe", every change
// refused until a new Load) though no Load changed a word. Before, the
// record was logged and made durable before the commit.
func TestLoadRefusedAtStartLeavesFilterWhole(t *testing.T) {
	t.Parallel() // waits out catalog.Wait: beside the other waiting tests, not after them
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	for i := range 50 {
		must(t, second(b.Add(key(i))))
	}
	must(t, s.Checkpoint())
	for i := 50; i < 100; i++ {
		must(t, second(b.Add(key(i))))
	}
	var loadErr error
	withCatalogReadLocked(t, dir, func() {
		loadErr = b.Load(rangeKeys(100, 200))
	})
	if loadErr == nil || errors.Is(loadErr, ErrFailed) {
		t.Fatalf("Load with the catalog locked: %v; want the lock's timeout, the store not failed", loadErr)
	}
	if in := mustInfo(t, b); in.State != "ok" {
		t.Fatalf("after the refused Load the filter is %q, want ok", in.State)
	}
	must(t, second(b.Add(key(100))))
	// A crash: no checkpoint, no Close.
	s.abandonForTest()
	s = mustOpen(t, dir, nil)
	defer s.Close()
	b, err = s.Bloom("b")
	must(t, err)
	if in := mustInfo(t, b); in.State != "ok" {
		t.Fatalf("after the refused Load and a crash the filter is %q, want ok", in.State)
	}
	for i := range 101 {
		if !b.Has(key(i)) {
			t.Fatalf("acknowledged key %d absent after the crash", i)
		}
	}
	if _, err := b.Add(key(101)); err != nil {
		t.Fatalf("an add after the crash: %v", err)
	}
}
