package store

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSparseIndex: find numbers exactly the indexed set, in order, for
// sets dense and sparse, at chunk and top-word edges, and answers false
// for every other index, past the last chunk too.
func TestSparseIndex(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	edges := []uint64{0, 1, 63, 64, chunkSpan - 1, chunkSpan, chunkSpan + 1, 64*chunkSpan - 1, 64 * chunkSpan, 64*chunkSpan + 63, 1 << 30}
	cases := [][]uint64{nil, {0}, {1 << 30}, edges}
	for _, spec := range []struct{ span, n uint64 }{{1000, 999}, {1 << 20, 100}, {1 << 20, 50_000}, {1 << 26, 3000}} {
		set := map[uint64]bool{}
		for uint64(len(set)) < spec.n {
			set[rng.Uint64N(spec.span)] = true
		}
		var idx []uint64
		for i := range set {
			idx = append(idx, i)
		}
		cases = append(cases, idx)
	}
	for _, idx := range cases {
		idx = slices.Clone(idx)
		slices.Sort(idx)
		x := newSparseIndex(idx)
		want := map[uint64]int{}
		for n, i := range idx {
			want[i] = n
		}
		probe := append(slices.Clone(edges), idx...)
		for range 20_000 {
			probe = append(probe, rng.Uint64N(1<<31))
		}
		for _, i := range idx {
			probe = append(probe, i+1, i-1)
		}
		for _, i := range probe {
			n, ok := x.find(i)
			wn, wok := want[i]
			if ok != wok || n != wn {
				t.Fatalf("a set of %d: find(%d) = %d, %v; want %d, %v", len(idx), i, n, ok, wn, wok)
			}
			// anyIn over the aligned runs of 1, 8 and 64 indices
			// that hold i (a counting block's 8 words, say).
			for _, run := range []uint64{1, 8, 64} {
				lo := i / run * run
				any := false
				for j := lo; j < lo+run; j++ {
					_, in := want[j]
					any = any || in
				}
				if got := x.anyIn(lo, run); got != any {
					t.Fatalf("a set of %d: anyIn(%d, %d) = %v, want %v", len(idx), lo, run, got, any)
				}
			}
		}
	}
}
