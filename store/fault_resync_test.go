package store

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
)

// TestCheckpointMsyncFailureWritesResync checks the package doc's "If an
// msync of a filter file fails (at Open or at a checkpoint), the store
// writes DIR/RESYNC first: the next Open then rewrites every data page"
// for the checkpoint case. The fault is an EIO from every msync during
// one Checkpoint (the simulated pages stay clean but unwritten, as
// Linux leaves them). The failed Checkpoint must leave RESYNC; the
// process then dies (the page cache survives), and the next Open must
// take the marker and remove it; a power loss after that Open's clean
// Close must keep every acknowledged key of every kind, a Loaded
// filter's included. Each sequence's power loss keeps a random part of
// the unsynced data: the seed is the run's (testseed) plus the sequence's
// index, 20 sequences, 5 under -short.
func TestCheckpointMsyncFailureWritesResync(t *testing.T) {
	seqSeeds(t, testseed.Seed(t), 20, 5, func(seed uint64) { checkpointMsyncFailureSeq(t, seed, false) })
}

// TestCheckpointMsyncFailureStickyLoss is TestCheckpointMsyncFailureWritesResync
// where a page the failed msync lost stays lost however it is written
// again, until it is dropped from the cache (Sim.SetStickyLoss: ext4's
// unwritten extents, see mmapbits.Evicter). Rewriting every page from the
// cache then writes nothing: the Open that finds RESYNC must drop the
// pages and rebuild them from the disk and the WAL. (Before it did, keys
// added after the last good checkpoint were gone after the power loss:
// "key 201 lost: bloom false, cuckoo true, counting true".)
func TestCheckpointMsyncFailureStickyLoss(t *testing.T) {
	seqSeeds(t, testseed.Seed(t), 20, 5, func(seed uint64) { checkpointMsyncFailureSeq(t, seed, true) })
}

func checkpointMsyncFailureSeq(t *testing.T, seed uint64, sticky bool) {
	rng := newTestRand(seed)
	w := newSimWorld(t, SyncAlways)
	w.sim.SetStickyLoss(sticky)
	fail := &failSwitch{err: syscall.EIO}
	w.sim.SetInjector(fail.sim(mmapbits.OpSync))
	s, err := w.open(t)
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 20_000, NonScaling: true})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 4096})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 4096})
	must(t, err)
	l, err := s.CreateBloom("l", BloomConfig{Capacity: 20_000, NonScaling: true})
	must(t, err)
	must(t, l.Load(Keys(func(yield func([]byte) bool) {
		for i := range 5000 {
			if !yield(key(i)) {
				return
			}
		}
	})))
	for i := range 600 {
		must(t, second(b.Add(key(i))))
		must(t, c.Add(key(i)))
		must(t, n.Add(key(i)))
		if i == 200 {
			must(t, s.Checkpoint())
		}
	}
	resync := filepath.Join(w.dir, format.ResyncName)
	fail.on.Store(true)
	if err := s.Checkpoint(); !errors.Is(err, ErrFailed) {
		t.Fatalf("seed %d: Checkpoint with a failing msync: %v, want ErrFailed", seed, err)
	}
	fail.on.Store(false)
	if _, err := os.Stat(resync); err != nil {
		t.Fatalf("seed %d: no %s after a failed checkpoint msync: %v", seed, format.ResyncName, err)
	}
	w.kill(s)
	s, err = w.open(t)
	if err != nil {
		t.Fatalf("seed %d: Open after the process died: %v", seed, err)
	}
	if _, err := os.Stat(resync); err == nil {
		t.Fatalf("seed %d: %s still there after a successful Open", seed, format.ResyncName)
	}
	must(t, s.Close())
	w.powerLoss(nil, rng)
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
	l, err = s.Bloom("l")
	must(t, err)
	for i := range 600 {
		if !b.Has(key(i)) || !c.Has(key(i)) || !n.Has(key(i)) {
			t.Fatalf("seed %d: key %d lost: bloom %v, cuckoo %v, counting %v", seed, i, b.Has(key(i)), c.Has(key(i)), n.Has(key(i)))
		}
	}
	if st := mustInfo(t, l).State; st != "ok" {
		t.Fatalf("seed %d: the loaded filter is %q, want ok", seed, st)
	}
	for i := range 5000 {
		if !l.Has(key(i)) {
			t.Fatalf("seed %d: loaded key %d lost", seed, i)
		}
	}
	if rep, err := s.Check(); err != nil {
		t.Fatalf("seed %d: Check: %v %+v", seed, err, rep)
	}
}
