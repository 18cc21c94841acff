package store

import (
	"math/rand/v2"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestWordTxLoadsItsLastStore: a wordTx's Load returns the last value
// stored to a word (a cuckoo kick chain can store one word twice), then a
// batch's earlier after-image, then the overlay's, then the mapped word,
// below smallTx stores, where it scans them, and above, where it indexes
// them; writes keeps every store in order.
func TestWordTxLoadsItsLastStore(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	for _, stores := range []int{1, 2, smallTx, smallTx + 1, 3 * smallTx, 200} {
		words := make([]uint64, 16)
		for i := range words {
			words[i] = 1000 + uint64(i)
		}
		b := &filterBase{}
		b.ov.vals = map[wkey]pendingVal{{0, 14}: {val: 714}, {1, 13}: {val: 1}}
		tx := &wordTx{b: b, words: words} // as b.tx makes it, without a mapped layer
		tx.writes = tx.buf[:0]
		tx.batch = map[wkey]uint64{{0, 13}: 613, {0, 14}: 614}
		want := map[uint64]uint64{13: 613, 14: 614, 15: 1015}
		var writes []uint64
		for j := range stores {
			i := r.Uint64N(8) // few words: most are stored more than once
			v := uint64(j + 1)
			tx.Store(i, v)
			want[i] = v
			writes = append(writes, i)
			for k := range uint64(16) {
				w, ok := want[k]
				if !ok {
					w = 1000 + k
				}
				if got := tx.Load(k); got != w {
					t.Fatalf("seed %d, %d stores: after store %d, Load(%d) = %d, want %d", seed, stores, j, k, got, w)
				}
			}
		}
		if len(tx.writes) != len(writes) {
			t.Fatalf("seed %d: %d writes kept, want %d", seed, len(tx.writes), len(writes))
		}
		for j, w := range tx.writes {
			if w.Index != writes[j] || w.Value != uint64(j+1) {
				t.Fatalf("seed %d: write %d is %+v, want {%d %d}", seed, j, w, writes[j], j+1)
			}
		}
	}
}
