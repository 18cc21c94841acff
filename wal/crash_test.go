package wal

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/internal/testseed"
)

// TestCrashRecovery runs random appends, waits, syncs, truncations and
// clean reopens against a MemFS, simulates a power loss before a random
// file-system operation (so in the middle of writes, syncs, rotations and
// removals), recovers, and checks: Open succeeds (a torn tail is never
// corruption), the records form a contiguous run whose payloads are the
// ones appended, and every record acknowledged as durable is there. Each
// seed runs several crash-recover generations. Seed i of a run is
// FILTERSTORE_SEED+i (see testseed); a failure prints the command that
// reruns from the failing seed.
func TestCrashRecovery(t *testing.T) {
	seeds := 400
	if testing.Short() || racedetect.Enabled {
		seeds = 100
	}
	base := testseed.Seed(t)
	tornBefore := tornTails.Load()
	for i := range uint64(seeds) {
		runCrashSeed(t, base+i)
		if t.Failed() {
			return
		}
	}
	// The crash images must actually exercise torn tails.
	torn := tornTails.Load() - tornBefore
	t.Logf("%d seeds, %d torn tails truncated", seeds, torn)
	if torn < uint64(seeds)/4 {
		t.Fatalf("only %d torn tails in %d seeds", torn, seeds)
	}
}

// tornTails counts the torn (or zeroed) tails Open logged truncating
// through countTorn.
var tornTails atomic.Uint64

type tornCounter struct{ slog.Handler }

func (h tornCounter) Enabled(context.Context, slog.Level) bool { return true }

func (h tornCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "tail of last segment") {
		tornTails.Add(1)
	}
	return nil
}

var countTorn = slog.New(tornCounter{slog.DiscardHandler})

// crashModel is what the test knows about the log at one instant.
type crashModel struct {
	gen       map[uint64]uint64 // generation that wrote each appended LSN
	acked     uint64            // every record <= acked was acknowledged durable
	truncated uint64            // largest TruncateBefore argument (>= 1)
}

func (m crashModel) clone() crashModel {
	m.gen = maps.Clone(m.gen)
	return m
}

func runCrashSeed(t *testing.T, seed uint64) {
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("seed %d (rerun: %s): %s", seed, testseed.Replay(t, seed), fmt.Sprintf(format, args...))
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	opts := Options{
		SegmentSize: int64(MinSegmentSize + rng.IntN(2048)),
		SyncEvery:   time.Hour, // no background sync: determinism
		Logger:      countTorn,
	}
	if rng.IntN(4) == 0 {
		opts.Sync = SyncInterval
	}
	mem := NewMemFS()
	model := crashModel{gen: map[uint64]uint64{}, truncated: 1}

	for gen := uint64(1); gen <= 3; gen++ {
		var snap *MemFS
		var snapModel crashModel
		ops, target := 0, rng.IntN(400)
		hfs := &hookFS{FS: mem}
		hfs.hook = func(op, name string) error {
			if op != "openappend" && snap == nil {
				if ops == target {
					snap = mem.Crash(rng)
					snapModel = model.clone()
				}
				ops++
			}
			return nil
		}
		o := opts
		o.FS = hfs
		l, err := Open(testDir, o)
		if err != nil {
			fail("gen %d: Open: %v\n%s", gen, err, describe(mem))
			return
		}
		for step := 0; step < 150 && snap == nil; step++ {
			last := l.LastLSN()
			switch r := rng.IntN(100); {
			case r < 55:
				batch := make([][]byte, 1+rng.IntN(4))
				for i := range batch {
					lsn := last + 1 + uint64(i)
					batch[i] = payloadFor(gen, lsn)
					model.gen[lsn] = gen
				}
				if _, err := l.Append(batch...); err != nil {
					fail("Append: %v", err)
					return
				}
			case r < 80:
				if last == 0 {
					continue
				}
				if err := l.WaitDurable(last); err != nil {
					fail("WaitDurable: %v", err)
					return
				}
				if opts.Sync == SyncAlways {
					model.acked = last
				}
			case r < 90:
				if err := l.Sync(); err != nil {
					fail("Sync: %v", err)
					return
				}
				model.acked = last
			case r < 96:
				x := 1 + rng.Uint64N(model.acked+1)
				model.truncated = max(model.truncated, x)
				if err := l.TruncateBefore(x); err != nil {
					fail("TruncateBefore: %v", err)
					return
				}
			default:
				if err := l.Close(); err != nil {
					fail("Close: %v", err)
					return
				}
				model.acked = last
				if l, err = Open(testDir, o); err != nil {
					fail("reopen: %v", err)
					return
				}
			}
		}
		if snap == nil {
			snap = mem.Crash(rng)
			snapModel = model.clone()
		}
		l.Close() // on the pre-crash file system; the crash image is separate

		// Recover from the crash image.
		o.FS = snap
		l, err = Open(testDir, o)
		if err != nil {
			fail("gen %d: Open after crash: %v\n%s", gen, err, describe(snap))
			return
		}
		first, last := l.FirstLSN(), l.LastLSN()
		if last < snapModel.acked {
			fail("gen %d: lost acknowledged records: last %d < acked %d", gen, last, snapModel.acked)
		}
		if first > snapModel.truncated && first <= last {
			fail("gen %d: FirstLSN %d beyond truncation point %d", gen, first, snapModel.truncated)
		}
		next := first
		model = crashModel{gen: map[uint64]uint64{}, truncated: max(first, 1)}
		err = l.Replay(0, func(lsn uint64, p []byte) error {
			if lsn != next {
				return fmt.Errorf("record %d, want %d", lsn, next)
			}
			next++
			if g, ok := snapModel.gen[lsn]; !ok || !bytes.Equal(p, payloadFor(g, lsn)) {
				return fmt.Errorf("record %d: wrong payload (appended by gen %d: %v)", lsn, g, ok)
			}
			model.gen[lsn] = snapModel.gen[lsn]
			return nil
		})
		if err != nil || next != last+1 {
			fail("gen %d: replay: %v (ended at %d, last %d)", gen, err, next, last)
			return
		}
		model.acked = last // Open synced the recovered records
		if err := l.Close(); err != nil {
			fail("close: %v", err)
			return
		}
		mem = snap
	}
}
