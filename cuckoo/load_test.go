package cuckoo

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/filterstore/filterstore/internal/racedetect"
)

// fillUntilFull inserts random hashes until the first ErrFull and returns
// the load factor reached.
func fillUntilFull(t testing.TB, g Geometry, maxIter int, seed uint64) float64 {
	f, err := New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	for {
		if err := f.InsertTo(f.own, r.Uint64(), maxIter); err != nil {
			if !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
			break
		}
	}
	if f.Occupancy() != float64(f.Count())/float64(g.Slots()) {
		t.Fatalf("occupancy %v != count %d / slots %d", f.Occupancy(), f.Count(), g.Slots())
	}
	return float64(f.Count()) / float64(g.Slots())
}

// TestLoadFactor measures the load reached before the first failed insert
// (no expansion, MaxIterations), with non-power-of-two bucket counts.
func TestLoadFactor(t *testing.T) {
	cases := []struct {
		b, f    int
		buckets uint64
		min     float64
	}{
		{1, 16, 200_003, 0.40},
		{2, 16, 100_003, 0.80},
		{4, 16, 50_021, 0.93},
		{8, 8, 25_013, 0.96},
		{4, 12, 3_001, 0.90},
		// Of several DeriveLocal blocks (a table of one is DeriveMul's):
		// the first failure comes in the fullest block.
		{4, 16, 4*LocalBlock + 12_345, 0.93},
		{2, 16, 3*LocalBlock + 7, 0.80},
	}
	for _, c := range cases {
		for _, d := range []Derivation{DeriveMix, DeriveMul, DeriveLocal} {
			if testing.Short() && c.buckets >= 2*LocalBlock && d != DeriveLocal {
				continue // the other derivations at this size are a comparison only
			}
			if racedetect.Enabled && testing.Short() && d != DeriveLocal && c.buckets > 5_000 {
				continue // one goroutine's code under the race detector: the store's derivation at every size, the others at the small one
			}
			g := Geometry{Buckets: c.buckets, BucketSize: c.b, FingerprintBits: c.f, Salt: 7, Derivation: d}
			var sum, lo float64 = 0, 1
			trials := 3
			if racedetect.Enabled && testing.Short() {
				// One fill runs the same code under the race detector and
				// checkptr (about 10x slower); the plain run keeps the
				// three trials the bound is read from.
				trials = 1
			}
			for s := range uint64(trials) {
				l := fillUntilFull(t, g, MaxIterations, s+1)
				sum += l
				lo = min(lo, l)
			}
			t.Logf("%v b=%d f=%d buckets=%d: load at first failure mean %.4f min %.4f (%d trials)", d, c.b, c.f, c.buckets, sum/float64(trials), lo, trials)
			if lo < c.min {
				t.Errorf("%v b=%d f=%d: load %.4f < %.2f", d, c.b, c.f, lo, c.min)
			}
		}
	}
}
