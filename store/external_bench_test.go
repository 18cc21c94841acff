package store

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkApplyExternal measures ApplyExternal of records with a Bloom
// and a cuckoo add (an engine's put): from one goroutine, Encode then
// ApplyExternal; and from g goroutines that Encode, wait at a barrier
// that lets them go g at a time (an engine's group commit: a whole group's
// records become durable at once, in no particular order), then apply,
// so that each waits for the lower seqs of its group. The filters=201
// case applies from one goroutine in a store holding 199 more filters
// (small bitmaps), which an apply must not pay for.
func BenchmarkApplyExternal(b *testing.B) {
	for _, c := range []struct{ g, extra int }{{1, 0}, {16, 0}, {1, 199}} {
		g := c.g
		name := fmt.Sprintf("goroutines=%d", g)
		if c.extra > 0 {
			name += fmt.Sprintf("/filters=%d", 2+c.extra)
		}
		b.Run(name, func(b *testing.B) {
			s, err := Open(b.TempDir(), &Options{Sync: SyncInterval})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			capacity := uint64(b.N) + 1024
			bl, err := s.CreateBloom("b", BloomConfig{Capacity: capacity})
			if err != nil {
				b.Fatal(err)
			}
			cf, err := s.CreateCuckoo("c", CuckooConfig{Capacity: capacity})
			if err != nil {
				b.Fatal(err)
			}
			for i := range c.extra {
				if _, err := s.CreateBitmap(fmt.Sprintf("x%d", i), 64); err != nil {
					b.Fatal(err)
				}
			}
			bar := newBarrier(g)
			per := (b.N + g - 1) / g
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range g {
				wg.Go(func() {
					for i := range per {
						h := Hash(benchKey(uint64(w*per + i)))
						bt := s.NewBatch()
						bt.BloomAddHash(bl, h)
						bt.CuckooAddHash(cf, h)
						rec, err := bt.Encode()
						if err != nil {
							b.Error(err)
							return
						}
						bar.wait()
						if _, err := s.ApplyExternal(rec); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// barrier releases its waiters n at a time.
type barrier struct {
	mu     sync.Mutex
	cond   *sync.Cond
	n, in  int
	rounds uint64
}

func newBarrier(n int) *barrier {
	br := &barrier{n: n}
	br.cond = sync.NewCond(&br.mu)
	return br
}

func (br *barrier) wait() {
	br.mu.Lock()
	defer br.mu.Unlock()
	round := br.rounds
	if br.in++; br.in == br.n {
		br.in = 0
		br.rounds++
		br.cond.Broadcast()
		return
	}
	for round == br.rounds {
		br.cond.Wait()
	}
}
