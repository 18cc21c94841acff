package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// faultInjector fails, once armed, a random share of the syncs of filter
// files and WAL segments (EIO) and of WAL writes (ENOSPC), from its own
// seeded generator.
type faultInjector struct {
	armed atomic.Bool
	mu    sync.Mutex
	rng   *rand.Rand
	every int // one operation in every fails, on average
	fired atomic.Int64
}

func (f *faultInjector) fail(write bool) error {
	if !f.armed.Load() {
		return nil
	}
	f.mu.Lock()
	hit := f.rng.IntN(f.every) == 0
	f.mu.Unlock()
	if !hit {
		return nil
	}
	f.fired.Add(1)
	if write {
		return syscall.ENOSPC
	}
	return syscall.EIO
}

func (f *faultInjector) install(w *simWorld) {
	w.sim.SetInjector(func(op mmapbits.Op, _ string) error {
		if op == mmapbits.OpSync {
			return f.fail(false)
		}
		return nil
	})
	w.fs.SetInjector(func(op wal.Op, _ string) error {
		switch op {
		case wal.OpSync:
			return f.fail(false)
		case wal.OpWrite:
			return f.fail(true)
		}
		return nil
	})
}

// runFaultyOps is runOps for a store whose syncs may fail: the first error
// must be one of the injected ones (or the store's failure that wraps it),
// every later change must fail with ErrFailed, and lookups must keep
// answering every acknowledged op. The failing op's outcome is unknown: it
// is in flight for the model.
func runFaultyOps(t *testing.T, seed uint64, rng *rand.Rand, s *Store, m *CrashModel, ops int) {
	b, _ := s.Bloom("b")
	c, _ := s.Cuckoo("c")
	n, _ := s.Counting("n")
	bm, _ := s.Bitmap("m")
	var failed error
	for i := 0; i < ops; i++ {
		k := fmt.Sprintf("k%d", rng.IntN(400))
		var err error
		var op *CrashOp // the change tried, if any
		change := func(o CrashOp) { op = &o }
		sync := false
		switch r := rng.IntN(100); {
		case r < 25:
			_, err = b.Add([]byte(k))
			change(BloomAdd(k))
		case r < 45:
			if err = c.Add([]byte(k)); errors.Is(err, ErrFull) && failed == nil {
				err = nil // refused, not acknowledged: changes nothing
				break
			}
			change(CuckooAdd(k))
		case r < 55:
			if m.Range(CrashCuckoo, k).Lo > 0 {
				var ok bool
				// A refused delete (the key matches in two layers)
				// changes nothing.
				if ok, err = c.Delete([]byte(k)); errors.Is(err, ErrAmbiguous) {
					err = nil
				} else if err != nil || ok {
					change(CuckooDelete(k))
				}
			}
		case r < 65:
			err = n.Add([]byte(k))
			change(CountingAdd(k))
		case r < 70:
			if r := m.Range(CrashCounting, k); r.Lo > 0 {
				var ok bool
				if ok, err = n.Delete([]byte(k)); err == nil && !ok {
					t.Fatalf("seed %d: I1: counting delete of %s (acknowledged %d..%d) found a zero counter", seed, k, r.Lo, r.Hi)
				}
				change(CountingDelete(k))
			}
		case r < 90:
			off := rng.Uint64N(CrashBits)
			if rng.IntN(3) > 0 {
				_, err = bm.Set(off)
				change(BitSet(off))
			} else {
				_, err = bm.Clear(off)
				change(BitClear(off))
			}
		case r < 93:
			err = s.Checkpoint()
			sync = true
		case r < 96:
			if err = s.log.Sync(); err != nil {
				err = s.fail(err) // what the store does when its own calls see it
			}
			sync = true
		default:
			b.Has([]byte(k))
			c.Has([]byte(k))
		}
		if err == nil {
			if op != nil {
				must(t, m.Apply(*op))
			}
			if sync {
				m.Sync()
			}
			continue
		}
		if failed != nil {
			if !errors.Is(err, ErrFailed) {
				t.Fatalf("seed %d: a change after the failure (%v) returned %v, want ErrFailed", seed, failed, err)
			}
			continue
		}
		if !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("seed %d: op %d failed with %v, not an injected fault", seed, i, err)
		}
		failed = err
		if op != nil {
			m.InFlight(*op)
		}
	}
	if failed != nil {
		checkModel(t, seed, fmt.Sprintf("the store failed by %v", failed), s, m)
		if err := s.Checkpoint(); !errors.Is(err, ErrFailed) {
			t.Fatalf("seed %d: Checkpoint of the failed store: %v", seed, err)
		}
	}
}

// TestSimulatedPowerLossWithSyncFailures extends the simulated power-loss
// test with failing syncs and writes (Linux semantics: a failed sync leaves
// its pages clean and unwritten). After a failure the store refuses every
// change; then either the power fails, or the process dies, a new one
// recovers (from what the page cache kept), works on, and then the power
// fails. Either way recovery loses nothing acknowledged (under
// SyncInterval: nothing acknowledged before the last sync that succeeded).
func TestSimulatedPowerLossWithSyncFailures(t *testing.T) {
	var sequences, failures atomic.Int64
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			base := testseed.Seed(t)
			for _, seed := range crashSeeds(t, base) {
				if faultSequence(t, mode, seed) {
					failures.Add(1)
				}
				sequences.Add(1)
			}
		})
	}
	t.Logf("%d sequences, %d with a store failure", sequences.Load(), failures.Load())
}

// faultSequence runs one seed and reports whether the store failed in it.
func faultSequence(t *testing.T, mode SyncMode, seed uint64) bool {
	rng := newTestRand(seed)
	inj := &faultInjector{rng: newTestRand(seed ^ 0x5eed), every: 5 + rng.IntN(60)}
	w := newSimWorld(t, mode)
	inj.install(w)
	s, err := w.open(t)
	must(t, err)
	createSimFilters(t, s)
	m := NewCrashModel(mode, simFilters)
	inj.armed.Store(true)
	runFaultyOps(t, seed, rng, s, m, 20+rng.IntN(150))
	inj.armed.Store(false)
	storeFailed := s.failed() != nil
	if rng.IntN(2) == 0 {
		w.powerLoss(s, rng)
	} else {
		// The process dies; the page cache keeps what it wrote, synced
		// or not (also what a failed sync lost for the disk).
		w.kill(s)
		w.fs.SetInjector(nil)
		w.sim.SetInjector(nil)
		if s, err = w.open(t); err != nil {
			t.Fatalf("seed %d: reopen after the process died: %v", seed, err)
		}
		m.Crash(false) // nothing acknowledged is lost to a process death
		checkModel(t, seed, "reopened after the process died", s, m)
		// Work on cleanly, then lose the power. The reopen checkpointed
		// everything it recovered; after it, what was synced is safe.
		must(t, m.Settle(s))
		runOps(t, seed, rng, s, m, 10+rng.IntN(60))
		w.powerLoss(s, rng)
	}
	w.fs.SetInjector(nil)
	w.sim.SetInjector(nil)
	s, err = w.open(t)
	if err != nil {
		t.Fatalf("seed %d: recovery after the power loss: %v", seed, err)
	}
	m.Crash(true) // under SyncInterval: nothing acknowledged before the last sync that succeeded
	checkModel(t, seed, "recovered after the power loss", s, m)
	must(t, s.Close())
	checkSumsAfterClose(t, seed, w)
	return storeFailed
}
