package store

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
)

// TestBloomLoadParallel: a Bloom Load, which adds each batch's keys on
// several goroutines, sets exactly the bits one-by-one adds set (a
// non-scaling filter, compared word for word), and a scalable filter
// loaded past its first layer finds every key, on 4 and 8 CPUs.
func TestBloomLoadParallel(t *testing.T) {
	for _, procs := range []int{4, 8} { // 8: the builder hashes the keys (loadRawKeys)
		t.Run(fmt.Sprintf("cpu=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
			defer s.Close()
			wantRawKeys(t, s, procs >= 5)
			const n = 50_000
			loaded, err := s.CreateBloom("loaded", BloomConfig{Capacity: n, NonScaling: true})
			must(t, err)
			added, err := s.CreateBloom("added", BloomConfig{Capacity: n, NonScaling: true})
			must(t, err)
			must(t, loaded.Load(rangeKeys(0, n)))
			keys := make([][]byte, n)
			for i := range keys {
				keys[i] = key(i)
			}
			_, err = added.AddMany(keys)
			must(t, err)
			lw, aw := (*loaded.layers.Load())[0].Words(), (*added.layers.Load())[0].Words()
			if !slices.Equal(lw, aw) {
				diff := 0
				for i := range lw {
					if lw[i] != aw[i] {
						diff++
					}
				}
				t.Fatalf("Load and AddMany of the same keys differ in %d of %d words", diff, len(lw))
			}

			// Every key twice, close together (in one batch): counted once each,
			// as by one-by-one adds.
			dups, err := s.CreateBloom("dups", BloomConfig{Capacity: n, NonScaling: true})
			must(t, err)
			must(t, dups.Load(func(yield func([]byte, error) bool) {
				for i := range 2 * n {
					if !yield(key(i/2), nil) {
						return
					}
				}
			}))
			if d, a := (*dups.layers.Load())[0].Count(), (*added.layers.Load())[0].Count(); d != a {
				t.Fatalf("loading every key twice counted %d items, adding each once %d", d, a)
			}

			grown, err := s.CreateBloom("grown", BloomConfig{Capacity: 5_000})
			must(t, err)
			must(t, grown.Load(rangeKeys(0, n)))
			in, err := grown.Info()
			must(t, err)
			if in.Layers < 3 {
				t.Fatalf("%d keys into a filter of capacity 5000 made %d layers", n, in.Layers)
			}
			for i := range n {
				if !grown.Has(key(i)) {
					t.Fatalf("key %d is missing after the Load (%d layers)", i, in.Layers)
				}
			}
		})
	}
}
