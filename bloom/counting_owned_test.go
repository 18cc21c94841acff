package bloom

import (
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestCountingAddOwnedEveryK holds addOwned (a private counting build's
// add) to AddHash for both derivations and every K (the unrolled first
// draw for 3 to 9 positions, the loop for the others): the same counters,
// with keys repeated often enough that some saturate.
func TestCountingAddOwnedEveryK(t *testing.T) {
	r := testseed.New(t)
	for _, d := range []Derivation{DeriveMix, DeriveMul} {
		for k := uint32(1); k <= MaxK; k++ {
			g := Geometry{Blocks: 20 + r.Uint64N(100), K: k, Salt: r.Uint64(), Derivation: d}
			ref, err := NewCounting(g, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := NewCounting(g, nil)
			distinct := make([]uint64, g.Blocks*4)
			for i := range distinct {
				distinct[i] = r.Uint64()
			}
			// Random repeats, and one key added 20 times in turn with
			// them, so that its counters saturate whatever the draw.
			hs := make([]uint64, len(distinct)*8)
			for i := range hs {
				hs[i] = distinct[r.IntN(len(distinct))]
				if i%(len(hs)/20) == 0 {
					hs[i] = distinct[0]
				}
				ref.AddHash(hs[i])
			}
			for i := 0; i < len(hs); i += 700 {
				got.addOwned(hs[i:min(i+700, len(hs))])
			}
			if i := firstDiff(got.Words(), ref.Words()); i >= 0 {
				t.Fatalf("%v K=%d: word %d is %#x, want %#x", d, k, i, got.Words()[i], ref.Words()[i])
			}
			saturated := false
			for _, w := range got.Words() {
				for j := range CountersPerWord {
					saturated = saturated || w>>(j*CounterBits)&MaxCounter == MaxCounter
				}
			}
			if !saturated {
				t.Fatalf("%v K=%d: no counter saturated; the test does not reach MaxCounter", d, k)
			}
		}
	}
}
