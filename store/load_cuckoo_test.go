package store

import (
	"errors"
	"testing"
)

// TestCuckooLoadGrowsAndCounts: a cuckoo Load whose batches (InsertHashes)
// fill the newest layer part-way through a batch goes on, key by key,
// into the layers it grows: every key is found, counted once, and still
// there after a reopen, and a second Load into the grown chain adds to
// it. Without expansion the key that does not fit ends the Load with
// ErrFull, the filter counting the keys before it.
func TestCuckooLoadGrowsAndCounts(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 3000})
	must(t, err)
	const n = 3*loadBatch + 123
	must(t, c.Load(rangeKeys(0, n)))
	check := func(c *Cuckoo, when string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if !c.Has(key(i)) {
				t.Fatalf("%s: key %d absent", when, i)
			}
		}
		if got := c.Items(); got != uint64(n) {
			t.Fatalf("%s: %d items, want %d", when, got, n)
		}
		info, err := c.Info()
		must(t, err)
		if info.Layers < 2 {
			t.Fatalf("%s: %d layers: %d keys into a capacity of 3000 should have grown the chain", when, info.Layers, n)
		}
	}
	check(c, "after Load", n)
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	defer s.Close()
	c, err = s.Cuckoo("c")
	must(t, err)
	check(c, "after reopen", n)
	// A second Load into the grown chain: its newest layer holds items
	// already, and may be full when a batch starts.
	must(t, c.Load(rangeKeys(n, 2*n)))
	check(c, "after a second Load", 2*n)

	fixed, err := s.CreateCuckoo("fixed", CuckooConfig{Capacity: 3000, NonScaling: true})
	must(t, err)
	err = fixed.Load(rangeKeys(0, n))
	if !errors.Is(err, ErrFull) || !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Load past a non-scaling filter's room: %v, want ErrFull and ErrIncomplete", err)
	}
	// (An incomplete filter answers every lookup "maybe", so only its
	// count says how far the Load got.)
	if items := fixed.Items(); items < 3000 || items >= n {
		t.Fatalf("the full filter counts %d items, want its capacity or more and fewer than %d", items, n)
	}
}
