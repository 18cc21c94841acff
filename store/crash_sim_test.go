package store

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

var (
	crashSeqs = flag.Int("crash.seqs", 0, "simulated power-loss sequences per mode (0: 100, 40 with -short under the race detector)")
	crashSeed = flag.Uint64("crash.seed", 0, "run only this sequence seed of the simulated power-loss tests (failures print it)")
)

// simWorld is a store directory whose filter files and WAL live behind the
// crashable seams; only LOCK and the catalog (bbolt, which fsyncs its own
// commits) are real files.
type simWorld struct {
	dir  string
	sim  *mmapbits.Sim
	fs   *wal.MemFS
	opts Options
}

func (w *simWorld) open(t *testing.T) (*Store, error) {
	return Open(w.dir, WithSeams(w.opts, w.sim, w.fs))
}

// crash simulates a power loss: each dirty page of each filter file keeps
// either image, the WAL keeps its synced prefix plus a random, possibly
// torn, part of the rest. The old store is then discarded.
func (w *simWorld) crash(s *Store, rng *rand.Rand) {
	close(s.stop)
	s.bg.Wait()
	w.sim.Crash(rng)
	w.fs = w.fs.Crash(rng)
	s.closed.Store(true)
	s.log.Close() // writes into the pre-crash file system, now discarded
	s.lock.release()
}

// simFilters names the filters of createSimFilters.
var simFilters = CrashFilters{Bloom: "b", Cuckoo: "c", Counting: "n", Bitmap: "m"}

// runOps drives a random op sequence on m's filters, telling m of every acknowledged op
// and every sync point.
func runOps(t *testing.T, seed uint64, rng *rand.Rand, s *Store, m *CrashModel, ops int) {
	b, err := s.Bloom(m.names.Bloom)
	must(t, err)
	c, err := s.Cuckoo(m.names.Cuckoo)
	must(t, err)
	n, err := s.Counting(m.names.Counting)
	must(t, err)
	bm, err := s.Bitmap(m.names.Bitmap)
	must(t, err)
	fail := func(op string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("seed %d: %s: %v", seed, op, err)
		}
	}
	apply := func(op CrashOp) { t.Helper(); fail("model", m.Apply(op)) }
	for i := 0; i < ops; i++ {
		k := fmt.Sprintf("k%d", rng.IntN(400))
		switch r := rng.IntN(100); {
		case r < 25:
			_, err := b.Add([]byte(k))
			fail("bloom add", err)
			apply(BloomAdd(k))
		case r < 45:
			err := c.Add([]byte(k))
			if errors.Is(err, ErrFull) {
				break // refused, not acknowledged: changes nothing
			}
			fail("cuckoo add", err)
			apply(CuckooAdd(k))
		case r < 55:
			if m.Range(CrashCuckoo, k).Lo > 0 {
				ok, err := c.Delete([]byte(k))
				if errors.Is(err, ErrAmbiguous) {
					err = nil
				}
				fail("cuckoo delete", err)
				if !ok {
					// Refused (the key matches in two layers): it must
					// still be present.
					if !c.Has([]byte(k)) {
						t.Fatalf("seed %d: cuckoo delete of present %s found nothing", seed, k)
					}
					break
				}
				apply(CuckooDelete(k))
			}
		case r < 65:
			fail("counting add", n.Add([]byte(k)))
			apply(CountingAdd(k))
		case r < 70:
			if r := m.Range(CrashCounting, k); r.Lo > 0 {
				ok, err := n.Delete([]byte(k))
				fail("counting delete", err)
				if !ok {
					t.Fatalf("seed %d: I1: counting delete of %s (acknowledged %d..%d) found a zero counter", seed, k, r.Lo, r.Hi)
				}
				apply(CountingDelete(k))
			}
		case r < 90:
			off := rng.Uint64N(CrashBits)
			if rng.IntN(3) > 0 {
				_, err = bm.Set(off)
				apply(BitSet(off))
			} else {
				_, err = bm.Clear(off)
				apply(BitClear(off))
			}
			fail("bitmap write", err)
		case r < 93:
			fail("checkpoint", s.Checkpoint())
			m.Sync()
		case r < 96:
			fail("wal sync", s.log.Sync())
			m.Sync()
		default:
			// A lookup in the middle changes nothing.
			b.Has([]byte(k))
			c.Has([]byte(k))
		}
	}
}

// crashSeeds returns the seeds of a run's sequences: -crash.seqs of them
// from base (the run's seed, from testseed), or only -crash.seed. A failure
// names its sequence's seed N: -crash.seed=N runs that sequence alone, and
// FILTERSTORE_SEED=N runs the run starting from it. Unset, -crash.seqs is
// 100 (CI runs 2000 of each beside the README's test command, whose
// store tests were the longest part of that stage: 300 took about 35 s
// of them), or 40 under -short with the race detector, where a few
// dozen reach the same code.
func crashSeeds(t *testing.T, base uint64) []uint64 {
	if *crashSeed != 0 {
		return []uint64{*crashSeed}
	}
	n := *crashSeqs
	if n <= 0 {
		n = 100
		if testing.Short() && racedetect.Enabled {
			n = 40
		}
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}

// seqSeeds runs seq for n sequences (nShort under -short), with the seeds
// base, base+1, ... where base is the run's seed (testseed: printed, and
// replayed by FILTERSTORE_SEED), stopping at the first that fails. It
// reports whether every sequence passed.
func seqSeeds(t *testing.T, base uint64, n, nShort int, seq func(seed uint64)) bool {
	if testing.Short() {
		n = nShort
	}
	for i := range n {
		seq(base + uint64(i))
		if t.Failed() {
			return false
		}
	}
	return true
}

func newSimWorld(t *testing.T, mode SyncMode) *simWorld {
	return &simWorld{dir: t.TempDir(), sim: mmapbits.NewSim(), fs: wal.NewMemFS(),
		opts: Options{Sync: mode, SyncEvery: 5e6, CheckpointEvery: -1, SegmentSize: 64 << 10}}
}

func createSimFilters(t *testing.T, s *Store) {
	_, err := s.CreateBloom("b", BloomConfig{Capacity: 50, ErrorRate: 0.01})
	must(t, err)
	_, err = s.CreateCuckoo("c", CuckooConfig{Capacity: 64, BucketSize: 2, FingerprintBits: 8, Expansion: 2, MaxIterations: 50})
	must(t, err)
	_, err = s.CreateCounting("n", BloomConfig{Capacity: 500})
	must(t, err)
	_, err = s.CreateBitmap("m", CrashBits)
	must(t, err)
}

// TestSimulatedPowerLossSyncAlways: every acknowledged op survives, and the
// recovered filters equal, word for word and count for count, the state
// before the crash (ops are sequential, so nothing was in flight).
func TestSimulatedPowerLossSyncAlways(t *testing.T) {
	simPowerLoss(t, SyncAlways, 0)
}

// TestSimulatedPowerLossSyncInterval: a power loss may lose the last
// interval, never anything older; the WAL tail is torn at random; the
// recovered bitmap equals the state after some op at or after the last
// fsync (a consistent prefix).
func TestSimulatedPowerLossSyncInterval(t *testing.T) {
	simPowerLoss(t, SyncInterval, 1)
}

// simPowerLoss runs the sequences of a simulated power-loss test: three
// rounds of random ops, each ended by a power loss, a recovery checked
// against the model and, under SyncAlways, against the image before the
// crash.
func simPowerLoss(t *testing.T, mode SyncMode, stream uint64) {
	base := testseed.Seed(t)
	for _, seed := range crashSeeds(t, base) {
		rng := rand.New(rand.NewPCG(seed, stream))
		w := newSimWorld(t, mode)
		s, err := w.open(t)
		must(t, err)
		createSimFilters(t, s)
		m := NewCrashModel(mode, simFilters)
		for round := 0; round < 3; round++ {
			runOps(t, seed, rng, s, m, 20+rng.IntN(120))
			before := imageOf(s)
			w.crash(s, rng)
			if s, err = w.open(t); err != nil {
				t.Fatalf("seed %d round %d: recovery failed: %v", seed, round, err)
			}
			m.Crash(true)
			checkModel(t, seed, fmt.Sprintf("round %d: the recovered store", round), s, m)
			if d := imageOf(s).diff(before); mode == SyncAlways && d != "" {
				t.Fatalf("seed %d round %d: after recovery: %s", seed, round, d)
			}
			// Go on from what survived: recovery checkpointed it.
			must(t, m.Settle(s))
		}
		must(t, s.Close())
		checkSumsAfterClose(t, seed, w)
	}
}

// checkSumsAfterClose reopens a cleanly closed store and checks that every
// data page matches the checksum the Close stored: each page a change
// touched was declared (Touch), and the Close recomputed what the last
// crash left unknown.
func checkSumsAfterClose(t *testing.T, seed uint64, w *simWorld) {
	t.Helper()
	s, err := w.open(t)
	if err != nil {
		t.Fatalf("seed %d: reopen after a clean Close: %v", seed, err)
	}
	rep, err := s.Check()
	if err != nil || rep.Changed != 0 || rep.Pages == 0 {
		t.Fatalf("seed %d: Check after a clean Close: %+v, %v: want every page verified", seed, rep, err)
	}
	must(t, s.Close())
}

// TestWALCorruptionReported: a flipped byte before the tail is an error
// wrapping ErrCorrupt naming the segment, never a silent truncation (I4).
func TestWALCorruptionReported(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	b, _ := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	for i := 0; i < 50; i++ {
		b.Add(key(i))
	}
	s.abandonForTest()
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.log"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	data, _ := os.ReadFile(segs[0])
	data[wal.SegmentHeaderSize+40] ^= 0x10 // inside the second record
	os.WriteFile(segs[0], data, 0o644)
	_, err := Open(dir, nil)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(segs[0])) {
		t.Fatalf("corrupt WAL: %v", err)
	}
}
