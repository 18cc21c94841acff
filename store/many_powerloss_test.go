package store

import (
	"errors"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestManyPartialDurableAcrossPowerLoss checks the package doc's promise
// for the many-key calls: "they stop at the first key that cannot apply
// ... and return the answers for the keys before it, which are durable".
// TestAddManyStopsAtFull checks it across a kill (the page cache kept);
// here the fault is a power loss (only synced bytes kept) right after a
// partial call of each kind under SyncAlways: Bloom and counting AddMany
// and cuckoo AddMany stopped by ErrFull, bitmap SetMany by an offset out
// of range, cuckoo DeleteMany by ErrAmbiguous. Every answer given must
// survive. The power loss keeps a random part of the unsynced data: the
// seed is the run's (testseed) plus the sequence's index, 40 sequences,
// 10 under -short.
func TestManyPartialDurableAcrossPowerLoss(t *testing.T) {
	seqSeeds(t, testseed.Seed(t), 40, 10, func(seed uint64) { manyPartialPowerLossSeq(t, seed) })
}

func manyPartialPowerLossSeq(t *testing.T, seed uint64) {
	rng := newTestRand(seed)
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	amb := ambiguousCuckoo(t, s)
	must(t, s.Rename("c", "amb"))
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 3, NonScaling: true})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 8, BucketSize: 2, NonScaling: true})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 2, NonScaling: true})
	must(t, err)
	m, err := s.CreateBitmap("m", 100)
	must(t, err)
	must(t, s.Checkpoint())

	keys := [][]byte{[]byte("a"), []byte("b"), []byte("a"), []byte("c"), []byte("d"), []byte("e")}
	if got, err := b.AddMany(keys); !errors.Is(err, ErrFull) || !slices.Equal(got, []bool{true, true, false, true}) {
		t.Fatalf("seed %d: bloom AddMany = %v, %v; want 4 answers and ErrFull", seed, got, err)
	}
	hot := slices.Repeat([][]byte{[]byte("hot")}, 6)
	if k, err := c.AddMany(append(hot, []byte("cold"))); k != 4 || !errors.Is(err, ErrFull) {
		t.Fatalf("seed %d: cuckoo AddMany = %d, %v; want 4 and ErrFull", seed, k, err)
	}
	if k, err := n.AddMany(keys[:4]); k != 2 || !errors.Is(err, ErrFull) {
		t.Fatalf("seed %d: counting AddMany = %d, %v; want 2 and ErrFull", seed, k, err)
	}
	if got, err := m.SetMany([]uint64{5, 7, 100, 9}); !errors.Is(err, ErrInvalid) || !slices.Equal(got, []bool{true, true}) {
		t.Fatalf("seed %d: bitmap SetMany = %v, %v; want 2 answers and ErrInvalid", seed, got, err)
	}
	k1 := amb.Count(key(1))
	if got, err := amb.DeleteMany([][]byte{key(1), []byte("never"), []byte("twice"), key(2)}); !errors.Is(err, ErrAmbiguous) || !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("seed %d: cuckoo DeleteMany = %v, %v; want 2 answers and ErrAmbiguous", seed, got, err)
	}

	w.powerLoss(s, rng)
	s, err = w.open(t)
	if err != nil {
		t.Fatalf("seed %d: Open after the power loss: %v", seed, err)
	}
	defer s.Close()
	b, err = s.Bloom("b")
	must(t, err)
	c, err = s.Cuckoo("c")
	must(t, err)
	n, err = s.Counting("n")
	must(t, err)
	m, err = s.Bitmap("m")
	must(t, err)
	amb, err = s.Cuckoo("amb")
	must(t, err)
	if got := b.HasMany(keys[:4]); !slices.Equal(got, []bool{true, true, true, true}) {
		t.Fatalf("seed %d: after the power loss, bloom HasMany = %v", seed, got)
	}
	if got := c.Count([]byte("hot")); got != 4 {
		t.Fatalf("seed %d: after the power loss, cuckoo Count(hot) = %d, want 4", seed, got)
	}
	if got := n.HasMany(keys[:2]); !slices.Equal(got, []bool{true, true}) {
		t.Fatalf("seed %d: after the power loss, counting HasMany = %v", seed, got)
	}
	if got := amb.Count(key(1)); got != k1-1 {
		t.Fatalf("seed %d: after the power loss, the acknowledged delete of key 1 is undone: count %d, was %d before it", seed, got, k1)
	}
	if !m.Get(5) || !m.Get(7) || m.Get(9) {
		t.Fatalf("seed %d: after the power loss, bitmap bits 5 %v, 7 %v, 9 %v; want set, set, clear", seed, m.Get(5), m.Get(7), m.Get(9))
	}
}
