package cuckoo

import (
	"errors"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// checkBuilt fails t unless f holds exactly the keys of in (a multiset),
// each in one of its two buckets: every key is found, the count is
// len(in), and the table holds len(in) fingerprints, as many of each
// value as in's keys have.
func checkBuilt(t *testing.T, what string, f *Filter, in []uint64) {
	t.Helper()
	if f.Count() != uint64(len(in)) {
		t.Fatalf("%s: count %d, want %d", what, f.Count(), len(in))
	}
	want := map[[2]uint64]int{} // (bucket pair, fingerprint) -> copies
	for _, h := range in {
		i1, fp, i2 := f.g.Locate(h)
		if !f.HasHash(h) {
			t.Fatalf("%s: key %#x is missing", what, h)
		}
		want[[2]uint64{min(i1, i2)<<16 | fp, max(i1, i2)}]++
	}
	got := map[[2]uint64]int{}
	used := 0
	for i, v := range f.words {
		for j := range f.g.BucketSize {
			fp := f.slot(v, j)
			if fp == 0 {
				continue
			}
			used++
			alt := f.g.Alt(uint64(i), fp)
			got[[2]uint64{min(uint64(i), alt)<<16 | fp, max(uint64(i), alt)}]++
		}
	}
	if used != len(in) {
		t.Fatalf("%s: the table holds %d fingerprints, want %d", what, used, len(in))
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("%s: fingerprint %#x of buckets %d/%d: %d copies, want %d", what, k[0]&0xffff, k[0]>>16, k[1], got[k], n)
		}
	}
}

// TestBuild: Build on 1 to 8 goroutines leaves every key in one of its
// buckets, the count exact and no other fingerprint in the table, and
// reorders the keys it was given (a permutation); into a table filled to
// its target load every key goes in.
func TestBuild(t *testing.T) {
	r := testseed.New(t)
	n := uint64(300_000)
	if testing.Short() {
		n = 60_000
	}
	for _, workers := range []int{1, 2, 3, 8} {
		for round := range 3 {
			g, err := Plan(n, 2+r.IntN(3), 8+r.IntN(9))
			if err != nil {
				t.Fatal(err)
			}
			g.Salt = r.Uint64()
			f, _ := New(g, nil)
			hs := make([]uint64, n)
			for i := range hs {
				hs[i] = r.Uint64()
			}
			orig := slices.Clone(hs)
			k, err := f.Build(hs, workers)
			if err != nil || k != len(hs) {
				t.Fatalf("workers %d round %d (%+v): Build inserted %d of %d keys: %v", workers, round, g, k, len(hs), err)
			}
			slices.Sort(orig)
			checkBuilt(t, "Build", f, orig)
			slices.Sort(hs)
			if !slices.Equal(hs, orig) {
				t.Fatalf("workers %d round %d: Build's reordered keys are not a permutation of the keys given", workers, round)
			}
			t.Logf("workers %d round %d: %d keys, %d moves, %d stale paths searched again", workers, round, n, f.moves.Load(), staleBuildPaths.Load())
		}
	}
}

// TestBuildFull: given more keys than fit, Build inserts a prefix of its
// reordered keys, returns an error wrapping ErrFull, and the table holds
// exactly that prefix; keys repeated more often than their two buckets
// have slots are among the rest.
func TestBuildFull(t *testing.T) {
	r := testseed.New(t)
	for _, workers := range []int{1, 2, 4} {
		for round := range 4 {
			g, err := Plan(20_000+r.Uint64N(20_000), 4, 12)
			if err != nil {
				t.Fatal(err)
			}
			g.Salt = r.Uint64()
			f, _ := New(g, nil)
			hs := make([]uint64, g.Slots()*21/20)
			for i := range hs {
				hs[i] = r.Uint64()
			}
			dup := hs[0]
			if round%2 == 1 {
				// One key 20 times: at most 2*4 copies fit.
				for i := range 20 {
					hs[1+i*97] = dup
				}
			}
			orig := slices.Clone(hs)
			k, err := f.Build(hs, workers)
			if !errors.Is(err, ErrFull) || k >= len(hs) {
				t.Fatalf("workers %d round %d: Build inserted %d of %d keys into %d slots: %v", workers, round, k, len(hs), g.Slots(), err)
			}
			checkBuilt(t, "Build", f, hs[:k])
			slices.Sort(orig)
			slices.Sort(hs)
			if !slices.Equal(hs, orig) {
				t.Fatalf("workers %d round %d: Build's reordered keys are not a permutation of the keys given", workers, round)
			}
		}
	}
}
