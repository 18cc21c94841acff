package store

import (
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestDropRecreatePowerLoss checks the doc's promise for Drop ("the
// filter leaves the catalog first; the WAL keeps the records of the
// dropped id") across a power loss, which the simulated crash sequences
// never combine with a drop: a cuckoo filter with records after the last
// checkpoint is dropped, a bitmap is created under its name and written,
// and the power fails (a random subset of unsynced pages kept). The store
// opens, the bitmap holds exactly its acknowledged bits (no record of the
// dropped filter reaches it), a filter beside them keeps every key, and
// Check is clean. 30 sequences per sync mode (8 under -short), seeds the
// run's (testseed) plus the sequence's index.
func TestDropRecreatePowerLoss(t *testing.T) {
	base := testseed.Seed(t)
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		if !seqSeeds(t, base, 30, 8, func(seed uint64) { dropRecreatePowerLossSeq(t, mode, seed) }) {
			return
		}
	}
}

func dropRecreatePowerLossSeq(t *testing.T, mode SyncMode, seed uint64) {
	rng := newTestRand(seed)
	w := newSimWorld(t, mode)
	s, err := w.open(t)
	must(t, err)
	c, err := s.CreateCuckoo("x", CuckooConfig{Capacity: 256})
	must(t, err)
	keep, err := s.CreateCounting("keep", BloomConfig{Capacity: 1000})
	must(t, err)
	for i := range 200 {
		if i == 100 {
			must(t, s.Checkpoint())
		}
		must(t, c.Add(key(i)))
		must(t, keep.Add(key(i)))
	}
	must(t, s.Drop("x"))
	m, err := s.CreateBitmap("x", 1024)
	must(t, err)
	for i := range 50 {
		must(t, second(m.Set(uint64(i*3))))
	}
	if mode == SyncInterval {
		must(t, s.log.Sync()) // acknowledged, under SyncInterval, once synced
	}
	w.powerLoss(s, rng)
	s, err = w.open(t)
	if err != nil {
		t.Fatalf("%v seed %d: Open after a drop, a create under the name and a power loss: %v", mode, seed, err)
	}
	defer s.Close()
	m, err = s.Bitmap("x")
	if err != nil {
		t.Fatalf("%v seed %d: %v", mode, seed, err)
	}
	for i := range 1024 {
		if want := i%3 == 0 && i < 150; m.Get(uint64(i)) != want {
			t.Fatalf("%v seed %d: bit %d = %v, want %v", mode, seed, i, !want, want)
		}
	}
	keep, err = s.Counting("keep")
	must(t, err)
	for i := range 200 {
		if !keep.Has(key(i)) {
			t.Fatalf("%v seed %d: key %d of the filter beside them absent", mode, seed, i)
		}
	}
	if rep, err := s.Check(); err != nil {
		t.Fatalf("%v seed %d: Check: %v %+v", mode, seed, err, rep)
	}
}
