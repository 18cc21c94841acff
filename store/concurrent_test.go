package store

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReadersDuringKicksAndExpansion: lookups running beside
// writers whose inserts kick entries along cuckoo paths and grow new layers
// (cuckoo and Bloom) never miss a key whose add has returned.
func TestConcurrentReadersDuringKicksAndExpansion(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			s := mustOpen(t, t.TempDir(), &Options{Sync: mode, CheckpointEvery: -1})
			defer s.Close()
			c, _ := s.CreateCuckoo("c", CuckooConfig{Capacity: 500, BucketSize: 2, FingerprintBits: 12, Expansion: 2})
			b, _ := s.CreateBloom("b", BloomConfig{Capacity: 300})
			const writers, per = 2, 1500
			var done [writers]atomic.Int64 // keys [w*per, w*per+done) were acknowledged
			var stop atomic.Bool
			var misses atomic.Int64
			var wg sync.WaitGroup
			for r := 0; r < 2; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						for w := 0; w < writers; w++ {
							n := done[w].Load()
							for i := max(0, n-50); i < n; i++ {
								k := key(w*per + int(i))
								if !c.Has(k) || !b.Has(k) {
									misses.Add(1)
								}
							}
						}
					}
				}()
			}
			var ww sync.WaitGroup
			for w := 0; w < writers; w++ {
				ww.Add(1)
				go func(w int) {
					defer ww.Done()
					for i := 0; i < per; i++ {
						k := key(w*per + i)
						if err := c.Add(k); err != nil {
							t.Error(err)
							return
						}
						if _, err := b.Add(k); err != nil {
							t.Error(err)
							return
						}
						done[w].Store(int64(i + 1))
						if i == per/2 && w == 0 {
							if err := s.Checkpoint(); err != nil {
								t.Error(err)
							}
						}
					}
				}(w)
			}
			ww.Wait()
			stop.Store(true)
			wg.Wait()
			if m := misses.Load(); m != 0 {
				t.Fatalf("%d lookups missed acknowledged keys", m)
			}
			in := mustInfo(t, c)
			if in.Layers < 2 {
				t.Fatalf("cuckoo never expanded: %+v", in)
			}
			if bi := mustInfo(t, b); bi.Layers < 3 {
				t.Fatalf("bloom grew only %d layers", bi.Layers)
			}
			t.Logf("cuckoo: %d layers, %d items; bloom: %d layers", in.Layers, in.Items, mustInfo(t, b).Layers)
		})
	}
}
