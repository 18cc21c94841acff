package cuckoo

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/internal/testseed"
)

// readers runs n goroutines that, until stop, pick keys below the published
// count done and check has(key). It returns a wait function reporting the
// number of checks and of false negatives.
func readers(n int, seed uint64, done *atomic.Uint64, stop *atomic.Bool, has func(i uint64) bool) *readerSet {
	rs := new(readerSet)
	for g := 0; g < n; g++ {
		rs.wg.Add(1)
		go func(g uint64) {
			defer rs.wg.Done()
			r := rand.New(rand.NewPCG(seed, g))
			for !stop.Load() {
				d := done.Load() // keys < d were inserted and returned
				if d == 0 {
					runtime.Gosched()
					continue
				}
				i := r.Uint64N(d)
				if r.IntN(4) == 0 { // recent keys: just-finished inserts
					i = d - 1 - r.Uint64N(min(d, 64))
				}
				rs.checks.Add(1)
				// done may be lowered (TestConcurrentFilterReadersAtFullLoad
				// lowers it before deleting the keys above it): a miss
				// counts only if the key is still below done afterwards.
				// Atomics are sequentially consistent, so a reader that saw
				// a delete sees the lowered done.
				if !has(i) && i < done.Load() {
					rs.misses.Add(1)
				}
			}
		}(uint64(g))
	}
	return rs
}

// readerSet is the goroutines readers started and their counts.
type readerSet struct {
	wg             sync.WaitGroup
	checks, misses atomic.Uint64
}

// wait waits for the readers to stop and returns their counts.
func (rs *readerSet) wait() (checks, misses uint64) {
	rs.wg.Wait()
	return rs.checks.Load(), rs.misses.Load()
}

// pace yields, for at most a second, until the readers have made at least
// n checks. A writer calls it as it goes: a test's writes take
// milliseconds, and on a busy machine (or with -cpu 1, every time) they
// could end before any reader ran, leaving nothing checked concurrently.
func (rs *readerSet) pace(n uint64) {
	if rs.checks.Load() >= n {
		return
	}
	for deadline := time.Now().Add(time.Second); rs.checks.Load() < n && time.Now().Before(deadline); {
		runtime.Gosched()
	}
}

func moves(fs []*Filter) (n uint64) {
	for _, f := range fs {
		n += f.moves.Load()
	}
	return n
}

// TestConcurrentChainReaders: lock-free readers never miss a key whose Add
// returned, while adds run at high load (displacements) and the chain
// expands.
func TestConcurrentChainReaders(t *testing.T) {
	seed := testseed.Seed(t)
	c, err := NewChain(Config{Capacity: 5000, Expansion: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hash := func(i uint64) uint64 { return mix(i ^ seed) }
	var done atomic.Uint64
	var stop atomic.Bool
	rs := readers(4, seed, &done, &stop, func(i uint64) bool {
		return c.HasHash(hash(i)) && c.CountHash(hash(i)) >= 1
	})
	const n = 400_000
	for i := uint64(0); i < n; i++ {
		if err := c.AddHash(hash(i)); err != nil {
			stop.Store(true)
			t.Fatal(err)
		}
		done.Store(i + 1)
		rs.pace(i / 32)
	}
	stop.Store(true)
	checks, misses := rs.wait()
	ls := c.Layers()
	t.Logf("%d adds, %d layers, %d fingerprints moved, %d concurrent checks, %d false negatives", n, len(ls), moves(ls), checks, misses)
	if misses != 0 {
		t.Fatalf("%d false negatives", misses)
	}
	if len(ls) < 3 || moves(ls) < 1000 || checks < 1000 {
		t.Fatalf("test did not exercise expansion/kicks: %d layers, %d moves, %d checks", len(ls), moves(ls), checks)
	}
}

// TestConcurrentFilterReadersAtFullLoad: one filter filled to its first
// ErrFull (~96% at b=4) while readers run; then deletes and re-inserts of
// other keys keep kicking while readers check the stable keys.
func TestConcurrentFilterReadersAtFullLoad(t *testing.T) {
	seed := testseed.Seed(t)
	f, err := New(Geometry{Buckets: 20_011, BucketSize: 4, FingerprintBits: 16, Salt: seed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hash := func(i uint64) uint64 { return mix(i + seed) }
	var done atomic.Uint64
	var stop atomic.Bool
	rs := readers(4, seed, &done, &stop, func(i uint64) bool { return f.HasHash(hash(i)) })
	var n uint64
	for ; ; n++ {
		if err := f.InsertHash(hash(n)); err != nil {
			if !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
			break
		}
		done.Store(n + 1)
		rs.pace(n / 32)
	}
	load := f.Occupancy()
	// Churn at full load: readers check keys < stable, which are never
	// deleted; the writer cycles the keys above stable.
	stable := n * 3 / 4
	done.Store(stable)
	movesBefore := f.moves.Load()
	lo, hi := stable, n // live churn keys
	for round := 0; round < 3; round++ {
		for i := lo; i < hi; i++ {
			if !f.DeleteHash(hash(i)) {
				t.Fatalf("delete %d failed", i)
			}
		}
		for lo = hi; f.InsertHash(hash(hi)) == nil; hi++ {
			rs.pace((n + hi) / 32)
		}
	}
	stop.Store(true)
	checks, misses := rs.wait()
	t.Logf("filled %d items to load %.4f; churn moved %d more; %d fingerprints moved in all, %d concurrent checks, %d false negatives",
		n, load, f.moves.Load()-movesBefore, f.moves.Load(), checks, misses)
	if misses != 0 {
		t.Fatalf("%d false negatives", misses)
	}
	if load < 0.93 || f.moves.Load() < 1000 || checks < 1000 {
		t.Fatalf("test did not reach high load with kicks: load %.3f, %d moves, %d checks", load, f.moves.Load(), checks)
	}
}

// TestConcurrentSeqGuard shows why lookups re-check the displacement
// sequence counter: with heavy churn on a small full filter, a bare read of
// i1 then i2 (no counter) occasionally misses a key being moved from i2 to
// i1 between the two loads (logged: typically a few per 10^7 checks), while
// HasHash and a Front's HasHash, run concurrently on the same workload,
// never do.
func TestConcurrentSeqGuard(t *testing.T) {
	seed := testseed.Seed(t)
	f, _ := New(Geometry{Buckets: 2011, BucketSize: 4, FingerprintBits: 16, Salt: seed}, nil)
	hash := func(i uint64) uint64 { return mix(i + seed) }
	var n uint64
	for ; f.InsertHash(hash(n)) == nil; n++ {
	}
	stable := n * 3 / 4
	var done atomic.Uint64
	var stop atomic.Bool
	done.Store(stable)
	bare := readers(1, seed, &done, &stop, func(i uint64) bool {
		i1, fp, i2 := f.g.Locate(hash(i))
		return f.match(f.load(i1), fp) || f.match(f.load(i2), fp)
	})
	fr := NewFront(f, nil)
	guarded := readers(2, seed+1, &done, &stop, func(i uint64) bool {
		if i%2 == 0 {
			return f.HasHash(hash(i))
		}
		return fr.HasHash(hash(i))
	})
	rounds := 1500
	if racedetect.Enabled {
		rounds = 150
	}
	lo, hi := stable, n
	for round := 0; round < rounds; round++ {
		for i := lo; i < hi; i++ {
			f.DeleteHash(hash(i))
		}
		for lo = hi; f.InsertHash(hash(hi)) == nil; hi++ {
		}
	}
	stop.Store(true)
	bc, bm := bare.wait()
	gc, gm := guarded.wait()
	t.Logf("%d fingerprints moved; bare reads: %d checks, %d false negatives; HasHash and Front.HasHash: %d checks, %d false negatives", f.moves.Load(), bc, bm, gc, gm)
	if gm != 0 {
		t.Fatalf("HasHash and Front.HasHash: %d false negatives", gm)
	}
}

// TestConcurrentInsertHashesReaders: lock-free readers (HasHash, and
// HasManyHash on one key) never miss a key whose InsertHashes call
// returned, while batches fill a filter to its first failed insert,
// displacements included. The writer paces itself to a check per batch
// (readerSet.pace: without it, the test failed for want of checks once in
// CI and every time with -cpu 1).
func TestConcurrentInsertHashesReaders(t *testing.T) {
	seed := testseed.Seed(t)
	f, err := New(Geometry{Buckets: 20_011, BucketSize: 4, FingerprintBits: 16, Salt: seed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hash := func(i uint64) uint64 { return mix(i + seed) }
	var done atomic.Uint64
	var stop atomic.Bool
	rs := readers(4, seed, &done, &stop, func(i uint64) bool {
		if i%2 == 0 {
			return f.HasHash(hash(i))
		}
		var out [1]bool
		return f.HasManyHash([]uint64{hash(i)}, out[:])[0]
	})
	hs := make([]uint64, 37)
	var n, batches uint64
	for full := false; !full; {
		for j := range hs {
			hs[j] = hash(n + uint64(j))
		}
		k, err := f.InsertHashes(hs)
		if err != nil {
			if !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
			full = true
		}
		n += uint64(k)
		done.Store(n)
		batches++
		rs.pace(batches)
	}
	stop.Store(true)
	checks, misses := rs.wait()
	t.Logf("filled %d items to load %.4f; %d fingerprints moved, %d concurrent checks, %d false negatives",
		n, f.Occupancy(), f.moves.Load(), checks, misses)
	if misses != 0 {
		t.Fatalf("%d false negatives", misses)
	}
	if f.Occupancy() < 0.93 || f.moves.Load() < 1000 || checks < 1000 {
		t.Fatalf("test did not reach high load with kicks: load %.3f, %d moves, %d checks", f.Occupancy(), f.moves.Load(), checks)
	}
}
