package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestLoadBuildLookupsRace: while a Load builds in private memory and
// publishes the build (a counting filter's counters merged into counters
// holding keys; cuckoo layers the Load grows, built privately and copied
// over fresh mapped layers while an older layer holds keys), lookups of
// the keys added before the Load never answer "absent", and once Load
// returns every loaded key is found. Run it with -race: the publishing
// stores race the lookups' loads.
func TestLoadBuildLookupsRace(t *testing.T) {
	const pre, n = 3_000, 40_000
	builds := -1
	defer func() { cuckooLoadBuilds = nil }()
	cuckooLoadBuilds = func(n int) { builds = n }
	kinds := []struct {
		name   string
		create func(s *Store) (load func(lo, hi int) error, has func(k []byte) bool, add func(k []byte) error, err error)
	}{
		{"counting", func(s *Store) (func(lo, hi int) error, func([]byte) bool, func([]byte) error, error) {
			f, err := s.CreateCounting("c", BloomConfig{Capacity: n})
			if err != nil {
				return nil, nil, nil, err
			}
			return func(lo, hi int) error { return f.Load(rangeKeys(lo, hi)) }, f.Has, f.Add, nil
		}},
		{"cuckoo", func(s *Store) (func(lo, hi int) error, func([]byte) bool, func([]byte) error, error) {
			f, err := s.CreateCuckoo("c", CuckooConfig{Capacity: pre})
			if err != nil {
				return nil, nil, nil, err
			}
			return func(lo, hi int) error { return f.Load(rangeKeys(lo, hi)) }, f.Has, f.Add, nil
		}},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
			defer s.Close()
			load, has, add, err := kind.create(s)
			must(t, err)
			for i := range pre {
				must(t, add(key(i)))
			}
			var stop atomic.Bool
			var misses atomic.Int64
			var first atomic.Value
			var wg sync.WaitGroup
			for w := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; !stop.Load(); i = (i + 2) % pre {
						if !has(key(i)) && misses.Add(1) == 1 {
							first.Store(fmt.Sprintf("key %d", i))
						}
					}
				}()
			}
			err = load(pre, pre+n)
			stop.Store(true)
			wg.Wait()
			must(t, err)
			if m := misses.Load(); m != 0 {
				t.Fatalf("%d lookups of keys added before the Load answered absent during it (first: %v)", m, first.Load())
			}
			for i := range pre + n {
				if !has(key(i)) {
					t.Fatalf("key %d absent after the Load", i)
				}
			}
			if kind.name == "cuckoo" && builds < 2 {
				t.Fatalf("the cuckoo Load built %d layers in private memory, want several", builds)
			}
		})
	}
}
