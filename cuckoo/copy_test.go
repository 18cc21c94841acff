package cuckoo

import (
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestCopyInto: a filter filled in private words and copied, in two
// ranges, into an empty one of its geometry leaves the same words, and
// every inserted hash is found in the copy.
func TestCopyInto(t *testing.T) {
	r := testseed.New(t)
	for round := range 10 {
		g, err := Plan(500+r.Uint64N(3000), 2+r.IntN(3), 4+r.IntN(13))
		if err != nil {
			t.Fatal(err)
		}
		g.Salt = r.Uint64()
		built, _ := New(g, nil)
		dst, _ := New(g, nil)
		var hs []uint64
		for range r.Uint64N(g.Slots()) {
			h := r.Uint64()
			if built.InsertHash(h) != nil {
				break
			}
			hs = append(hs, h)
		}
		cut := r.Uint64N(g.Words() + 1)
		built.CopyInto(dst, cut, g.Words())
		built.CopyInto(dst, 0, cut)
		if !slices.Equal(dst.Words(), built.Words()) {
			t.Fatalf("round %d (%+v): the copy's words differ from the built ones", round, g)
		}
		for i, h := range hs {
			if !dst.HasHash(h) {
				t.Fatalf("round %d (%+v): hash %d of %d absent from the copy", round, g, i, len(hs))
			}
		}
	}
}
