package cuckoo

import (
	"errors"
	"math"
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
		if b := append(built.CopyInto(dst, cut, g.Words()), built.CopyInto(dst, 0, cut)...); len(b) > 0 {
			t.Fatalf("round %d: CopyInto into an empty filter found %d busy buckets", round, len(b))
		}
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

// TestCopyIntoBusyLayer: CopyInto over a filter that holds fingerprints
// (a layer whose count said it was empty) overwrites none of its
// buckets and returns the busy ones; MergeBucket then puts the build's
// fingerprints of those buckets beside the layer's, and every key of
// both is found. With more keys than fit, MergeBucket stops with ErrFull
// and the layer's own keys are all still found.
func TestCopyIntoBusyLayer(t *testing.T) {
	r := testseed.New(t)
	for round := range 24 {
		b := 1 + r.IntN(8)
		g, err := Plan(500+r.Uint64N(3000), b, 4+r.IntN(min(16, 64/b)-3))
		if err != nil {
			t.Fatal(err)
		}
		// Each filter filled to under half of what its shape holds, so
		// that both fit in one table (b = 1 holds about 40%; fingerprints
		// of 4 or 5 bits have so few alternate buckets that less fits).
		pct := map[int]uint64{1: 10, 2: 25, 3: 35}[b]
		if pct == 0 {
			pct = 40
		}
		if g.FingerprintBits <= 5 {
			pct /= 2
		}
		g.Salt, g.Derivation = r.Uint64(), Derivation(round%2)
		overfill := round%3 == 2
		layer, _ := New(g, nil)
		built, _ := New(g, nil)
		fill := func(f *Filter, n uint64) (hs []uint64) {
			for range n {
				h := r.Uint64()
				if f.InsertHash(h) != nil {
					break
				}
				hs = append(hs, h)
			}
			return hs
		}
		old := fill(layer, g.Slots()*pct/100)
		want := slices.Clone(layer.Words())
		n := g.Slots() * pct / 100
		if overfill {
			n = g.Slots() * 2 * pct / 100
		}
		loaded := fill(built, n)
		var busy []uint64
		cut := r.Uint64N(g.Words() + 1)
		busy = append(busy, built.CopyInto(layer, 0, cut)...)
		busy = append(busy, built.CopyInto(layer, cut, g.Words())...)
		for _, i := range busy {
			if want[i] == 0 || built.Words()[i] == 0 {
				t.Fatalf("round %d: CopyInto reported bucket %d busy, layer word %#x, build word %#x", round, i, want[i], built.Words()[i])
			}
		}
		for i, w := range want {
			if w != 0 && built.Words()[i] != 0 && !slices.Contains(busy, uint64(i)) {
				t.Fatalf("round %d: bucket %d held fingerprints in both and was not reported busy", round, i)
			}
		}
		if len(busy) == 0 {
			t.Fatalf("round %d: no bucket busy in two %d%%-full tables: the test missed the case", round, pct)
		}
		var mergeErr error
		for _, i := range busy {
			if _, err := built.MergeBucket(layer, i); err != nil {
				mergeErr = err
				break
			}
		}
		for i, h := range old {
			if !layer.HasHash(h) {
				t.Fatalf("round %d (overfill %v): the layer's own key %d of %d lost (merge: %v)", round, overfill, i, len(old), mergeErr)
			}
		}
		switch {
		case mergeErr != nil && !errors.Is(mergeErr, ErrFull):
			t.Fatalf("round %d: MergeBucket: %v, want ErrFull", round, mergeErr)
		case mergeErr == nil:
			for i, h := range loaded {
				if !layer.HasHash(h) {
					t.Fatalf("round %d: the build's key %d of %d absent after the merge", round, i, len(loaded))
				}
			}
		case !overfill && !overCopies(&g, append(old, loaded...)):
			t.Fatalf("round %d (%+v): twice %d%% of the slots did not fit: %v", round, g, pct, mergeErr)
		}
	}
}

// overCopies reports whether no table of g's geometry holds every key of
// hs, however empty: each key may sit in its two buckets only, each bucket
// holds BucketSize, and a matching of keys to slots (augmenting paths)
// finds no place for some key. With b = 1 and 4-bit fingerprints, whose
// alternate buckets take only 15 offsets, some 800 keys do so in about one
// run of the test in a hundred.
func overCopies(g *Geometry, hs []uint64) bool {
	type pair struct{ a, b uint64 }
	where := make([]pair, len(hs))
	for k, h := range hs {
		i1, _, i2 := g.Locate(h)
		where[k] = pair{i1, i2}
	}
	held := make(map[uint64][]int) // bucket -> keys placed in it
	var seen map[uint64]bool
	var place func(k int) bool
	place = func(k int) bool {
		for _, i := range [2]uint64{where[k].a, where[k].b} {
			if seen[i] {
				continue
			}
			seen[i] = true
			if len(held[i]) < g.BucketSize {
				held[i] = append(held[i], k)
				return true
			}
			for j, other := range held[i] {
				if place(other) {
					held[i][j] = k
					return true
				}
			}
		}
		return false
	}
	for k := range hs {
		seen = make(map[uint64]bool)
		if !place(k) {
			return true
		}
	}
	return false
}

// TestMergeBucketOutOfRange: MergeBucket of a bucket index beyond the
// filter, or into a filter of another geometry, is ErrInvalid and changes
// nothing (before, an index out of range panicked).
func TestMergeBucketOutOfRange(t *testing.T) {
	g, err := Plan(100, 4, 16)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := New(g, nil)
	dst, _ := New(g, nil)
	if err := src.InsertHash(12345); err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint64{g.Buckets, math.MaxUint64} {
		if n, err := src.MergeBucket(dst, i); n != 0 || !errors.Is(err, ErrInvalid) {
			t.Fatalf("MergeBucket(%d): %d, %v; want 0, ErrInvalid", i, n, err)
		}
	}
	g2 := g
	g2.Buckets++
	other, _ := New(g2, nil)
	if _, err := src.MergeBucket(other, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("MergeBucket into another geometry: %v, want ErrInvalid", err)
	}
	if dst.Count() != 0 {
		t.Fatal("a refused MergeBucket changed its destination")
	}
}
