package store

import (
	"testing"
)

// TestCheckDuringLoad: Check run while a Load of each kind writes the
// filter's words (from the key source, which runs with no lock held: in
// place, into a private build, or between a build's publish and the
// checkpoint that ends the Load) reports no problem: the pages a Load
// changes are counted as changed, not as damaged. Once the Load is done,
// Check verifies every page clean.
func TestCheckDuringLoad(t *testing.T) {
	const n = 40_000
	kinds := []struct {
		name   string
		create func(s *Store) (func(iterKeys) error, error)
	}{
		{"bloom", func(s *Store) (func(iterKeys) error, error) {
			f, err := s.CreateBloom("f", BloomConfig{Capacity: n})
			if err != nil {
				return nil, err
			}
			return func(k iterKeys) error { return f.Load(k) }, nil
		}},
		{"counting", func(s *Store) (func(iterKeys) error, error) {
			f, err := s.CreateCounting("f", BloomConfig{Capacity: n})
			if err != nil {
				return nil, err
			}
			return func(k iterKeys) error { return f.Load(k) }, nil
		}},
		{"cuckoo", func(s *Store) (func(iterKeys) error, error) {
			f, err := s.CreateCuckoo("f", CuckooConfig{Capacity: n / 8})
			if err != nil {
				return nil, err
			}
			return func(k iterKeys) error { return f.Load(k) }, nil
		}},
	}
	for _, kind := range kinds {
		for _, private := range []bool{true, false} {
			name := kind.name + "/private"
			if !private {
				name = kind.name + "/in-place"
			}
			t.Run(name, func(t *testing.T) {
				if !private {
					defer func(w uint64) { loadBuildMaxWords = w }(loadBuildMaxWords)
					loadBuildMaxWords = 0
				}
				s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
				defer s.Close()
				load, err := kind.create(s)
				must(t, err)
				// Some keys and a checkpoint first, so that pages have
				// checksums to mismatch.
				must(t, load(rangeKeys(n, n+2_000)))
				checks := 0
				err = load(func(yield func([]byte, error) bool) {
					for i := range n {
						if i%(3*loadBatch+1) == 0 && i > 0 {
							rep, err := s.Check()
							if err != nil {
								t.Errorf("Check during the Load (key %d): %v (report %+v)", i, err, rep)
							}
							checks++
						}
						if !yield(key(i), nil) {
							return
						}
					}
				})
				must(t, err)
				if checks == 0 {
					t.Fatal("no Check ran during the Load")
				}
				rep, err := s.Check()
				if err != nil || rep.Changed != 0 || rep.Pages == 0 {
					t.Fatalf("Check after the Load: %v, report %+v; want every page verified", err, rep)
				}
			})
		}
	}
}

// iterKeys is a Load's key source.
type iterKeys = func(yield func([]byte, error) bool)
