package bloom

import (
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestAddOwnedMatchesAdd adds the same keys to two filters of one geometry,
// one with Add and one with AddOwned, for both derivations, every K (so
// both sides of one draw's seven positions) and block counts from one up,
// and requires the same reports and Count after every key, the same words
// at the end, and every key found.
func TestAddOwnedMatchesAdd(t *testing.T) {
	r := testseed.New(t)
	for _, d := range []Derivation{DeriveMix, DeriveMul} {
		for k := uint32(1); k <= MaxK; k++ {
			blocks := []uint64{1, 2, 3, 7, 100 + r.Uint64N(900)}[k%5]
			g := Geometry{Blocks: blocks, K: k, Salt: r.Uint64(), Derivation: d}
			if err := g.Validate(); err != nil {
				t.Fatal(err)
			}
			shared, _ := New(g, nil)
			owned, _ := New(g, nil)
			// Filled to about twice a 1% plan's keys, and every tenth key
			// added twice, so that adds find their bits set.
			n := int(blocks*BlockBits/10) * 2
			hs := make([]uint64, 0, n)
			for i := range n {
				h := r.Uint64()
				hs = append(hs, h)
				for range 1 + i%10/9 {
					a, b := shared.AddHash(h), owned.AddHashOwned(h)
					if a != b {
						t.Fatalf("%v K=%d blocks=%d key %d: AddHash reported %v, AddHashOwned %v", d, k, blocks, i, a, b)
					}
				}
				if shared.Count() != owned.Count() {
					t.Fatalf("%v K=%d blocks=%d key %d: Count %d after AddHash, %d after AddHashOwned", d, k, blocks, i, shared.Count(), owned.Count())
				}
			}
			if !slices.Equal(shared.Words(), owned.Words()) {
				t.Fatalf("%v K=%d blocks=%d: AddHashOwned set other bits than AddHash", d, k, blocks)
			}
			for i, h := range hs {
				if !owned.HasHash(h) {
					t.Fatalf("%v K=%d blocks=%d: key %d missing after AddHashOwned", d, k, blocks, i)
				}
			}
			fresh, _ := New(g, nil)
			if !fresh.AddOwned([]byte("k")) || fresh.AddOwned([]byte("k")) || fresh.Add([]byte("k")) ||
				!fresh.Has([]byte("k")) || fresh.Count() != 1 {
				t.Fatalf("%v K=%d: AddOwned, AddOwned, Add of one key into an empty filter: want true, false, false, found, Count 1", d, k)
			}
			if owned.SetCount(3); owned.Count() != 3 {
				t.Fatalf("%v K=%d: Count %d after SetCount(3) on AddOwned's adds", d, k, owned.Count())
			}
		}
	}
}
