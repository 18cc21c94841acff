package store

// Issue #9 A: a failed WAL write or fdatasync, or a failed msync of a
// filter file, fails the store for good (the fsyncgate lesson); nothing
// ever acknowledges an answer resting on state whose record is not
// durable; Open makes what a killed writer left in memory durable before
// answering from it.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// failSwitch injects err into the operations op of the seams while on.
type failSwitch struct {
	on  atomic.Bool
	err error
}

func (f *failSwitch) sim(op mmapbits.Op) func(mmapbits.Op, string) error {
	return func(o mmapbits.Op, _ string) error {
		if o == op && f.on.Load() {
			return f.err
		}
		return nil
	}
}

func (f *failSwitch) wal(op wal.Op) func(wal.Op, string) error {
	return func(o wal.Op, _ string) error {
		if o == op && f.on.Load() {
			return f.err
		}
		return nil
	}
}

// powerLoss simulates a power loss of the world s runs in and discards s.
func (w *simWorld) powerLoss(s *Store, rng *rand.Rand) {
	if s != nil {
		w.crash(s, rng)
		return
	}
	w.sim.Crash(rng)
	w.fs = w.fs.Crash(rng)
}

// kill simulates the death of the process running s while the machine
// goes on: what the process had in the page cache (mapped pages, WAL bytes
// written to the OS) survives; what only it held (unwritten WAL buffers)
// does not. s is abandoned as it is: its goroutines, even one stopped in a
// hook, no longer reach the files.
func (w *simWorld) kill(s *Store) {
	s.closed.Store(true)
	close(s.stop)
	s.bg.Wait()
	w.sim.Kill()
	w.fs = w.fs.Kill()
	// Stop the dead store's WAL syncer: whatever it still writes goes to
	// the file system as it was before the kill, which is discarded.
	go s.log.Close()
	s.lock.release()
}

func checkpointLSN(t *testing.T, dir string) uint64 {
	t.Helper()
	cat, err := catalog.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cat.CheckpointLSN
}

// TestSyncFailureFailsStore: after an msync of a filter file or an
// fdatasync of the WAL fails, the store refuses every change (ErrFailed,
// naming the I/O error) even once the disk works again, records no
// checkpoint and deletes no WAL, keeps answering lookups, and Close
// returns the failure; after a power loss, the next Open loses nothing
// acknowledged. On Linux a failed sync marks the pages clean without
// writing them, so a second checkpoint that "succeeds" and deletes the
// WAL loses them: the seams model that.
func TestSyncFailureFailsStore(t *testing.T) {
	for _, what := range []string{"msync", "fdatasync"} {
		for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
			t.Run(fmt.Sprintf("%s/%v", what, mode), func(t *testing.T) {
				seed := testseed.Seed(t)
				rng := newTestRand(seed)
				w := newSimWorld(t, mode)
				fail := &failSwitch{err: syscall.EIO}
				w.sim.SetInjector(fail.sim(mmapbits.OpSync))
				w.fs.SetInjector(fail.wal(wal.OpSync))
				s, err := w.open(t)
				must(t, err)
				b, err := s.CreateBloom("b", BloomConfig{Capacity: 20_000, NonScaling: true})
				must(t, err)
				c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 4096})
				must(t, err)
				n, err := s.CreateCounting("n", BloomConfig{Capacity: 4096})
				must(t, err)
				var acked []int
				add := func(i int) error {
					if _, err := b.Add(key(i)); err != nil {
						return err
					}
					if err := c.Add(key(i)); err != nil {
						return err
					}
					return n.Add(key(i))
				}
				for i := 0; i < 1000; i++ {
					must(t, add(i))
					acked = append(acked, i)
					if i == 300 {
						must(t, s.Checkpoint())
					}
				}
				if mode == SyncInterval {
					must(t, s.log.Sync()) // what a power loss must keep
				}
				before := checkpointLSN(t, w.dir)
				fail.on.Store(true)
				var ferr error
				if what == "msync" {
					ferr = s.Checkpoint()
				} else if ferr = add(1000); ferr == nil {
					// SyncInterval acknowledged the add once written (a
					// power loss may lose it: it is after the last sync);
					// the next sync, the checkpoint's first step, fails.
					ferr = s.Checkpoint()
				}
				if !errors.Is(ferr, ErrFailed) || !errors.Is(ferr, syscall.EIO) {
					t.Fatalf("the failed sync gave %v, want ErrFailed wrapping EIO", ferr)
				}
				fail.on.Store(false) // the disk works again: retries would "succeed"
				for _, op := range []struct {
					name string
					err  error
				}{
					{"bloom add", second(b.Add(key(5000)))},
					{"cuckoo add", c.Add(key(5000))},
					{"counting delete", second(n.Delete(key(1)))},
					{"checkpoint", s.Checkpoint()},
					{"create", second(s.CreateBitmap("m", 64))},
					{"drop", s.Drop("c")},
					{"rename", s.Rename("c", "b")},
					{"load", b.Load(Keys(func(yield func([]byte) bool) { yield(key(6000)) }))},
				} {
					if !errors.Is(op.err, ErrFailed) || !errors.Is(op.err, syscall.EIO) {
						t.Fatalf("%s on a failed store: %v, want ErrFailed wrapping EIO", op.name, op.err)
					}
				}
				if got := checkpointLSN(t, w.dir); got != before {
					t.Fatalf("a checkpoint was recorded after the failure: LSN %d, was %d", got, before)
				}
				for _, i := range acked {
					if !b.Has(key(i)) || !c.Has(key(i)) || !n.Has(key(i)) {
						t.Fatalf("lookup of acknowledged key %d answers absent on the failed store", i)
					}
				}
				if err := s.Close(); !errors.Is(err, ErrFailed) {
					t.Fatalf("Close of a failed store: %v, want ErrFailed", err)
				}
				w.powerLoss(nil, rng)
				s, err = w.open(t)
				if err != nil {
					t.Fatalf("reopen after the failure and a power loss: %v", err)
				}
				defer s.Close()
				b, _ = s.Bloom("b")
				c, _ = s.Cuckoo("c")
				n, _ = s.Counting("n")
				lost := 0
				for _, i := range acked {
					if !b.Has(key(i)) || !c.Has(key(i)) || !n.Has(key(i)) {
						lost++
					}
				}
				if lost > 0 {
					t.Fatalf("seed %d: %d of %d acknowledged keys lost", seed, lost, len(acked))
				}
			})
		}
	}
}

// TestNoAckForBitsWithoutRecord: once the WAL failed, a Bloom add whose
// bits were set but whose record could not be written fails, and so does a
// retry that finds those bits set: "not new" would be acknowledged with no
// durable record behind it.
func TestNoAckForBitsWithoutRecord(t *testing.T) {
	for _, op := range []wal.Op{wal.OpWrite, wal.OpSync} {
		t.Run(op.String(), func(t *testing.T) {
			w := newSimWorld(t, SyncAlways)
			fail := &failSwitch{err: syscall.EIO}
			w.fs.SetInjector(fail.wal(op))
			s, err := w.open(t)
			must(t, err)
			defer s.Close()
			b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
			must(t, err)
			other, err := s.CreateBloom("other", BloomConfig{Capacity: 1000})
			must(t, err)
			must(t, second(b.Add([]byte("z")))) // b's latest record: durable
			// An add to another filter breaks the WAL; then an add to b
			// finds it broken: y's bits are set, its Append fails at once.
			fail.on.Store(true)
			if _, err := other.Add([]byte("x")); err == nil {
				t.Fatal("an add whose record failed succeeded")
			}
			fail.on.Store(false)
			y := []byte("y")
			if _, err := b.Add(y); err == nil {
				t.Fatal("an add on a broken WAL succeeded")
			}
			isNew, err := b.Add(y)
			if err == nil {
				t.Fatalf("retried add acknowledged (new=%v) with no durable record behind its bits", isNew)
			}
			if !errors.Is(err, ErrFailed) {
				t.Fatalf("retried add: %v, want ErrFailed", err)
			}
			if _, err := b.AddMany([][]byte{y}); !errors.Is(err, ErrFailed) {
				t.Fatalf("retried AddMany: %v, want ErrFailed", err)
			}
		})
	}
}

// TestKillBetweenBitsAndRecord: a writer killed after an add set its bits
// and before its record reached the WAL leaves the bits dirty in the page
// cache. The next Open must make them durable before a retried add answers
// "not new" from them, or a power loss after that acknowledgement loses
// the keys.
func TestKillBetweenBitsAndRecord(t *testing.T) {
	seed := testseed.Seed(t)
	rng := newTestRand(seed)
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100_000, NonScaling: true})
	must(t, err)
	must(t, s.Checkpoint())
	keys := make([][]byte, 200) // spread over many pages
	for i := range keys {
		keys[i] = key(i)
	}
	stopped, release := make(chan struct{}), make(chan struct{})
	s.hooks.afterBits = func() {
		close(stopped)
		<-release // the process dies here
	}
	defer close(release)
	go b.AddMany(keys)
	<-stopped
	w.kill(s)

	s, err = w.open(t)
	must(t, err)
	b, _ = s.Bloom("b")
	isNew, err := b.AddMany(keys) // the retry finds every bit set
	must(t, err)
	for i, v := range isNew {
		if v {
			t.Fatalf("key %d reported new: the killed add's bits were expected in memory", i)
		}
	}
	// Acknowledged. A power loss now must not lose them.
	w.powerLoss(s, rng)
	s, err = w.open(t)
	must(t, err)
	defer s.Close()
	b, _ = s.Bloom("b")
	lost := 0
	for _, k := range keys {
		if !b.Has(k) {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("seed %d: %d of %d acknowledged keys lost after a power loss", seed, lost, len(keys))
	}
}
