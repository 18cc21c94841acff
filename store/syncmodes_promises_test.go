package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// TestAckedVisibleUnderEachSyncMode: under each sync mode, with a fast
// background fdatasync and checkpoints racing the writers, every
// acknowledged add of a key no one deletes is visible to every lookup
// form at once and stays so; every acknowledged bitmap set/clear of a
// bit its goroutine owns reads back exactly.
func TestAckedVisibleUnderEachSyncMode(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			seed := testseed.Seed(t)
			ops := 200
			if testing.Short() {
				ops = 100
			}
			s := mustOpen(t, t.TempDir(), &Options{Sync: mode, SyncEvery: time.Millisecond, CheckpointEvery: 7 * time.Millisecond})
			defer s.Close()
			c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 512, BucketSize: 2})
			must(t, err)
			n, err := s.CreateCounting("n", BloomConfig{Capacity: 1000})
			must(t, err)
			m, err := s.CreateBitmap("m", 4096)
			must(t, err)
			b, err := s.CreateBloom("b", BloomConfig{Capacity: 500})
			must(t, err)
			const G = 4
			var wg sync.WaitGroup
			var bad atomic.Int32
			errf := func(format string, a ...any) {
				if bad.Add(1) < 10 {
					t.Errorf(format, a...)
				}
			}
			var stableMu sync.Mutex
			stable := [][]byte{}
			stop := make(chan struct{})
			// A reader of stable keys.
			var rwg sync.WaitGroup
			rwg.Add(1)
			go func() {
				defer rwg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					stableMu.Lock()
					ks := append([][]byte(nil), stable...)
					stableMu.Unlock()
					cm := c.HasMany(ks)
					nm := n.HasMany(ks)
					bmm := b.HasMany(ks)
					for i, k := range ks {
						if !c.Has(k) || !cm[i] || c.Count(k) == 0 {
							errf("reader: cuckoo lookup of stable %q absent", k)
						}
						if !n.Has(k) || !nm[i] || n.Count(k) == 0 {
							errf("reader: counting lookup of stable %q absent", k)
						}
						if !b.Has(k) || !bmm[i] {
							errf("reader: bloom lookup of stable %q absent", k)
						}
					}
				}
			}()
			for g := range G {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := newTestRand(seed + uint64(g)*7919)
					var mine [][]byte
					bits := map[uint64]bool{}
					for i := 0; i < ops && bad.Load() == 0; i++ {
						switch op := r.IntN(10); {
						case op < 4:
							k := []byte(fmt.Sprintf("g%d-%d", g, i))
							if err := c.Add(k); err != nil {
								errf("cuckoo add: %v", err)
								return
							}
							if err := n.Add(k); err != nil {
								errf("counting add: %v", err)
								return
							}
							if _, err := b.Add(k); err != nil {
								errf("bloom add: %v", err)
								return
							}
							if !c.Has(k) || !c.HasMany([][]byte{k})[0] || c.Count(k) == 0 {
								errf("cuckoo %q absent right after its ack", k)
							}
							if !n.Has(k) || !n.HasMany([][]byte{k})[0] || n.Count(k) == 0 {
								errf("counting %q absent right after its ack", k)
							}
							if !b.Has(k) {
								errf("bloom %q absent right after its ack", k)
							}
							if r.IntN(3) == 0 {
								stableMu.Lock()
								stable = append(stable, k)
								stableMu.Unlock()
							} else {
								mine = append(mine, k)
							}
						case op < 6 && len(mine) > 0:
							j := r.IntN(len(mine))
							k := mine[j]
							mine = append(mine[:j], mine[j+1:]...)
							if _, err := c.Delete(k); err != nil && !errors.Is(err, ErrAmbiguous) {
								errf("cuckoo delete: %v", err)
								return
							}
							if ok, err := n.Delete(k); err != nil || !ok {
								errf("counting delete %q: %v %v", k, ok, err)
								return
							}
						default:
							off := uint64(g)*1024 + uint64(r.IntN(1024))
							set := r.IntN(2) == 0
							var err error
							if r.IntN(4) == 0 {
								bt := s.NewBatch()
								if set {
									bt.BitmapSet(m, off)
								} else {
									bt.BitmapClear(m, off)
								}
								_, err = bt.Commit()
							} else if set {
								_, err = m.Set(off)
							} else {
								_, err = m.Clear(off)
							}
							if err != nil {
								errf("bitmap: %v", err)
								return
							}
							bits[off] = set
							if m.Get(off) != set || m.GetMany([]uint64{off})[0] != set {
								errf("bitmap bit %d: Get %v GetMany %v right after ack of set=%v", off, m.Get(off), m.GetMany([]uint64{off})[0], set)
							}
						}
					}
					for off, set := range bits {
						if m.Get(off) != set {
							errf("bitmap bit %d: Get %v at the end, want %v", off, m.Get(off), set)
						}
					}
					for _, k := range mine {
						if !c.Has(k) || !n.Has(k) {
							errf("%q absent at the end", k)
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			rwg.Wait()
			if bad.Load() > 0 {
				t.Fatalf("seed %d: %d violations", seed, bad.Load())
			}
		})
	}
}

// TestNoopAnswersAfterBackgroundSyncFailure: under SyncInterval, once the
// background fdatasync of the WAL has failed, "the store fails" and "No
// answer is acknowledged once the store has failed" (package doc): every
// later mutation must return an error wrapping ErrFailed and the EIO.
// The store only noticed the background failure on its 100 ms size tick;
// in between, calls that changed nothing were answered nil (an
// adversarial review's finding; failing before failedNow).
func TestNoopAnswersAfterBackgroundSyncFailure(t *testing.T) {
	w := newSimWorld(t, SyncInterval)
	w.opts.SyncEvery = time.Millisecond
	fail := &failSwitch{err: syscall.EIO}
	w.fs.SetInjector(fail.wal(wal.OpSync))
	s, err := w.open(t)
	must(t, err)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 1000})
	must(t, err)
	m, err := s.CreateBitmap("m", 1024)
	must(t, err)
	e, err := s.CreateCuckoo("e", CuckooConfig{Capacity: 1000}) // no change logged this session
	must(t, err)
	for i := range 20 {
		must(t, second(b.Add(key(i))))
		must(t, c.Add(key(i)))
		must(t, n.Add(key(i)))
		must(t, second(m.Set(uint64(i))))
	}
	fail.on.Store(true)
	// Wait for the background fdatasync to fail (every 1 ms).
	deadline := time.Now().Add(5 * time.Second)
	for s.log.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the background fdatasync never ran")
		}
		time.Sleep(50 * time.Microsecond)
	}
	fail.on.Store(false)
	noticed := s.failed() != nil
	type res struct {
		name string
		err  error
	}
	var rs []res
	rs = append(rs, res{"bloom Add of a present key", second(b.Add(key(1)))})
	rs = append(rs, res{"cuckoo AddNX of a present key", second(c.AddNX(key(1)))})
	rs = append(rs, res{"cuckoo Delete of an absent key", second(c.Delete([]byte("never-added")))})
	rs = append(rs, res{"counting Delete of an absent key", second(n.Delete([]byte("never-added")))})
	rs = append(rs, res{"bitmap Set of a set bit", second(m.Set(3))})
	rs = append(rs, res{"bitmap Clear of a clear bit", second(m.Clear(900))})
	rs = append(rs, res{"cuckoo Delete on an unchanged filter", second(e.Delete([]byte("never-added")))})
	nb := s.NewBatch()
	nb.BitmapSet(m, 3)
	rs = append(rs, res{"Batch of a bitmap Set of a set bit", second(nb.Commit())})
	t.Logf("log failed: %v; store noticed before the calls: %v", s.log.Err(), noticed)
	for _, r := range rs {
		if !errors.Is(r.err, ErrFailed) || !errors.Is(r.err, syscall.EIO) {
			t.Errorf("%s after the background fdatasync failed: %v, want ErrFailed wrapping EIO", r.name, r.err)
		}
	}
}

// TestSyncModeChangeAcrossReopen: a writer under one mode is killed (its
// WAL writes in the page cache survive), the store is reopened under the
// other mode, changed, and the power fails: everything the first writer
// acknowledged (a process crash loses nothing in either mode) and
// everything the second acknowledged under SyncAlways survives, for
// every kind, deletes and clears included.
func TestSyncModeChangeAcrossReopen(t *testing.T) {
	for _, first := range []SyncMode{SyncInterval, SyncAlways} {
		second := SyncAlways
		if first == SyncAlways {
			second = SyncInterval
		}
		t.Run(first.String()+"-then-"+second.String(), func(t *testing.T) {
			seed := testseed.Seed(t)
			rng := newTestRand(seed)
			w := newSimWorld(t, first)
			w.opts.SyncEvery = time.Hour
			s, err := w.open(t)
			must(t, err)
			createSimFilters(t, s)
			m := NewCrashModel(first, simFilters)
			runOps(t, seed, rng, s, m, 300)
			w.kill(s)
			m.Crash(false)
			w.opts.Sync = second
			s, err = w.open(t)
			if err != nil {
				t.Fatalf("seed %d: reopen under %v: %v", seed, second, err)
			}
			if err := m.Settle(s); err != nil {
				t.Fatalf("seed %d: settle: %v", seed, err)
			}
			checkModel(t, seed, "after the kill and reopen", s, m)
			m.window = second == SyncInterval
			runOps(t, seed, rng, s, m, 100)
			if second == SyncInterval {
				must(t, s.log.Sync())
				m.Sync()
			}
			w.powerLoss(s, rng)
			m.Crash(true)
			w.opts.Sync = first
			s, err = w.open(t)
			if err != nil {
				t.Fatalf("seed %d: reopen after the power loss: %v", seed, err)
			}
			defer s.Close()
			if err := m.Settle(s); err != nil {
				t.Fatalf("seed %d: settle: %v", seed, err)
			}
			checkModel(t, seed, "after the power loss", s, m)
		})
	}
}

// TestCloseRacingWritersThenPowerLoss: writers race Close; every
// change acknowledged (nil error) before or during Close is durable once
// Close returned nil, in either mode: a power loss right after loses none.
func TestCloseRacingWritersThenPowerLoss(t *testing.T) {
	for _, mode := range []SyncMode{SyncInterval, SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			for iter := range 15 {
				seed := testseed.Seed(t) + uint64(iter)
				rng := newTestRand(seed)
				w := newSimWorld(t, mode)
				w.opts.SyncEvery = time.Hour
				s, err := w.open(t)
				must(t, err)
				c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 256, BucketSize: 2})
				must(t, err)
				n, err := s.CreateCounting("n", BloomConfig{Capacity: 2000})
				must(t, err)
				m, err := s.CreateBitmap("m", 4096)
				must(t, err)
				b, err := s.CreateBloom("b", BloomConfig{Capacity: 200})
				must(t, err)
				const G = 4
				acked := make([][]int, G)
				var wg sync.WaitGroup
				for g := range G {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < 1000; i++ {
							v := g*1000 + i
							k := key(v)
							if err := c.Add(k); err != nil {
								return
							}
							if err := n.Add(k); err != nil {
								return
							}
							if _, err := m.Set(uint64(v % 4096)); err != nil {
								return
							}
							if _, err := b.Add(k); err != nil {
								return
							}
							acked[g] = append(acked[g], v)
						}
					}()
				}
				time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
				cerr := s.Close()
				wg.Wait()
				if cerr != nil {
					t.Fatalf("seed %d: Close: %v", seed, cerr)
				}
				w.powerLoss(nil, rng)
				s, err = w.open(t)
				if err != nil {
					t.Fatalf("seed %d: reopen: %v", seed, err)
				}
				c, _ = s.Cuckoo("c")
				n, _ = s.Counting("n")
				m, _ = s.Bitmap("m")
				b, _ = s.Bloom("b")
				total := 0
				for g := range G {
					for _, v := range acked[g] {
						total++
						k := key(v)
						if !c.Has(k) || !n.Has(k) || !m.Get(uint64(v%4096)) || !b.Has(k) {
							t.Fatalf("seed %d: acked %d lost: cuckoo %v counting %v bitmap %v bloom %v", seed, v, c.Has(k), n.Has(k), m.Get(uint64(v%4096)), b.Has(k))
						}
					}
				}
				must(t, s.Close())
				_ = total
			}
		})
	}
}

// TestCloseFailedMsyncThenPowerLoss: Close's own checkpoint meets a
// failing msync: Close returns ErrFailed wrapping EIO, and after a power
// loss every acknowledged change is back.
func TestCloseFailedMsyncThenPowerLoss(t *testing.T) {
	for _, mode := range []SyncMode{SyncInterval, SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			seed := testseed.Seed(t)
			rng := newTestRand(seed)
			w := newSimWorld(t, mode)
			w.opts.SyncEvery = time.Hour
			fail := &failSwitch{err: syscall.EIO}
			w.sim.SetInjector(fail.sim(mmapbits.OpSync))
			s, err := w.open(t)
			must(t, err)
			createSimFilters(t, s)
			mdl := NewCrashModel(mode, simFilters)
			runOps(t, seed, rng, s, mdl, 200)
			n, err := s.Counting("n")
			must(t, err)
			must(t, n.Add([]byte("final"))) // a dirty page for Close's msync
			must(t, mdl.Apply(CountingAdd("final")))
			fail.on.Store(true)
			cerr := s.Close()
			if !errors.Is(cerr, ErrFailed) || !errors.Is(cerr, syscall.EIO) {
				t.Fatalf("Close with a failing msync: %v, want ErrFailed wrapping EIO", cerr)
			}
			fail.on.Store(false)
			w.powerLoss(nil, rng)
			mdl.Crash(false) // Close synced the WAL: nothing acknowledged may go
			s, err = w.open(t)
			if err != nil {
				t.Fatalf("seed %d: reopen: %v", seed, err)
			}
			defer s.Close()
			checkModel(t, seed, "after a failed Close and a power loss", s, mdl)
		})
	}
}
