package store

import (
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// TestExternalDurableAfterFailedSync checks "ExternalDurable never names
// a record the store does not hold durably" (the engine may delete its
// records at or below it) when the store fails: a WAL fdatasync or a
// filter msync fails while external records are applied, ExternalDurable
// is read on the failed store (and again after more applies, which fail),
// then the power fails, with or without a Close first. After Open,
// ExternalDurable is at least what the failed store reported, and every
// op of the records at or below it is there. 25 sequences per fault (6
// under -short), seeds the run's (testseed) plus the sequence's index.
func TestExternalDurableAfterFailedSync(t *testing.T) {
	base := testseed.Seed(t)
	for _, what := range []string{"fdatasync", "msync"} {
		if !seqSeeds(t, base, 25, 6, func(seed uint64) { externalFailedSyncSeq(t, what, seed) }) {
			return
		}
	}
}

func externalFailedSyncSeq(t *testing.T, what string, seed uint64) {
	rng := newTestRand(seed)
	w := newSimWorld(t, SyncInterval)
	fail := &failSwitch{err: syscall.EIO}
	w.sim.SetInjector(fail.sim(mmapbits.OpSync))
	w.fs.SetInjector(fail.wal(wal.OpSync))
	s, err := w.open(t)
	must(t, err)
	m, err := s.CreateBitmap("m", 4096)
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 4096})
	must(t, err)
	offs := map[uint64]uint64{} // seq -> the bit and key index its record sets
	apply := func(i int) error {
		b := s.NewBatch()
		b.BitmapSet(m, uint64(i))
		b.CuckooAdd(c, key(i))
		rec, err := b.Encode()
		if err != nil {
			return err
		}
		seq, err := ExternalSeq(rec)
		must(t, err)
		offs[seq] = uint64(i)
		_, err = s.ApplyExternal(rec)
		return err
	}
	i := 0
	for ; i < 100; i++ {
		must(t, apply(i))
		switch i {
		case 40:
			must(t, s.Checkpoint())
		case 70:
			must(t, s.log.Sync())
		}
	}
	fail.on.Store(true)
	var ferr error
	if what == "fdatasync" {
		ferr = s.log.Sync()
	}
	if ferr == nil {
		ferr = s.Checkpoint()
	}
	if ferr == nil {
		t.Fatalf("%s seed %d: the injected failure did not fail the store", what, seed)
	}
	reported := s.ExternalDurable()
	fail.on.Store(false)
	for ; i < 110; i++ {
		_ = apply(i) // fails: the store has failed
	}
	reported = max(reported, s.ExternalDurable())
	if rng.IntN(2) == 0 {
		_ = s.Close()
		w.powerLoss(nil, rng)
	} else {
		w.powerLoss(s, rng)
	}
	s, err = w.open(t)
	if err != nil {
		t.Fatalf("%s seed %d: Open after the power loss: %v", what, seed, err)
	}
	defer s.Close()
	if d := s.ExternalDurable(); d < reported {
		t.Fatalf("%s seed %d: the failed store reported ExternalDurable %d, after a power loss it is %d: records %d..%d, which the engine may have deleted, are gone", what, seed, reported, d, d+1, reported)
	}
	m, err = s.Bitmap("m")
	must(t, err)
	c, err = s.Cuckoo("c")
	must(t, err)
	for seq, off := range offs {
		if seq <= reported && (!m.Get(off) || !c.Has(key(int(off)))) {
			t.Fatalf("%s seed %d: record %d (at or below ExternalDurable %d) lost: bit %d %v", what, seed, seq, reported, off, m.Get(off))
		}
	}
}
