package store

import (
	"fmt"
	"testing"
)

// TestLoadRacingCheckpointKeepsChecksums: a checkpoint (a periodic one)
// that runs after a cuckoo or counting Load published its words and
// before the Load's closing checkpoint took the filter's dirty flag; the
// closing checkpoint then skipped the filter's checksums while recording
// it complete, so after a process kill every data page of the loaded
// filter read as damaged (stored checksum 00000000) in the recovered
// writer's Check and in a read-only one (an adversarial review's SIGKILL
// runs: 1 of 20 counting Loads of 1e6 keys beside a 2 ms periodic
// checkpoint). Bloom's Load marks its pages stale before it publishes and
// is checked alike.
func TestLoadRacingCheckpointKeepsChecksums(t *testing.T) {
	for _, kind := range []string{"bloom", "cuckoo", "counting"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
			const n = 20000
			var load func() error
			switch kind {
			case "bloom":
				f, err := s.CreateBloom("f", BloomConfig{Capacity: n, NonScaling: true})
				must(t, err)
				load = func() error { return f.Load(rangeKeys(0, n)) }
			case "cuckoo":
				f, err := s.CreateCuckoo("f", CuckooConfig{Capacity: n})
				must(t, err)
				load = func() error { return f.Load(rangeKeys(0, n)) }
			case "counting":
				f, err := s.CreateCounting("f", BloomConfig{Capacity: n})
				must(t, err)
				load = func() error { return f.Load(rangeKeys(0, n)) }
			}
			ran := 0
			s.hooks.loadEnded = func() {
				ran++
				must(t, s.Checkpoint())
			}
			must(t, load())
			if ran != 1 {
				t.Fatalf("the hook ran %d times", ran)
			}
			s.abandonForTest() // a kill: the page cache keeps every write

			for _, ro := range []bool{false, true} {
				r := mustOpen(t, dir, &Options{ReadOnly: ro})
				rep, err := r.Check()
				must(t, err)
				// (A writer that recovers from a dead one counts Bloom
				// pages as changed until its clean Close.)
				if len(rep.Problems) > 0 || rep.Pages+rep.Changed == 0 {
					t.Errorf("read-only %v: Check after the kill: %d pages ok, %d changed, %d problems, first: %v",
						ro, rep.Pages, rep.Changed, len(rep.Problems), fmt.Sprint(rep.Problems[:min(1, len(rep.Problems))]))
				}
				must(t, r.Close())
			}
		})
	}
}
