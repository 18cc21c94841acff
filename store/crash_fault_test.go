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
// answering. The failing op's outcome is unknown: a delete or clear may
// have happened, so the model forgets what it could have removed.
func runFaultyOps(t *testing.T, seed uint64, rng *rand.Rand, s *Store, m *opModel, ops int) (synced *opModel) {
	b, _ := s.Bloom("b")
	c, _ := s.Cuckoo("c")
	n, _ := s.Counting("n")
	bm, _ := s.Bitmap("m")
	synced = m.clone()
	var failed error
	for i := 0; i < ops; i++ {
		k := fmt.Sprintf("k%d", rng.IntN(400))
		var err error
		var undo func() // what the model forgets if the op failed
		switch r := rng.IntN(100); {
		case r < 25:
			if _, err = b.Add([]byte(k)); err == nil {
				m.bloom[k] = true
			}
		case r < 45:
			if err = c.Add([]byte(k)); err == nil {
				m.cuckoo[k]++
			} else if errors.Is(err, ErrFull) && failed == nil {
				err = nil
			}
		case r < 55:
			if m.cuckoo[k] > 0 {
				var ok bool
				if ok, err = c.Delete([]byte(k)); err == nil && ok {
					m.cuckoo[k]--
				}
				undo = func() { m.cuckoo[k]--; synced.cuckoo[k] = min(synced.cuckoo[k], m.cuckoo[k]) }
			}
		case r < 65:
			if err = n.Add([]byte(k)); err == nil {
				m.count[k]++
			}
		case r < 70:
			if m.count[k] > 0 {
				var ok bool
				if ok, err = n.Delete([]byte(k)); err == nil && ok {
					m.count[k]--
				}
				undo = func() { m.count[k]--; synced.count[k] = min(synced.count[k], m.count[k]) }
			}
		case r < 90:
			off := rng.Uint64N(simBits)
			set := rng.IntN(3) > 0
			if set {
				_, err = bm.Set(off)
			} else {
				_, err = bm.Clear(off)
			}
			if err == nil {
				m.bits[off] = set
			}
			// Changed after the last sync: a power loss may leave it
			// either way (SyncInterval), so it is no floor.
			delete(synced.bits, off)
			undo = func() { delete(m.bits, off) }
		case r < 93:
			if err = s.Checkpoint(); err == nil {
				synced = m.clone()
			}
		case r < 96:
			if err = s.log.Sync(); err == nil {
				synced = m.clone()
			} else {
				err = s.fail(err) // what the store does when its own calls see it
			}
		default:
			b.Has([]byte(k))
			c.Has([]byte(k))
		}
		if err == nil {
			synced.cuckoo[k] = min(synced.cuckoo[k], m.cuckoo[k])
			synced.count[k] = min(synced.count[k], m.count[k])
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
		if undo != nil {
			undo()
		}
	}
	if failed != nil {
		for k, ok := range m.bloom {
			if ok && !b.Has([]byte(k)) {
				t.Fatalf("seed %d: the failed store answers %s absent", seed, k)
			}
		}
		if err := s.Checkpoint(); !errors.Is(err, ErrFailed) {
			t.Fatalf("seed %d: Checkpoint of the failed store: %v", seed, err)
		}
	}
	return synced
}

// checkBits verifies that every bit the model holds set reads set.
func checkBits(t *testing.T, seed uint64, s *Store, want *opModel) {
	t.Helper()
	bm, _ := s.Bitmap("m")
	for off, set := range want.bits {
		if set && !bm.Get(off) {
			t.Fatalf("seed %d: bit %d acknowledged set reads clear", seed, off)
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
	m := newModel()
	inj.armed.Store(true)
	synced := runFaultyOps(t, seed, rng, s, m, 20+rng.IntN(150))
	inj.armed.Store(false)
	storeFailed := s.failed() != nil
	if mode == SyncAlways {
		synced = m // every acknowledged op was fsynced
	}
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
		checkRecovered(t, seed, s, m) // nothing acknowledged is lost to a process death
		checkBits(t, seed, s, m)
		// Work on cleanly, then lose the power. The reopen checkpointed
		// everything it recovered; after it, what was synced is safe.
		m.history = nil
		var at int
		synced, at = runOps(t, seed, rng, s, m, 10+rng.IntN(60))
		if mode == SyncAlways {
			synced = m
		} else {
			// Bits floor: set in every state from the last sync on.
			synced.bits = map[uint64]bool{}
			for off := uint64(0); off < simBits; off++ {
				set := true
				for _, ws := range m.history[at:] {
					set = set && ws[off/64]&(1<<(off%64)) != 0
				}
				if set {
					synced.bits[off] = true
				}
			}
		}
		w.powerLoss(s, rng)
	}
	w.fs.SetInjector(nil)
	w.sim.SetInjector(nil)
	s, err = w.open(t)
	if err != nil {
		t.Fatalf("seed %d: recovery after the power loss: %v", seed, err)
	}
	checkRecovered(t, seed, s, synced)
	checkBits(t, seed, s, synced)
	must(t, s.Close())
	checkSumsAfterClose(t, seed, w)
	return storeFailed
}
