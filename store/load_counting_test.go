package store

import (
	"errors"
	"testing"
)

// TestCountingLoadAddsAndStopsAtCapacity: a counting Load (its batches go
// to AddHashes) adds every key once, kept across a reopen; a non-scaling
// filter takes exactly its capacity, the Load ending with ErrFull.
func TestCountingLoadAddsAndStopsAtCapacity(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	c, err := s.CreateCounting("c", BloomConfig{Capacity: 50_000})
	must(t, err)
	const n = 3*loadBatch + 123
	must(t, c.Load(rangeKeys(0, n)))
	check := func(c *Counting, when string) {
		t.Helper()
		for i := 0; i < n; i++ {
			if !c.Has(key(i)) {
				t.Fatalf("%s: key %d absent", when, i)
			}
		}
		if got := c.Items(); got != n {
			t.Fatalf("%s: %d items, want %d", when, got, n)
		}
	}
	check(c, "after Load")
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	defer s.Close()
	c, err = s.Counting("c")
	must(t, err)
	check(c, "after reopen")

	const capacity = loadBatch + 1000 // full part-way through the second batch
	fixed, err := s.CreateCounting("fixed", BloomConfig{Capacity: capacity, NonScaling: true})
	must(t, err)
	err = fixed.Load(rangeKeys(0, n))
	if !errors.Is(err, ErrFull) || !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Load past a non-scaling filter's capacity: %v, want ErrFull and ErrIncomplete", err)
	}
	if got := fixed.Items(); got != capacity {
		t.Fatalf("the full filter counts %d items, want its capacity %d", got, capacity)
	}
}
