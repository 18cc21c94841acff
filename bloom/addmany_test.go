package bloom

import (
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestAddNewHashesMatchesAddLoop: AddNewHashes answers, sets and counts
// as a loop that skips the marked keys, stops at the first key it would
// add at the limit, and adds the others with AddHashBlock. The keys repeat
// and share blocks within a batch (a small filter), so each key must see
// the bits of the ones before it; the limit falls anywhere.
func TestAddNewHashesMatchesAddLoop(t *testing.T) {
	r := testseed.New(t)
	for round := range 200 {
		g, err := Plan(uint64(1+r.IntN(2000)), 0.001+r.Float64()/10)
		if err != nil {
			t.Fatal(err)
		}
		got, err := New(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := New(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		pre := r.IntN(100)
		for range pre {
			h := r.Uint64()
			got.AddHash(h)
			want.AddHash(h)
		}
		hs := make([]uint64, r.IntN(300))
		for i := range hs {
			if i > 0 && r.IntN(4) == 0 {
				hs[i] = hs[r.IntN(i)] // a repeat, maybe in the same batch
			} else {
				hs[i] = r.Uint64()
			}
		}
		var skip []bool
		if r.IntN(2) == 0 {
			skip = make([]bool, len(hs))
			for i := range skip {
				skip[i] = r.IntN(3) == 0
			}
		}
		limit := got.Count() + uint64(r.IntN(len(hs)+2))
		if r.IntN(4) == 0 {
			limit = got.Count() // full from the start
		}

		wantAdded := make([]bool, len(hs))
		wantBlocks := make([]uint64, len(hs))
		wantN := len(hs)
		for i, h := range hs {
			if skip != nil && skip[i] {
				continue
			}
			if want.Count() >= limit && !want.HasHash(h) {
				wantN = i
				break
			}
			wantAdded[i], wantBlocks[i] = want.AddHashBlock(h)
		}

		added := make([]bool, len(hs))
		blocks := make([]uint64, len(hs))
		for i := range added {
			added[i] = r.IntN(2) == 0 // garbage the call must overwrite
		}
		n := got.AddNewHashes(hs, skip, added, blocks, limit)
		if n != wantN {
			t.Fatalf("round %d: answered %d of %d keys, want %d", round, n, len(hs), wantN)
		}
		if !slices.Equal(added[:n], wantAdded[:n]) {
			t.Fatalf("round %d: answers differ from the AddHashBlock loop", round)
		}
		for i := range n {
			if added[i] && blocks[i] != wantBlocks[i] {
				t.Fatalf("round %d: key %d: block %d, want %d", round, i, blocks[i], wantBlocks[i])
			}
		}
		if got.Count() != want.Count() {
			t.Fatalf("round %d: count %d, want %d", round, got.Count(), want.Count())
		}
		if !slices.Equal(got.Words(), want.Words()) {
			t.Fatalf("round %d: words differ from the AddHashBlock loop", round)
		}
	}
}

// TestAddNewHashesEmpty: no keys, no answer, no count.
func TestAddNewHashesEmpty(t *testing.T) {
	g, err := Plan(100, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.AddNewHashes(nil, nil, nil, nil, 10); n != 0 || f.Count() != 0 {
		t.Fatalf("AddNewHashes(nil) = %d, count %d; want 0, 0", n, f.Count())
	}
}
