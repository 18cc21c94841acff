package cuckoo

import (
	"errors"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestInsertOwnedMatchesInsert inserts the same hashes into two filters of
// one geometry, one with InsertHash and one with InsertHashOwned, until
// both are full, for both derivations and several shapes, with second copies and deletes
// mixed in, and requires the same errors, counts and displacements after
// every operation and the same words at the end.
func TestInsertOwnedMatchesInsert(t *testing.T) {
	r := testseed.New(t)
	shapes := []struct{ b, f int }{{4, 16}, {2, 8}, {5, 10}, {8, 8}}
	for _, sh := range shapes {
		for _, d := range []Derivation{DeriveMix, DeriveMul} {
			g := Geometry{Buckets: 1000 + r.Uint64N(3000), BucketSize: sh.b, FingerprintBits: sh.f, Salt: r.Uint64(), Derivation: d}
			shared, err := New(g, nil)
			if err != nil {
				t.Fatal(err)
			}
			owned, _ := New(g, nil)
			var hs []uint64
			for i := 0; ; i++ {
				h, again := r.Uint64(), false
				if i%50 == 49 { // a second copy of a key already in
					h, again = hs[r.IntN(len(hs))], true
				}
				e1, e2 := shared.InsertHash(h), owned.InsertHashOwned(h)
				if (e1 == nil) != (e2 == nil) || e2 != nil && !errors.Is(e2, ErrFull) {
					t.Fatalf("%v b=%d f=%d op %d: InsertHash: %v, InsertHashOwned: %v", d, sh.b, sh.f, i, e1, e2)
				}
				if shared.Count() != owned.Count() || shared.moves.Load() != owned.moves.Load() {
					t.Fatalf("%v b=%d f=%d op %d: count %d/%d, moves %d/%d (InsertHash/InsertHashOwned)",
						d, sh.b, sh.f, i, shared.Count(), owned.Count(), shared.moves.Load(), owned.moves.Load())
				}
				if e1 != nil {
					break
				}
				if !again {
					hs = append(hs, h)
				}
				if i%11 == 10 { // delete one
					j := r.IntN(len(hs))
					if !shared.DeleteHash(hs[j]) || !owned.DeleteHash(hs[j]) {
						t.Fatalf("%v b=%d f=%d op %d: delete of an inserted key failed", d, sh.b, sh.f, i)
					}
					hs = slices.Delete(hs, j, j+1)
				}
			}
			if !slices.Equal(shared.Words(), owned.Words()) {
				t.Fatalf("%v b=%d f=%d: InsertHashOwned left other words than InsertHash", d, sh.b, sh.f)
			}
			if owned.moves.Load() == 0 {
				t.Fatalf("%v b=%d f=%d: filled without a displacement (occupancy %.3f, count %d): the test missed the slow path", d, sh.b, sh.f, owned.Occupancy(), owned.Count())
			}
			for _, h := range hs {
				if !owned.HasHash(h) {
					t.Fatalf("%v b=%d f=%d: false negative after InsertHashOwned", d, sh.b, sh.f)
				}
			}
			if occ := owned.Occupancy(); occ < 0.3 {
				t.Fatalf("%v b=%d f=%d: full at occupancy %.3f", d, sh.b, sh.f, occ)
			}
			c := owned.Count()
			owned.SetCount(c + 5)
			if owned.Count() != c+5 {
				t.Fatalf("Count %d after SetCount(%d)", owned.Count(), c+5)
			}
		}
	}
}
