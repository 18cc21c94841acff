package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
)

// TestCuckooMaxIterationsLimit: CreateCuckoo refuses a MaxIterations past
// cuckoo.MaxIterationsLimit with ErrInvalid naming the field, and takes
// the limit itself. Before, the catalog kept the value's low 32 bits, so
// 1<<32+1 made a filter that examined 1 bucket and 1<<32 one that
// examined the default 500, and a value near 1<<32 let one failing Add
// of a small full filter examine billions of buckets, keeping each in
// memory (an adversarial review: 10,000,000 took 0.7 s and 788 MiB).
func TestCuckooMaxIterationsLimit(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	for _, v := range []int{cuckoo.MaxIterationsLimit + 1, 1<<32 + 1, 1 << 32, int(^uint(0) >> 1)} {
		_, err := s.CreateCuckoo(fmt.Sprint("c", v), CuckooConfig{Capacity: 100, MaxIterations: v})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "MaxIterations") {
			t.Errorf("CreateCuckoo(MaxIterations: %d): %v, want ErrInvalid naming MaxIterations", v, err)
		}
	}
	if _, err := s.List(); err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateCuckoo("top", CuckooConfig{Capacity: 100, MaxIterations: cuckoo.MaxIterationsLimit, NonScaling: true})
	must(t, err)
	if got := c.b.meta.MaxIterations; got != cuckoo.MaxIterationsLimit {
		t.Fatalf("the catalog holds MaxIterations %d, want %d", got, cuckoo.MaxIterationsLimit)
	}
}

// TestCuckooStoredMaxIterationsPastLimit: a filter whose catalog entry
// holds a MaxIterations past the limit (as releases before it stored)
// opens, keeps the value in its catalog entry, and a failing Add of it,
// full, examines at most the limit: it returns ErrFull at once.
func TestCuckooStoredMaxIterationsPastLimit(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	_, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 200, NonScaling: true})
	must(t, err)
	must(t, s.Close())
	cat := catalog.New(dir)
	st, err := cat.Load()
	must(t, err)
	const stored = 4_000_000_000
	st.Filters["c"].MaxIterations = stored
	must(t, cat.PutFilters(0, map[string]*format.FilterMeta{"c": st.Filters["c"]}))

	s = mustOpen(t, dir, nil)
	defer s.Close()
	c, err := s.Cuckoo("c")
	must(t, err)
	if c.cfg.MaxIterations != cuckoo.MaxIterationsLimit {
		t.Fatalf("the filter searches %d buckets, want the limit %d", c.cfg.MaxIterations, cuckoo.MaxIterationsLimit)
	}
	var full error
	for i := 0; i < 10_000 && full == nil; i++ {
		start := time.Now()
		full = c.Add(key(i))
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("add %d took %v", i, d)
		}
	}
	if !errors.Is(full, ErrFull) {
		t.Fatalf("10,000 adds to a filter of capacity 200: %v, want ErrFull", full)
	}
	must(t, s.Checkpoint())
	if got := c.b.meta.MaxIterations; got != stored {
		t.Fatalf("the catalog entry's MaxIterations became %d, want %d kept", got, stored)
	}
}
