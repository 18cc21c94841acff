package store

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

var (
	crashSeqs = flag.Int("crash.seqs", 300, "simulated power-loss sequences per mode")
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

// opModel is the acknowledged state the recovered store must honour.
type opModel struct {
	bloom   map[string]bool
	cuckoo  map[string]int
	count   map[string]int
	bits    map[uint64]bool
	history [][]uint64 // bitmap words after each op, for prefix checks
}

func newModel() *opModel {
	return &opModel{bloom: map[string]bool{}, cuckoo: map[string]int{}, count: map[string]int{}, bits: map[uint64]bool{}}
}

func (m *opModel) clone() *opModel {
	c := newModel()
	for k, v := range m.bloom {
		c.bloom[k] = v
	}
	for k, v := range m.cuckoo {
		c.cuckoo[k] = v
	}
	for k, v := range m.count {
		c.count[k] = v
	}
	for k, v := range m.bits {
		c.bits[k] = v
	}
	return c
}

const simBits = 4096

// bitWords renders the model's bitmap as words: the acknowledged state, which
// under SyncInterval may be ahead of the map (changes wait in the overlay).
func (m *opModel) bitWords() []uint64 {
	w := make([]uint64, simBits/64)
	for off, set := range m.bits {
		if set {
			w[off/64] |= 1 << (off % 64)
		}
	}
	return w
}

// runOps drives a random op sequence, updating the model for every
// acknowledged op. It returns, for SyncInterval, the floor of what a power
// loss must preserve (the state at the last fsync, with each count lowered
// to its minimum since) and the history index of that fsync.
func runOps(t *testing.T, seed uint64, rng *rand.Rand, s *Store, m *opModel, ops int) (synced *opModel, syncedAt int) {
	b, err := s.Bloom("b")
	must(t, err)
	c, err := s.Cuckoo("c")
	must(t, err)
	n, err := s.Counting("n")
	must(t, err)
	bm, err := s.Bitmap("m")
	must(t, err)
	// history[0] is the state this run starts from, fully synced (a fresh
	// store, or one just recovered and checkpointed).
	m.history = append(m.history, m.bitWords())
	synced, syncedAt = m.clone(), len(m.history)-1
	fail := func(op string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("seed %d: %s: %v", seed, op, err)
		}
	}
	for i := 0; i < ops; i++ {
		k := fmt.Sprintf("k%d", rng.IntN(400))
		switch r := rng.IntN(100); {
		case r < 25:
			_, err := b.Add([]byte(k))
			fail("bloom add", err)
			m.bloom[k] = true
		case r < 45:
			err := c.Add([]byte(k))
			if errors.Is(err, ErrFull) {
				break // refused, not acknowledged: changes nothing
			}
			fail("cuckoo add", err)
			m.cuckoo[k]++
		case r < 55:
			if m.cuckoo[k] > 0 {
				ok, err := c.Delete([]byte(k))
				fail("cuckoo delete", err)
				if !ok {
					// Refused (the key matches in two layers): it must
					// still be present.
					if !c.Has([]byte(k)) {
						t.Fatalf("seed %d: cuckoo delete of present %s found nothing", seed, k)
					}
					break
				}
				m.cuckoo[k]--
			}
		case r < 65:
			fail("counting add", n.Add([]byte(k)))
			m.count[k]++
		case r < 70:
			if m.count[k] > 0 {
				ok, err := n.Delete([]byte(k))
				fail("counting delete", err)
				if ok {
					m.count[k]--
				}
			}
		case r < 90:
			off := rng.Uint64N(simBits)
			set := rng.IntN(3) > 0
			var err error
			if set {
				_, err = bm.Set(off)
			} else {
				_, err = bm.Clear(off)
			}
			fail("bitmap write", err)
			m.bits[off] = set
		case r < 93:
			fail("checkpoint", s.Checkpoint())
			m.history = append(m.history, m.bitWords())
			synced, syncedAt = m.clone(), len(m.history)-1
			continue
		case r < 96:
			fail("wal sync", s.log.Sync())
			m.history = append(m.history, m.bitWords())
			synced, syncedAt = m.clone(), len(m.history)-1
			continue
		default:
			// A lookup in the middle changes nothing.
			b.Has([]byte(k))
			c.Has([]byte(k))
		}
		m.history = append(m.history, m.bitWords())
		// synced is a floor: the recovered state is the state after some
		// op at or after the sync point, so a key's count is at least its
		// minimum over those states.
		synced.cuckoo[k] = min(synced.cuckoo[k], m.cuckoo[k])
		synced.count[k] = min(synced.count[k], m.count[k])
	}
	return synced, syncedAt
}

// checkRecovered verifies I1/I2 against want (acknowledged and, for
// SyncInterval, synced state).
func checkRecovered(t *testing.T, seed uint64, s *Store, want *opModel) {
	t.Helper()
	// The recovering writer cannot tell damage from what the dead one
	// left in its pages, so it verifies none; it must not report any.
	if rep, err := s.Check(); err != nil {
		t.Fatalf("seed %d: Check after recovery: %v (%+v)", seed, err, rep)
	}
	b, _ := s.Bloom("b")
	c, _ := s.Cuckoo("c")
	n, _ := s.Counting("n")
	for k := range want.bloom {
		if !b.Has([]byte(k)) {
			t.Fatalf("seed %d: I1: bloom lost acknowledged %s", seed, k)
		}
	}
	for k, cnt := range want.cuckoo {
		if cnt > 0 && c.Count([]byte(k)) < uint64(cnt) {
			t.Fatalf("seed %d: I1: cuckoo holds %d copies of %s, acknowledged %d", seed, c.Count([]byte(k)), k, cnt)
		}
	}
	for k, cnt := range want.count {
		if cnt > 0 && n.Count([]byte(k)) < uint64(min(cnt, 15)) {
			t.Fatalf("seed %d: I1: counting Count(%s) = %d, acknowledged %d", seed, k, n.Count([]byte(k)), cnt)
		}
	}
}

// crashSeeds returns the seeds of a run's sequences: -crash.seqs of them
// from base (the run's seed, from testseed), or only -crash.seed. A failure
// names its sequence's seed N: -crash.seed=N runs that sequence alone, and
// FILTERSTORE_SEED=N runs the run starting from it.
func crashSeeds(t *testing.T, base uint64) []uint64 {
	if *crashSeed != 0 {
		return []uint64{*crashSeed}
	}
	out := make([]uint64, *crashSeqs)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
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
	_, err = s.CreateBitmap("m", simBits)
	must(t, err)
}

// TestSimulatedPowerLossSyncAlways: every acknowledged op survives, and the
// recovered filters equal, word for word and count for count, the state
// before the crash (ops are sequential, so nothing was in flight).
func TestSimulatedPowerLossSyncAlways(t *testing.T) {
	base := testseed.Seed(t)
	for _, seed := range crashSeeds(t, base) {
		rng := rand.New(rand.NewPCG(seed, 0))
		w := newSimWorld(t, SyncAlways)
		s, err := w.open(t)
		must(t, err)
		createSimFilters(t, s)
		m := newModel()
		for round := 0; round < 3; round++ {
			runOps(t, seed, rng, s, m, 20+rng.IntN(120))
			before := snapshotWords(s)
			counts := snapshotCounts(s)
			w.crash(s, rng)
			if s, err = w.open(t); err != nil {
				t.Fatalf("seed %d round %d: recovery failed: %v", seed, round, err)
			}
			checkRecovered(t, seed, s, m)
			if after := snapshotWords(s); !slices.EqualFunc(keysOf(before), keysOf(after), func(a, b string) bool { return a == b }) {
				t.Fatalf("seed %d: filter files differ after recovery: %v vs %v", seed, keysOf(before), keysOf(after))
			} else {
				for name, ws := range before {
					if !slices.Equal(ws, after[name]) {
						t.Fatalf("seed %d round %d: %s differs after recovery", seed, round, name)
					}
				}
			}
			if got := snapshotCounts(s); !slices.Equal(got, counts) {
				t.Fatalf("seed %d round %d: counts %v after recovery, want %v", seed, round, got, counts)
			}
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

// TestSimulatedPowerLossSyncInterval: a power loss may lose the last
// interval, never anything older; the WAL tail is torn at random; the
// recovered bitmap equals the state after some op at or after the last
// fsync (a consistent prefix).
func TestSimulatedPowerLossSyncInterval(t *testing.T) {
	base := testseed.Seed(t)
	for _, seed := range crashSeeds(t, base) {
		rng := rand.New(rand.NewPCG(seed, 1))
		w := newSimWorld(t, SyncInterval)
		s, err := w.open(t)
		must(t, err)
		createSimFilters(t, s)
		m := newModel()
		for round := 0; round < 3; round++ {
			synced, syncedAt := runOps(t, seed, rng, s, m, 20+rng.IntN(120))
			w.crash(s, rng)
			if s, err = w.open(t); err != nil {
				t.Fatalf("seed %d round %d: recovery failed: %v", seed, round, err)
			}
			checkRecovered(t, seed, s, synced)
			bm, _ := s.Bitmap("m")
			got := bm.bm.Words()
			k := -1
			for i := len(m.history) - 1; i >= syncedAt; i-- {
				if slices.Equal(m.history[i], got) {
					k = i
					break
				}
			}
			if k < 0 {
				for i := range m.history {
					if slices.Equal(m.history[i], got) {
						t.Logf("matches history state %d", i)
					}
				}
				for i := range got {
					if got[i] != m.history[syncedAt][i] {
						t.Logf("word %d: got %x synced %x last %x", i, got[i], m.history[syncedAt][i], m.history[len(m.history)-1][i])
					}
				}
				t.Fatalf("seed %d round %d: recovered bitmap matches no state at or after the last fsync (op %d of %d)",
					seed, round, syncedAt, len(m.history))
			}
			// Continue from what survived: the model becomes the
			// recovered bitmap's prefix for the bitmap; the other
			// filters keep only synced guarantees.
			m = synced.clone()
			m.history = nil
			m.bits = map[uint64]bool{}
			for i, wd := range got {
				for j := 0; j < 64; j++ {
					if wd&(1<<j) != 0 {
						m.bits[uint64(i*64+j)] = true
					}
				}
			}
		}
		must(t, s.Close())
		checkSumsAfterClose(t, seed, w)
	}
}

func snapshotWords(s *Store) map[string][]uint64 {
	out := map[string][]uint64{}
	for name, h := range s.filters {
		for i, r := range h.base().regions {
			out[fmt.Sprintf("%s/%d", name, i)] = slices.Clone(r.Words())
		}
	}
	return out
}

func snapshotCounts(s *Store) []uint64 {
	var out []uint64
	for _, name := range []string{"b", "c", "n", "m"} {
		out = append(out, s.filters[name].base().items()...)
	}
	return out
}

func keysOf(m map[string][]uint64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
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
