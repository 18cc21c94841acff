package cuckoo

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/internal/testseed"
)

// TestInsertOwnedMatchesInsert inserts the same hashes into two filters of
// one geometry, one with InsertHash and one with InsertHashOwned, until
// both are full, for every derivation (DeriveLocal of one block and of
// three), bucket shapes from 1x16 to 16x4 and
// bucket counts from one up, with second copies and deletes mixed in, and
// requires the same errors, counts and displacements after every
// operation, the same words at the end, and every key found.
func TestInsertOwnedMatchesInsert(t *testing.T) {
	r := testseed.New(t)
	shapes := []struct{ b, f int }{{1, 16}, {2, 8}, {2, 16}, {3, 4}, {4, 4}, {4, 16}, {5, 10}, {8, 8}, {16, 4}}
	if racedetect.Enabled && testing.Short() { // one goroutine: every other shape
		shapes = []struct{ b, f int }{{1, 16}, {2, 16}, {4, 4}, {5, 10}, {16, 4}}
	}
	for _, sh := range shapes {
		for _, buckets := range []uint64{1, 3, 17, 257, 1000 + r.Uint64N(3000)} {
			for _, d := range []Derivation{DeriveMix, DeriveMul, DeriveLocal} {
				insertOwnedMatches(t, r, Geometry{Buckets: buckets, BucketSize: sh.b, FingerprintBits: sh.f, Salt: r.Uint64(), Derivation: d})
			}
		}
	}
	// DeriveLocal of three blocks.
	insertOwnedMatches(t, r, Geometry{Buckets: 2*LocalBlock + 1 + r.Uint64N(LocalBlock), BucketSize: 4, FingerprintBits: 16, Salt: r.Uint64(), Derivation: DeriveLocal})
}

func insertOwnedMatches(t *testing.T, r *rand.Rand, g Geometry) {
	t.Helper()
	shared, err := New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	owned, _ := New(g, nil)
	var hs []uint64
	doubled := map[uint64]bool{} // keys given a second copy: no third (b = 1 has room for two)
	for i := 0; ; i++ {
		h, again := r.Uint64(), false
		if i%50 == 49 && len(hs) > 0 {
			if c := hs[r.IntN(len(hs))]; !doubled[c] {
				h, again = c, true // a second copy of a key already in
				doubled[c] = true
			}
		}
		e1, e2 := shared.InsertHash(h), owned.InsertHashOwned(h)
		if (e1 == nil) != (e2 == nil) || e2 != nil && !errors.Is(e2, ErrFull) {
			t.Fatalf("%+v op %d: InsertHash: %v, InsertHashOwned: %v", g, i, e1, e2)
		}
		if shared.Count() != owned.Count() || shared.moves.Load() != owned.moves.Load() {
			t.Fatalf("%+v op %d: count %d/%d, moves %d/%d (InsertHash/InsertHashOwned)",
				g, i, shared.Count(), owned.Count(), shared.moves.Load(), owned.moves.Load())
		}
		if e1 != nil {
			break
		}
		if !again {
			hs = append(hs, h)
		}
		if i%11 == 10 && len(hs) > 1 { // delete one
			j := r.IntN(len(hs))
			if !shared.DeleteHash(hs[j]) || !owned.DeleteHash(hs[j]) {
				t.Fatalf("%+v op %d: delete of an inserted key failed", g, i)
			}
			hs[j] = hs[len(hs)-1]
			hs = hs[:len(hs)-1]
		}
	}
	if !slices.Equal(shared.Words(), owned.Words()) {
		t.Fatalf("%+v: InsertHashOwned left other words than InsertHash", g)
	}
	for _, h := range hs {
		if !owned.HasHash(h) {
			t.Fatalf("%+v: false negative after InsertHashOwned", g)
		}
	}
	if g.Buckets >= 257 && g.BucketSize >= 2 && owned.moves.Load() == 0 {
		t.Fatalf("%+v: filled without a displacement (occupancy %.3f): the test missed the slow path", g, owned.Occupancy())
	}
	c := owned.Count()
	if owned.SetCount(c + 5); owned.Count() != c+5 {
		t.Fatalf("Count %d after SetCount(%d)", owned.Count(), c+5)
	}
}
