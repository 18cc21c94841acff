package store

import (
	"testing"
)

// TestLoadSourcePanicLeavesChecksumsCurrent: a Load whose key source
// panics after batches were written (into a counting filter that held
// items; into a scalable Bloom filter that grew layers) leaves the filter
// incomplete, and a clean Close after it leaves every page's checksum
// current. The panic ended the run before it marked the pages it wrote
// stale, so every checkpoint, Close's too, kept their old checksums, and
// Check and inspect verify reported them as damage after the clean Close,
// for good (an adversarial review: 524 pages of a counting filter, 9 of
// a Bloom filter's ninth layer).
func TestLoadSourcePanicLeavesChecksumsCurrent(t *testing.T) {
	for _, kind := range []string{"bloom", "counting", "cuckoo"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, nil)
			var load func(func(yield func([]byte, error) bool)) error
			total, at := 20_000, 10_000 // keys the source has, and the one it panics at
			switch kind {
			case "bloom": // grows layers during the Load
				f, err := s.CreateBloom("f", BloomConfig{Capacity: 1000})
				must(t, err)
				load = func(src func(yield func([]byte, error) bool)) error { return f.Load(src) }
				total, at = 300_000, 200_000
			case "counting":
				f, err := s.CreateCounting("f", BloomConfig{Capacity: 100_000})
				must(t, err)
				for i := range 300 {
					must(t, f.Add(key(1_000_000+i)))
				}
				load = func(src func(yield func([]byte, error) bool)) error { return f.Load(src) }
			case "cuckoo":
				f, err := s.CreateCuckoo("f", CuckooConfig{Capacity: 100_000})
				must(t, err)
				for i := range 300 {
					must(t, f.Add(key(1_000_000+i)))
				}
				load = func(src func(yield func([]byte, error) bool)) error { return f.Load(src) }
			}
			must(t, s.Checkpoint())
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("the source's panic did not reach the Load's caller")
					}
				}()
				load(func(yield func([]byte, error) bool) {
					for i := range total {
						if i == at {
							panic("the source broke")
						}
						if !yield(key(i), nil) {
							return
						}
					}
				})
			}()
			if rep, err := s.Check(); err != nil {
				t.Errorf("Check after the panicked Load: %v (%d problems)", err, len(rep.Problems))
			}
			must(t, s.Close())
			s = mustOpen(t, dir, nil)
			defer s.Close()
			if rep, err := s.Check(); err != nil {
				t.Fatalf("Check after a clean Close following a Load whose source panicked: %v (%d problems)", err, len(rep.Problems))
			}
			in := mustList(t, s)
			if len(in) != 1 || in[0].State != "incomplete" {
				t.Fatalf("after the panicked Load: %+v, want the filter incomplete", in)
			}
		})
	}
}
