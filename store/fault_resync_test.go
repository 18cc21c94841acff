package store

import (
	"errors"
	"math/rand/v2"
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
	w, fail := stickyFaultWorld(t, sticky)
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
	failCheckpoint(t, s, fail, seed)
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
	s = afterPowerLoss(t, w, s, rng, seed)
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
	mustCheckClean(t, s, seed)
}

// TestResyncRefusedWhileMapped: a read-only store that maps the filter
// files while the writer that finds RESYNC opens keeps their pages in
// memory, as the cache holds them: the Open must not rebuild over them.
// It fails with ErrBusy and leaves the marker; once the read-only store
// is closed, the next Open recovers every acknowledged change, also
// through a power loss after it. (Before, that Open succeeded and removed
// the marker, and after the power loss an adversarial tester's run lost
// every key added after the last good checkpoint: "cuckoo 199 keys (first
// 101)"; on the real kernel a read-only store held open through the
// recovery lost 22 cuckoo keys.) The seed is the run's (testseed) plus
// the sequence's index, 10 sequences, 3 under -short.
func TestResyncRefusedWhileMapped(t *testing.T) {
	seqSeeds(t, testseed.Seed(t), 10, 3, func(seed uint64) { resyncWhileMappedSeq(t, seed) })
}

func resyncWhileMappedSeq(t *testing.T, seed uint64) {
	rng := newTestRand(seed)
	w, fail := stickyFaultWorld(t, true)
	s, err := w.open(t)
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 4096})
	must(t, err)
	bm, err := s.CreateBitmap("m", 1<<16)
	must(t, err)
	const n = 300
	for i := range n {
		must(t, c.Add(key(i)))
		must(t, second(bm.Set(uint64(i*7))))
		if i == 100 {
			must(t, s.Checkpoint())
		}
	}
	failCheckpoint(t, s, fail, seed)
	w.kill(s)
	ro, err := Open(w.dir, WithSeams(Options{ReadOnly: true}, w.sim, w.fs))
	if err != nil {
		t.Fatalf("seed %d: read-only Open: %v", seed, err)
	}
	resync := filepath.Join(w.dir, format.ResyncName)
	if s, err := w.open(t); !errors.Is(err, ErrBusy) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("seed %d: the writer's Open with RESYNC while a read-only store maps the files: %v, want ErrBusy", seed, err)
	}
	if _, err := os.Stat(resync); err != nil {
		t.Fatalf("seed %d: %s gone after the refused Open: %v", seed, format.ResyncName, err)
	}
	must(t, ro.Close())
	s, err = w.open(t)
	if err != nil {
		t.Fatalf("seed %d: Open once the read-only store closed: %v", seed, err)
	}
	s = afterPowerLoss(t, w, s, rng, seed)
	c, err = s.Cuckoo("c")
	must(t, err)
	bm, err = s.Bitmap("m")
	must(t, err)
	for i := range n {
		if !c.Has(key(i)) || !bm.Get(uint64(i*7)) {
			t.Fatalf("seed %d: change %d lost: cuckoo %v, bitmap %v", seed, i, c.Has(key(i)), bm.Get(uint64(i*7)))
		}
	}
	mustCheckClean(t, s, seed)
}

// TestResyncEvictFailureKeepsMarker checks evictForResync's "any other
// failure fails Open, which leaves the marker" for a failed sync or drop
// of a layer file's pages (an EIO from Evict, mmapbits.OpEvict): with
// pages a failed msync lost still in the cache (Sim.SetStickyLoss), an
// Open that went on without dropping them would rebuild over them. The
// Open must fail with the error and keep RESYNC; the next Open, whose
// evictions succeed, must recover every acknowledged change, also through
// a power loss after it. The seed is the run's (testseed) plus the
// sequence's index, 10 sequences, 3 under -short.
func TestResyncEvictFailureKeepsMarker(t *testing.T) {
	seqSeeds(t, testseed.Seed(t), 10, 3, func(seed uint64) { resyncEvictFailureSeq(t, seed) })
}

func resyncEvictFailureSeq(t *testing.T, seed uint64) {
	rng := newTestRand(seed)
	w, fail := stickyFaultWorld(t, true)
	s, err := w.open(t)
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 4096, NonScaling: true})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 4096})
	must(t, err)
	const n = 300
	for i := range n {
		must(t, second(b.Add(key(i))))
		must(t, c.Add(key(i)))
		if i == 100 {
			must(t, s.Checkpoint())
		}
	}
	failCheckpoint(t, s, fail, seed)
	w.kill(s)
	evictFails := &failSwitch{err: syscall.EIO}
	evictFails.on.Store(true)
	w.sim.SetInjector(evictFails.sim(mmapbits.OpEvict))
	resync := filepath.Join(w.dir, format.ResyncName)
	if s, err := w.open(t); !errors.Is(err, syscall.EIO) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("seed %d: Open with RESYNC whose evictions fail with EIO: %v, want that EIO", seed, err)
	}
	if _, err := os.Stat(resync); err != nil {
		t.Fatalf("seed %d: %s gone after the failed Open: %v", seed, format.ResyncName, err)
	}
	evictFails.on.Store(false)
	s, err = w.open(t)
	if err != nil {
		t.Fatalf("seed %d: Open once evictions succeed: %v", seed, err)
	}
	if _, err := os.Stat(resync); err == nil {
		t.Fatalf("seed %d: %s still there after a successful Open", seed, format.ResyncName)
	}
	s = afterPowerLoss(t, w, s, rng, seed)
	b, err = s.Bloom("b")
	must(t, err)
	c, err = s.Cuckoo("c")
	must(t, err)
	for i := range n {
		if !b.Has(key(i)) || !c.Has(key(i)) {
			t.Fatalf("seed %d: key %d lost: bloom %v, cuckoo %v", seed, i, b.Has(key(i)), c.Has(key(i)))
		}
	}
	mustCheckClean(t, s, seed)
}

// TestResyncMarkerFallsBackToSession: where the resync marker cannot be
// created after a failed msync (its new file's first block is what a
// full thin-provisioned disk cannot write), the failed msync is recorded
// in the session marker, in place; the next Open makes the resync marker
// from it before it changes anything, and recovers every acknowledged
// change through a power loss. Once that Open has run, the session
// marker no longer records it. (Before, nothing recorded the failure:
// the next Open trusted the cache, and a reviewer's run lost 399 of 600
// acknowledged cuckoo keys after the power loss.) The seed is the run's
// (testseed) plus the sequence's index, 10 sequences, 3 under -short.
func TestResyncMarkerFallsBackToSession(t *testing.T) {
	t.Cleanup(func() { createResyncFile = nil })
	seqSeeds(t, testseed.Seed(t), 10, 3, func(seed uint64) { resyncFallbackSeq(t, seed) })
}

func resyncFallbackSeq(t *testing.T, seed uint64) {
	rng := newTestRand(seed)
	w, fail := stickyFaultWorld(t, true)
	s, err := w.open(t)
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 4096})
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 20_000, NonScaling: true})
	must(t, err)
	const n = 600
	for i := range n {
		must(t, c.Add(key(i)))
		must(t, second(b.Add(key(i))))
		if i == 200 {
			must(t, s.Checkpoint())
		}
	}
	createResyncFile = func() error { return syscall.ENOSPC }
	failCheckpoint(t, s, fail, seed)
	createResyncFile = nil
	resync := filepath.Join(w.dir, format.ResyncName)
	if _, err := os.Stat(resync); err == nil {
		t.Fatalf("seed %d: %s made though its creation failed", seed, format.ResyncName)
	}
	if content, err := format.ReadSession(w.dir); err != nil || !format.SessionResync(content) {
		t.Fatalf("seed %d: the session marker does not record the failed msync: %q, %v", seed, content, err)
	}
	w.kill(s)
	s, err = w.open(t)
	if err != nil {
		t.Fatalf("seed %d: Open after the failure: %v", seed, err)
	}
	if content, err := format.ReadSession(w.dir); err != nil || format.SessionResync(content) {
		t.Fatalf("seed %d: the session marker still records the failed msync after a recovering Open: %q, %v", seed, content, err)
	}
	if _, err := os.Stat(resync); err == nil {
		t.Fatalf("seed %d: %s left after a successful Open", seed, format.ResyncName)
	}
	s = afterPowerLoss(t, w, s, rng, seed)
	c, err = s.Cuckoo("c")
	must(t, err)
	b, err = s.Bloom("b")
	must(t, err)
	for i := range n {
		if !c.Has(key(i)) || !b.Has(key(i)) {
			t.Fatalf("seed %d: key %d lost: cuckoo %v, bloom %v", seed, i, c.Has(key(i)), b.Has(key(i)))
		}
	}
	mustCheckClean(t, s, seed)
}

// stickyFaultWorld returns a SyncAlways simulated world, its lost pages
// sticky if sticky is set (Sim.SetStickyLoss), and the switch that makes
// its msyncs fail with EIO.
func stickyFaultWorld(t *testing.T, sticky bool) (*simWorld, *failSwitch) {
	w := newSimWorld(t, SyncAlways)
	w.sim.SetStickyLoss(sticky)
	fail := &failSwitch{err: syscall.EIO}
	w.sim.SetInjector(fail.sim(mmapbits.OpSync))
	return w, fail
}

// failCheckpoint runs a Checkpoint of s with every msync failing (fail,
// from stickyFaultWorld), which must fail the store.
func failCheckpoint(t *testing.T, s *Store, fail *failSwitch, seed uint64) {
	t.Helper()
	fail.on.Store(true)
	defer fail.on.Store(false)
	if err := s.Checkpoint(); !errors.Is(err, ErrFailed) {
		t.Fatalf("seed %d: Checkpoint with a failing msync: %v, want ErrFailed", seed, err)
	}
}

// afterPowerLoss closes s, loses the power (rng picks which unsynced
// pages reach the disk) and opens the store again, to be closed when the
// test ends.
func afterPowerLoss(t *testing.T, w *simWorld, s *Store, rng *rand.Rand, seed uint64) *Store {
	t.Helper()
	must(t, s.Close())
	w.powerLoss(nil, rng)
	s, err := w.open(t)
	if err != nil {
		t.Fatalf("seed %d: Open after the power loss: %v", seed, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// mustCheckClean fails the test if s.Check reports a problem.
func mustCheckClean(t *testing.T, s *Store, seed uint64) {
	t.Helper()
	if rep, err := s.Check(); err != nil {
		t.Fatalf("seed %d: Check: %v %+v", seed, err, rep)
	}
}

// TestSessionResyncRefusedCatalogChangesNothing: a session marker that
// records a failed msync (no RESYNC made) and a catalog that fails Open's
// checks (a checkpoint beyond the last LSN): the failed Open writes no
// file, RESYNC included, as Open promises for a catalog that does not
// check out. (Its catalog eviction, which runs before the catalog is
// read, only looks at the markers.)
func TestSessionResyncRefusedCatalogChangesNothing(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	must(t, second(s.CreateBloom("b", BloomConfig{Capacity: 100})))
	s.abandonForTest() // SESSION stays
	must(t, os.WriteFile(filepath.Join(dir, sessionFile), format.SessionContentResync(1, 0), 0o644))
	checkpointBeyondMaxLSN(t, dir)
	if s, err := Open(dir, nil); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open of a catalog whose checkpoint is beyond the last LSN: %v, want ErrCorrupt", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, format.ResyncName)); err == nil {
		t.Fatalf("the Open that refused the catalog made %s", format.ResyncName)
	}
}
