package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/wal"
)

// batchCrashSeqs bounds the sequences of TestSimulatedPowerLossBatches
// per mode; -crash.seed still picks any one.
const batchCrashSeqs = 15

// batchCrashMax bounds the batches of one sequence; batch i sets bit i of
// the bitmap and clears bit batchCrashMax+i, which the setup set.
const batchCrashMax = 128

// TestSimulatedPowerLossBatches: batches over four filters of four kinds
// (a Bloom add, a cuckoo add, a counting add, a bitmap set and a bitmap
// clear each), power losses after a random number of them: under
// SyncAlways sometimes with one more batch in flight (the power fails
// between its WAL write and its fdatasync, so the WAL keeps its record
// whole, torn or not at all), under SyncInterval with the acknowledged
// batches since the last sync at stake (the WAL tail torn at random). After each recovery the batches present are a
// prefix 0..k-1 of those committed, every batch in it whole and every
// later one wholly absent: both bits of each batch agree, the cuckoo
// filter holds exactly k entries (counted slot by slot) and k items, the
// counting filter's counters are exactly those of keys 0..k-1. Every
// acknowledged batch before the last sync (SyncAlways: every
// acknowledged batch) is in the prefix.
func TestSimulatedPowerLossBatches(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			seeds := crashSeeds(t, testseed.Seed(t))
			for _, seed := range seeds[:min(len(seeds), batchCrashSeqs)] {
				batchCrashSequence(t, mode, seed)
			}
		})
	}
}

var errBatchSync = errors.New("injected fdatasync failure")

func batchCrashKey(i int) []byte { return []byte(fmt.Sprintf("batch-%d", i)) }

func batchCrashSequence(t *testing.T, mode SyncMode, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 12))
	w := newSimWorld(t, mode)
	s, err := w.open(t)
	must(t, err)
	_, err = s.CreateBloom("b", BloomConfig{Capacity: 50})
	must(t, err)
	_, err = s.CreateCuckoo("c", CuckooConfig{Capacity: 64, Expansion: 2})
	must(t, err)
	_, err = s.CreateCounting("n", BloomConfig{Capacity: 500})
	must(t, err)
	_, err = s.CreateBitmap("m", 2*batchCrashMax)
	must(t, err)
	f := reopenBatchFilters(t, s)
	setup := s.NewBatch()
	for i := range batchCrashMax {
		setup.BitmapSet(f.m, uint64(batchCrashMax+i))
	}
	must(t, second(setup.Commit()))
	must(t, s.Checkpoint())

	next, durable := 0, 0 // batches committed (acknowledged), and known durable
	for round := 0; round < 3 && next < batchCrashMax-40; round++ {
		for range 1 + rng.IntN(30) {
			bt := s.NewBatch()
			batchCrashOps(bt, f, next)
			if _, err := bt.Commit(); err != nil {
				t.Fatalf("seed %d: batch %d: %v", seed, next, err)
			}
			next++
			if mode == SyncAlways {
				durable = next
			} else if rng.IntN(8) == 0 {
				must(t, s.log.Sync())
				durable = next
			}
		}
		attempted := next
		what := fmt.Sprintf("seed %d round %d (%d batches acknowledged, %d durable)", seed, round, next, durable)
		var lost *wal.MemFS
		if mode == SyncAlways && rng.IntN(2) == 0 {
			// One more, in flight: the power fails after its record was
			// written, before its fdatasync, so the WAL keeps it whole,
			// torn or not at all. (The sync then fails, so the batch is
			// not acknowledged.)
			w.fs.SetInjector(func(op wal.Op, _ string) error {
				if op == wal.OpSync && lost == nil {
					if lost = w.fs.Crash(rng); rng.IntN(2) == 0 {
						// The write reached the disk whole (Kill
						// keeps everything written): one outcome
						// Crash almost never draws for one record.
						lost = w.fs.Kill()
					}
					return errBatchSync
				}
				return nil
			})
			bt := s.NewBatch()
			batchCrashOps(bt, f, next)
			if _, err := bt.Commit(); !errors.Is(err, errBatchSync) {
				t.Fatalf("%s: the batch in flight returned %v, want the injected failure", what, err)
			}
			attempted++
			what += ", one in flight"
		}
		w.crash(s, rng)
		if lost != nil {
			w.fs = lost // the WAL as the power failure left it
		}
		if s, err = w.open(t); err != nil {
			t.Fatalf("%s: recovery: %v", what, err)
		}
		f = reopenBatchFilters(t, s)
		k := checkBatchPrefix(t, what, f, attempted)
		if k < durable {
			t.Fatalf("%s: only batches 0..%d survived: acknowledged durable batches lost", what, k-1)
		}
		// Recovery checkpointed: go on from what survived.
		next, durable = k, k
	}
	must(t, s.Close())
	checkSumsAfterClose(t, seed, w)
}

// batchCrashOps adds batch i's ops.
func batchCrashOps(bt *Batch, f batchFilters, i int) {
	k := batchCrashKey(i)
	bt.BitmapSet(f.m, uint64(i))
	bt.CuckooAdd(f.c, k)
	bt.BloomAdd(f.b, k)
	bt.CountingAdd(f.n, k)
	bt.BitmapClear(f.m, uint64(batchCrashMax+i))
}

// checkBatchPrefix checks that the recovered filters hold batches 0..k-1
// whole and nothing of the later ones of the attempted, and returns k.
func checkBatchPrefix(t *testing.T, what string, f batchFilters, attempted int) int {
	t.Helper()
	k := 0
	for k < batchCrashMax && f.m.Get(uint64(k)) {
		k++
	}
	if k > attempted {
		t.Fatalf("%s: bits 0..%d set, but only %d batches were committed", what, k-1, attempted)
	}
	for i := range batchCrashMax {
		if set, clear := f.m.Get(uint64(i)), !f.m.Get(uint64(batchCrashMax+i)); set != (i < k) || clear != (i < k) {
			t.Fatalf("%s: batch %d half applied or out of order (bit %d %v, bit %d cleared %v), prefix %d",
				what, i, i, set, batchCrashMax+i, clear, k)
		}
	}
	if got := f.m.Count(); got != batchCrashMax {
		t.Fatalf("%s: bitmap count %d, want %d", what, got, batchCrashMax)
	}
	// Cuckoo: exactly k entries, each batch's among them.
	entries := 0
	for _, l := range *f.c.layers.Load() {
		g := l.Geometry()
		for _, v := range l.Words() {
			entries += g.UsedSlots(v)
		}
	}
	if entries != k || f.c.Items() != uint64(k) {
		t.Fatalf("%s: cuckoo holds %d entries, %d items; want %d", what, entries, f.c.Items(), k)
	}
	// Counting: exactly the counters of keys 0..k-1.
	g := f.n.c.Geometry()
	want, err := bloom.NewCounting(g, make([]uint64, g.Words()))
	must(t, err)
	for i := range k {
		want.AddHash(Hash(batchCrashKey(i)))
	}
	if !slices.Equal(f.n.c.Words(), want.Words()) || f.n.Items() != uint64(k) {
		t.Fatalf("%s: counting filter is not exactly batches 0..%d (items %d)", what, k-1, f.n.Items())
	}
	for i := range k {
		key := batchCrashKey(i)
		if !f.b.Has(key) || !f.c.Has(key) {
			t.Fatalf("%s: batch %d is present but misses its Bloom or cuckoo key", what, i)
		}
	}
	if f.b.Card() > uint64(k) {
		t.Fatalf("%s: Bloom card %d above the %d batches present", what, f.b.Card(), k)
	}
	return k
}
