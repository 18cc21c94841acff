package bloom

import (
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestAddOwnedMatchesAdd adds the same keys to two filters of one geometry,
// one with Add and one with AddOwned, for both derivations and for K up to
// and beyond one draw's positions, and requires the same reports, the same
// words and the same Count after every key.
func TestAddOwnedMatchesAdd(t *testing.T) {
	r := testseed.New(t)
	for _, d := range []Derivation{DeriveMix, DeriveMul} {
		for _, rate := range []float64{0.1, 0.01, 1e-4, 1e-6} {
			n := 500 + r.Uint64N(3000)
			g, err := Plan(n, rate)
			if err != nil {
				t.Fatal(err)
			}
			g.Derivation, g.Salt = d, r.Uint64()
			shared, _ := New(g, nil)
			owned, _ := New(g, nil)
			// Overfilled 1.5x, and every tenth key added twice, so that
			// adds find their bits set.
			for i := range n + n/2 {
				h := r.Uint64()
				for range 1 + i%10/9 {
					a, b := shared.AddHash(h), owned.AddHashOwned(h)
					if a != b {
						t.Fatalf("%v K=%d key %d: AddHash reported %v, AddHashOwned %v", d, g.K, i, a, b)
					}
				}
				if shared.Count() != owned.Count() {
					t.Fatalf("%v K=%d key %d: Count %d after AddHash, %d after AddHashOwned", d, g.K, i, shared.Count(), owned.Count())
				}
			}
			if !slices.Equal(shared.Words(), owned.Words()) {
				t.Fatalf("%v K=%d: AddHashOwned set other bits than AddHash", d, g.K)
			}
			fresh, _ := New(g, nil)
			if !fresh.AddOwned([]byte("k")) || fresh.AddOwned([]byte("k")) || fresh.Add([]byte("k")) ||
				!fresh.Has([]byte("k")) || fresh.Count() != 1 {
				t.Fatalf("%v K=%d: AddOwned, AddOwned, Add of one key into an empty filter: want true, false, false, found, Count 1", d, g.K)
			}
			if owned.SetCount(3); owned.Count() != 3 {
				t.Fatalf("%v K=%d: Count %d after SetCount(3) on AddOwned's adds", d, g.K, owned.Count())
			}
		}
	}
}
