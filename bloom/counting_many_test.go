package bloom

import (
	"fmt"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestCountingAddHashesMatchesLoop: AddHashes over chunks of every size
// leaves the words and Items of a loop of AddHash, saturated counters
// included (keys repeat).
func TestCountingAddHashesMatchesLoop(t *testing.T) {
	r := testseed.New(t)
	for round := range 30 {
		g := Geometry{Blocks: 1 + r.Uint64N(40), K: 1 + r.Uint32N(MaxK), Salt: r.Uint64()}
		loop, err := NewCounting(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		many, _ := NewCounting(g, nil)
		hs := make([]uint64, r.IntN(2000))
		for i := range hs {
			hs[i] = r.Uint64N(300) // repeats: counters saturate
		}
		for _, h := range hs {
			loop.AddHash(h)
		}
		for at := 0; at < len(hs); {
			end := min(len(hs), at+r.IntN(3*batchSize+1))
			many.AddHashes(hs[at:end])
			at = end
		}
		if !slices.Equal(loop.Words(), many.Words()) || loop.Items() != many.Items() {
			t.Fatalf("round %d (%+v, %d keys): AddHashes left %d items and words differing from the loop's (%d items)",
				round, g, len(hs), many.Items(), loop.Items())
		}
	}
}

// BenchmarkCountingAddHashes adds distinct hashes to a counting filter
// planned for n keys at 1%, by a loop of AddHash and by AddHashes over
// chunks of 4096, starting over when n are in; ns/op is per key.
func BenchmarkCountingAddHashes(b *testing.B) {
	for _, n := range benchSizes {
		g, err := PlanCounting(n, benchRate)
		if err != nil {
			b.Fatal(err)
		}
		c, _ := NewCounting(g, nil)
		hs := make([]uint64, n)
		for i := range hs {
			hs[i] = mix64(uint64(i) + 1)
		}
		for _, way := range []string{"loop", "batch"} {
			b.Run(fmt.Sprintf("%s/%s", sizeName(n), way), func(b *testing.B) {
				clear(c.Words())
				in := uint64(0)
				for i := 0; i < b.N; {
					if in == n {
						b.StopTimer()
						clear(c.Words())
						in = 0
						b.StartTimer()
					}
					m := min(4096, uint64(b.N-i), n-in)
					if way == "loop" {
						for _, h := range hs[in : in+m] {
							c.AddHash(h)
						}
					} else {
						c.AddHashes(hs[in : in+m])
					}
					in += m
					i += int(m)
				}
			})
		}
	}
}
