package store

import (
	"errors"
	"fmt"
	"iter"
	"runtime"
	"testing"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/internal/testseed"
)

// TestCountingLoadAddsAndStopsAtCapacity: a counting Load adds every key
// once, kept across a reopen; a non-scaling filter takes no more than its
// capacity, the Load ending with ErrFull.
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

	// A Load past a non-scaling filter's capacity fails, whether its keys
	// go to a private build (dropped when the Load fails) or to the
	// mapped counters; there, the filter counts exactly its capacity.
	const capacity = loadBatch + 1000 // full part-way through the second batch
	for _, private := range []bool{true, false} {
		name := fmt.Sprintf("fixed-%v", private)
		if !private {
			defer func(w uint64) { loadBuildMaxWords = w }(loadBuildMaxWords)
			loadBuildMaxWords = 0
		}
		fixed, err := s.CreateCounting(name, BloomConfig{Capacity: capacity, NonScaling: true})
		must(t, err)
		err = fixed.Load(rangeKeys(0, n))
		if !errors.Is(err, ErrFull) || !errors.Is(err, ErrIncomplete) {
			t.Fatalf("%s: Load past a non-scaling filter's capacity: %v, want ErrFull and ErrIncomplete", name, err)
		}
		if got := fixed.Items(); !private && got != capacity {
			t.Fatalf("%s: the full filter counts %d items, want its capacity %d", name, got, capacity)
		}
	}
}

// TestCountingLoadBuild: a counting Load leaves the counters, and the item
// count, of Add in a loop over the same keys, saturated counters included
// (keys repeat), on 1, 2 and 4 CPUs, whichever way its keys go: to a
// private build from the first batch, merged in at the end, into a fresh
// filter and into one holding keys; to a build after batches held back
// (a fresh filter too large to build for its first keys), or after
// batches added in place (a filter holding keys); only held back, for a
// Load too short to build; only in place (no private build allowed). And
// after a reopen.
func TestCountingLoadBuild(t *testing.T) {
	rng := testseed.New(t)
	const n = 40_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = key(rng.IntN(n / 20)) // each key about 20 times: counters saturate
	}
	seq := func(ks [][]byte) iter.Seq2[[]byte, error] {
		return func(yield func([]byte, error) bool) {
			for _, k := range ks {
				if !yield(k, nil) {
					return
				}
			}
		}
	}
	type load struct {
		name     string
		capacity uint64 // words: about 0.67 per key of capacity
		pre      int    // keys added with Add before the Load
		keys     int    // keys in all
		private  bool   // a private build allowed
	}
	loads := []load{
		{"fresh", 20_000, 0, n, true},
		{"holding", 20_000, n / 4, n, true},
		{"held", 2_000_000, 0, n, true},           // a build from the third batch
		{"held-short", 2_000_000, 0, 5_000, true}, // no build
		{"late", 200_000, n / 4, n, true},         // a build from the second batch
		{"in-place", 20_000, n / 4, n, false},
	}
	for _, procs := range []int{1, 2, 4, 8} { // 8: keys hashed by the builder (loadRawKeys)
		if procs == 4 && racedetect.Enabled && testing.Short() {
			continue // 2 and 8 run the same lanes, hashing keys or not
		}
		t.Run(fmt.Sprintf("cpu=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			dir := t.TempDir()
			s := mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
			defer func() { s.Close() }()
			wantRawKeys(t, s, procs >= 5)
			want := make(map[string]*bloom.Counting)
			for _, c := range loads {
				f, err := s.CreateCounting(c.name, BloomConfig{Capacity: c.capacity})
				must(t, err)
				ref, err := bloom.NewCounting(f.c.Geometry(), nil)
				must(t, err)
				for _, k := range keys[:c.keys] {
					ref.Add(k)
				}
				ref.SetItems(uint64(c.keys))
				want[c.name] = ref
				for _, k := range keys[:c.pre] {
					must(t, f.Add(k))
				}
				func() {
					if !c.private {
						defer func(w uint64) { loadBuildMaxWords = w }(loadBuildMaxWords)
						loadBuildMaxWords = 0
					}
					must(t, f.Load(seq(keys[c.pre:c.keys])))
				}()
				sameCounting(t, c.name+" after Load", f.c, ref)
			}
			must(t, s.Close())
			s = mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
			for _, c := range loads {
				f, err := s.Counting(c.name)
				must(t, err)
				sameCounting(t, c.name+" after a reopen", f.c, want[c.name])
			}
		})
	}
}

// sameCounting fails t unless got has want's words and items.
func sameCounting(t *testing.T, what string, got, want *bloom.Counting) {
	t.Helper()
	gw, ww := got.Words(), want.Words()
	for i := range ww {
		if gw[i] != ww[i] {
			t.Fatalf("%s: word %d of %d is %#x, Add in a loop leaves %#x", what, i, len(ww), gw[i], ww[i])
		}
	}
	if got.Items() != want.Items() {
		t.Fatalf("%s: %d items, Add in a loop counts %d", what, got.Items(), want.Items())
	}
}
