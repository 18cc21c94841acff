package cuckoo

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/testseed"
)

// checkBuilt fails t unless f holds exactly the keys of in (a multiset),
// each in one of its two buckets: every key is found, the count is
// len(in), and the table holds len(in) fingerprints, as many of each
// value as in's keys have.
func checkBuilt(t *testing.T, what string, f *Filter, in []uint64) {
	t.Helper()
	if f.Count() != uint64(len(in)) {
		t.Fatalf("%s: count %d, want %d", what, f.Count(), len(in))
	}
	want := map[[2]uint64]int{} // (bucket pair, fingerprint) -> copies
	for _, h := range in {
		i1, fp, i2 := f.g.Locate(h)
		if !f.HasHash(h) {
			t.Fatalf("%s: key %#x is missing", what, h)
		}
		want[[2]uint64{min(i1, i2)<<16 | fp, max(i1, i2)}]++
	}
	got := map[[2]uint64]int{}
	used := 0
	for i, v := range f.words {
		for j := range f.g.BucketSize {
			fp := f.slot(v, j)
			if fp == 0 {
				continue
			}
			used++
			alt := f.g.Alt(uint64(i), fp)
			got[[2]uint64{min(uint64(i), alt)<<16 | fp, max(uint64(i), alt)}]++
		}
	}
	if used != len(in) {
		t.Fatalf("%s: the table holds %d fingerprints, want %d", what, used, len(in))
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("%s: fingerprint %#x of buckets %d/%d: %d copies, want %d", what, k[0]&0xffff, k[0]>>16, k[1], got[k], n)
		}
	}
}

// TestBuild: Build on 1 to 8 goroutines leaves every key in one of its
// buckets, the count exact and no other fingerprint in the table, and
// reorders the keys it was given (a permutation); into a table filled to
// its target load every key goes in. Both builds: the two-phase one
// (DeriveMul) and the block build (DeriveLocal, of two blocks or more).
func TestBuild(t *testing.T) {
	r := testseed.New(t)
	for _, d := range []Derivation{DeriveMul, DeriveLocal} {
		n, rounds := uint64(300_000), 3
		if testing.Short() {
			n = 60_000
		}
		if d == DeriveLocal {
			n = 500_000 // 2*LocalBlock buckets or more for b = 2..4
			if testing.Short() {
				rounds = 1
			}
		}
		for _, workers := range []int{1, 2, 3, 8} {
			if testing.Short() && d == DeriveLocal && workers%2 == 1 {
				continue
			}
			for round := range rounds {
				f, hs := buildKeys(t, r, n, 2+r.IntN(3), 8+r.IntN(9))
				g := f.Geometry()
				g.Derivation = d
				f, _ = New(g, nil)
				if (d == DeriveLocal) != (f.split > 0) {
					t.Fatalf("%+v: split %d", g, f.split)
				}
				orig := slices.Clone(hs)
				k, err := f.Build(hs, workers)
				if err != nil || k != len(hs) {
					t.Fatalf("%v workers %d round %d (%+v): Build inserted %d of %d keys: %v", d, workers, round, f.g, k, len(hs), err)
				}
				slices.Sort(orig)
				checkBuilt(t, "Build", f, orig)
				slices.Sort(hs)
				if !slices.Equal(hs, orig) {
					t.Fatalf("%v workers %d round %d: Build's reordered keys are not a permutation of the keys given", d, workers, round)
				}
				t.Logf("%v workers %d round %d: %d keys, %d buckets, %d moves, %d stale paths searched again", d, workers, round, n, f.g.Buckets, f.moves.Load(), staleBuildPaths.Load())
			}
		}
	}
}

// TestBuildLocal: a block build puts every key in its block and leaves
// the same words, count and moves for the same keys in the same order on
// the same number of goroutines, whatever the timing; on another number
// it may differ.
func TestBuildLocal(t *testing.T) {
	g, hs := threeBlocks(t, testseed.New(t))
	build := func(procs int) *Filter {
		f, _ := New(g, nil)
		in := slices.Clone(hs)
		for i := 0; i < len(in); i += 1 << 16 { // in calls, as a Load makes them
			if k, err := f.Build(in[i:min(i+1<<16, len(in))], procs); err != nil || k != min(1<<16, len(in)-i) {
				t.Fatalf("procs %d: Build inserted %d: %v", procs, k, err)
			}
		}
		return f
	}
	a, b := build(3), build(3)
	if !slices.Equal(a.words, b.words) || a.Count() != b.Count() || a.moves.Load() != b.moves.Load() || a.moves.Load() == 0 {
		t.Fatalf("two builds on 3 goroutines: words equal %v, counts %d/%d, moves %d/%d",
			slices.Equal(a.words, b.words), a.Count(), b.Count(), a.moves.Load(), b.moves.Load())
	}
	checkBuilt(t, "Build", a, hs)
	for i, v := range a.words {
		for j := range g.BucketSize {
			if fp := a.slot(v, j); fp != 0 && min(a.alt(uint64(i), fp), g.Split())>>localShift != min(uint64(i), g.Split())>>localShift {
				t.Fatalf("bucket %d holds a fingerprint whose other bucket is in another block", i)
			}
		}
	}
}

// threeBlocks returns Plan's DeriveLocal geometry of three blocks, salted
// from r, and random keys for 90% of its slots (Plan's load).
func threeBlocks(t *testing.T, r *rand.Rand) (Geometry, []uint64) {
	t.Helper()
	g, err := Plan(3*LocalBlock*4*9/10, 4, 16)
	if err != nil {
		t.Fatal(err)
	}
	if g.Derivation != DeriveLocal || g.Split() == 0 {
		t.Fatalf("Plan gave %+v, want DeriveLocal of several blocks", g)
	}
	g.Salt = r.Uint64()
	hs := make([]uint64, g.Slots()*9/10)
	for i := range hs {
		hs[i] = r.Uint64()
	}
	return g, hs
}

// TestBuildLocalPrimaryFirst: a build by blocks puts every key whose
// primary bucket has room there before it places the others, so that
// more keys sit in their primary bucket, where a lookup finds them with
// one cache miss, than when each key goes to either bucket as it comes:
// at Plan's 90% load, in one Build call, over 80% (77.3% in one pass,
// BenchmarkFirstBucket's plan-build at 1e7; seen here with the
// one-pass build, 77.20%), and every key is found.
func TestBuildLocalPrimaryFirst(t *testing.T) {
	g, hs := threeBlocks(t, testseed.New(t))
	f, err := New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := f.Build(slices.Clone(hs), 2); err != nil || k != len(hs) {
		t.Fatalf("Build inserted %d of %d: %v", k, len(hs), err)
	}
	checkBuilt(t, "Build", f, hs)
	first := 0
	for _, h := range hs {
		i1, fp, _ := g.Locate(h)
		if f.match(f.words[i1], fp) {
			first++
		}
	}
	share := float64(first) / float64(len(hs))
	t.Logf("%.2f%% of the keys in their primary bucket", 100*share)
	if share < 0.80 {
		t.Fatal("want 80% or more in their primary bucket")
	}
}

// TestBuildFull: given more keys than fit, Build inserts a prefix of its
// reordered keys, returns an error wrapping ErrFull, and the table holds
// exactly that prefix; keys repeated more often than their two buckets
// have slots are among the rest.
func TestBuildFull(t *testing.T) {
	r := testseed.New(t)
	for _, workers := range []int{1, 2, 4} {
		for round := range 6 {
			g, err := Plan(20_000+r.Uint64N(20_000), 4, 12)
			if err != nil {
				t.Fatal(err)
			}
			if round >= 4 { // a block build: two blocks or more
				if testing.Short() && workers != 2 {
					continue
				}
				g.Buckets = 2*LocalBlock + r.Uint64N(LocalBlock)
			} else {
				g.Derivation = DeriveMul
			}
			g.Salt = r.Uint64()
			f, _ := New(g, nil)
			hs := make([]uint64, g.Slots()*21/20)
			for i := range hs {
				hs[i] = r.Uint64()
			}
			dup := hs[0]
			if round%2 == 1 {
				// One key 20 times: at most 2*4 copies fit.
				for i := range 20 {
					hs[1+i*97] = dup
				}
			}
			orig := slices.Clone(hs)
			k, err := f.Build(hs, workers)
			if !errors.Is(err, ErrFull) || k >= len(hs) {
				t.Fatalf("workers %d round %d: Build inserted %d of %d keys into %d slots: %v", workers, round, k, len(hs), g.Slots(), err)
			}
			checkBuilt(t, "Build", f, hs[:k])
			slices.Sort(orig)
			slices.Sort(hs)
			if !slices.Equal(hs, orig) {
				t.Fatalf("workers %d round %d: Build's reordered keys are not a permutation of the keys given", workers, round)
			}
		}
	}
}

// buildKeys returns an empty filter of b-slot buckets and f-bit
// fingerprints, with a random salt, planned for n keys, and n random
// hashes, all from r.
func buildKeys(t *testing.T, r *rand.Rand, n uint64, b, f int) (*Filter, []uint64) {
	t.Helper()
	g, err := Plan(n, b, f)
	if err != nil {
		t.Fatal(err)
	}
	g.Salt = r.Uint64()
	filter, _ := New(g, nil)
	hs := make([]uint64, n)
	for i := range hs {
		hs[i] = r.Uint64()
	}
	return filter, hs
}

// setBuildSearchHook sets buildSearchHook for the rest of the test.
func setBuildSearchHook(t *testing.T, hook func(f *Filter, locks stripes, last node, free int, ok bool) bool) {
	buildSearchHook = hook
	t.Cleanup(func() { buildSearchHook = nil })
}

// TestBuildStripeContention: with one or two stripes for the whole table,
// every path's moves contend for the same locks, on 8 goroutines; the
// build is still exact.
func TestBuildStripeContention(t *testing.T) {
	r := testseed.New(t)
	defer func(n int) { stripeCount = n }(stripeCount)
	for _, stripes := range []int{1, 2} {
		stripeCount = stripes
		f, hs := buildKeys(t, r, 100_000, 4, 12)
		orig := slices.Clone(hs)
		if k, err := f.Build(hs, 8); err != nil || k != len(hs) {
			t.Fatalf("%d stripes: Build inserted %d of %d keys: %v", stripes, k, len(hs), err)
		}
		slices.Sort(orig)
		checkBuilt(t, fmt.Sprintf("%d stripes", stripes), f, orig)
	}
}

// TestBuildStalePaths: a path that another goroutine's move made stale
// between the search and the lock (here: the end bucket's free slot
// taken by a fingerprint moved within that bucket, so the table's
// contents do not change) is not applied; the key is searched for again
// and, if every path keeps going stale, inserted on the caller's
// goroutine at the end. Either way the build is exact.
func TestBuildStalePaths(t *testing.T) {
	r := testseed.New(t)
	for _, every := range []int{1, 2} { // make every search stale, or every second one
		var searches, staled atomic.Int64
		// The slots the hook filled: it never empties one again, which
		// would make another goroutine's path, made stale by filling
		// it, hold again (moves never empty a slot; only the hook does).
		var mu sync.Mutex
		filled := map[[2]uint64]bool{}
		setBuildSearchHook(t, func(f *Filter, locks stripes, last node, free int, ok bool) bool {
			if !ok || searches.Add(1)%int64(every) != 0 {
				return ok
			}
			held := locks.lockPath(nil, node{bucket: last.bucket, parent: -1}, nil)
			defer locks.unlock(held)
			v := f.load(last.bucket)
			if f.slot(v, free) != 0 {
				return ok // another goroutine's move took the slot already
			}
			mu.Lock()
			defer mu.Unlock()
			for j := range f.g.BucketSize {
				if fp := f.slot(v, j); fp != 0 && j != free && !filled[[2]uint64{last.bucket, uint64(j)}] {
					atomic.StoreUint64(&f.words[last.bucket], f.setSlot(f.setSlot(v, free, fp), j, 0))
					filled[[2]uint64{last.bucket, uint64(free)}] = true
					staled.Add(1)
					break
				}
			}
			return ok
		})
		f, hs := buildKeys(t, r, 60_000, 4, 12)
		orig := slices.Clone(hs)
		stale := staleBuildPaths.Load()
		if k, err := f.Build(hs, 4); err != nil || k != len(hs) {
			t.Fatalf("every %d: Build inserted %d of %d keys: %v", every, k, len(hs), err)
		}
		slices.Sort(orig)
		checkBuilt(t, fmt.Sprintf("every %d", every), f, orig)
		got := int64(staleBuildPaths.Load() - stale)
		if staled.Load() == 0 || got < staled.Load() {
			t.Fatalf("every %d: %d paths made stale, %d found stale: want some, and every one found", every, staled.Load(), got)
		}
		t.Logf("every %d: %d searches, %d paths made stale, all found stale", every, searches.Load(), staled.Load())
	}
}

// TestBuildSpuriousFull: a search that finds no path while other
// goroutines move fingerprints may have missed one. Build then stops
// starting searches, but the keys left are tried again alone, in order,
// at the end, and go in if they fit: a table that is not full is not
// reported full.
func TestBuildSpuriousFull(t *testing.T) {
	r := testseed.New(t)
	var searches atomic.Int64
	setBuildSearchHook(t, func(_ *Filter, _ stripes, _ node, _ int, ok bool) bool {
		return ok && searches.Add(1) > 2 // the first two searches "find nothing"
	})
	f, hs := buildKeys(t, r, 60_000, 4, 12)
	orig := slices.Clone(hs)
	if k, err := f.Build(hs, 2); err != nil || k != len(hs) {
		t.Fatalf("Build inserted %d of %d keys: %v", k, len(hs), err)
	}
	slices.Sort(orig)
	checkBuilt(t, "after a search that found nothing", f, orig)
}

// TestStripesLockPath: lockPath takes the stripe of every bucket on the
// path once, in increasing order, and holds it until unlock; a second
// path sharing one of those stripes waits for the unlock.
func TestStripesLockPath(t *testing.T) {
	defer func(n int) { stripeCount = n }(stripeCount)
	stripeCount = 8
	s := newStripes()
	// A path of buckets 2 -> 5 -> 21 -> 13 (stripes 2, 5, 5, 5 mod 8),
	// which lockPath walks from its end.
	q := []node{{bucket: 2, parent: -1}, {bucket: 5, parent: 0}, {bucket: 21, parent: 1}}
	last := node{bucket: 13, parent: 2}
	held := s.lockPath(q, last, nil)
	if !slices.Equal(held, []uint32{2, 5}) {
		t.Fatalf("held stripes %v, want [2 5]", held)
	}
	for i := range s {
		if want := uint32(0); i == 2 || i == 5 {
			want = 1
			if s[i].Load() != want {
				t.Fatalf("stripe %d is %d, want locked", i, s[i].Load())
			}
		} else if s[i].Load() != want {
			t.Fatalf("stripe %d is %d, want unlocked", i, s[i].Load())
		}
	}
	locked := make(chan []uint32)
	go func() { locked <- s.lockPath(nil, node{bucket: 29, parent: -1}, nil) }() // stripe 5
	select {
	case <-locked:
		t.Fatal("a path sharing a held stripe locked it")
	case <-time.After(50 * time.Millisecond):
	}
	s.unlock(held)
	other := <-locked
	if !slices.Equal(other, []uint32{5}) || s[5].Load() != 1 || s[2].Load() != 0 {
		t.Fatalf("after the unlock: the second path holds %v, stripes 2 and 5 are %d and %d", other, s[2].Load(), s[5].Load())
	}
	s.unlock(other)
}

// buildN is BenchmarkBuild's table size (-build.n).
var buildN = flag.Uint64("build.n", 10_000_000, "keys of BenchmarkBuild's table")

// BenchmarkBuild fills a table planned for -build.n keys (b=4, f=16) from
// empty to full by Build on GOMAXPROCS goroutines, in calls of 256 Ki keys
// as a store Load makes them: run it with -test.cpu 2,1,2,1,2 for the
// scaling of the in-memory build a Load's time is bound by (on one
// goroutine Build is InsertHashes). ns/key is the time per key; procs is
// the GOMAXPROCS it ran on, which for the first -test.cpu entry under
// -test.benchtime 1x is not that entry (see the metric's comment).
func BenchmarkBuild(b *testing.B) {
	f, hs := benchTable(b, *buildN)
	work := make([]uint64, len(hs))
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		clear(f.words)
		f.SetCount(0)
		copy(work, hs)
		b.StartTimer()
		for i := 0; i < len(work); i += 1 << 18 {
			if _, err := f.Build(work[i:min(i+1<<18, len(work))], runtime.GOMAXPROCS(0)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(hs)), "ns/key")
	// The GOMAXPROCS it ran on: with -test.benchtime 1x the first
	// -test.cpu entry's figure is of the testing package's first run,
	// made before it sets GOMAXPROCS to that entry, on the list's last
	// entry's (store's benchLoad says more).
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
}

// TestBuildOneGoroutineIsInsertHashes: on one goroutine Build inserts
// with plain writes, and leaves the words, count and moves InsertHashes
// leaves, up to and past a full table.
func TestBuildOneGoroutineIsInsertHashes(t *testing.T) {
	r := testseed.New(t)
	for round := range 4 {
		f, hs := buildKeys(t, r, 20_000+r.Uint64N(20_000), 2+r.IntN(3), 8+r.IntN(9))
		if round%2 == 1 { // more keys than fit
			for range len(hs) / 2 {
				hs = append(hs, r.Uint64())
			}
		}
		g := f.Geometry()
		want, _ := New(g, nil)
		k1, err1 := want.InsertHashes(slices.Clone(hs))
		k2, err2 := f.Build(hs, 1)
		if k1 != k2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("round %d (%+v): InsertHashes %d, %v; Build on one goroutine %d, %v", round, g, k1, err1, k2, err2)
		}
		if !slices.Equal(want.Words(), f.Words()) || want.Count() != f.Count() || want.moves.Load() != f.moves.Load() {
			t.Fatalf("round %d (%+v): Build on one goroutine left other words, count (%d, want %d) or moves (%d, want %d) than InsertHashes",
				round, g, f.Count(), want.Count(), f.moves.Load(), want.moves.Load())
		}
		if f.moves.Load() == 0 {
			t.Fatalf("round %d: no displacement: the test missed the slow path", round)
		}
	}
}

// TestBuildLocalFullGoesOn: when a block fills in a block build, the
// other groups' blocks still take their keys: offered 99% of the slots
// of four blocks (-short: three), Build on 2 goroutines (a group per
// block) fills the table to
// its limit, with the same words in every run. Before, the goroutines
// claimed no more groups once one failed, and how many keys went in
// depended on the timing (half the table in some runs).
func TestBuildLocalFullGoesOn(t *testing.T) {
	r := testseed.New(t)
	blocks := uint64(4)
	if testing.Short() {
		blocks = 3 // still more groups than goroutines
	}
	g := Geometry{Buckets: blocks * LocalBlock, BucketSize: 4, FingerprintBits: 16, Salt: r.Uint64(), Derivation: DeriveLocal}
	hs := make([]uint64, g.Slots()*99/100)
	for i := range hs {
		hs[i] = r.Uint64()
	}
	runs := 4
	if testing.Short() {
		runs = 2
	}
	var first *Filter
	for run := range runs {
		f, _ := New(g, nil)
		in := slices.Clone(hs)
		k, err := f.Build(in, 2)
		if !errors.Is(err, ErrFull) || k >= len(in) {
			t.Fatalf("run %d: Build placed %d of %d: %v, want ErrFull", run, k, len(in), err)
		}
		if fill := float64(k) / float64(g.Slots()); fill < 0.93 { // TestLoadFactor: 0.955-0.96 for b = 4
			t.Fatalf("run %d: Build stopped at %.3f of the slots", run, fill)
		}
		checkBuilt(t, "Build", f, in[:k])
		if first == nil {
			first = f
		} else if !slices.Equal(f.words, first.words) || f.Count() != first.Count() {
			t.Fatalf("run %d: %d keys and other words than run 0's %d", run, f.Count(), first.Count())
		}
	}
}

// TestBuildLocalRepeatedKey: in a block build, a key given more times
// than its two buckets have slots does not stop its group: every other
// key goes in, and only the copies that did not fit are left, the first
// of them at hs[n].
func TestBuildLocalRepeatedKey(t *testing.T) {
	r := testseed.New(t)
	g := Geometry{Buckets: 3 * LocalBlock, BucketSize: 4, FingerprintBits: 16, Salt: r.Uint64(), Derivation: DeriveLocal}
	f, _ := New(g, nil)
	hs := make([]uint64, g.Slots()/2)
	for i := range hs {
		hs[i] = r.Uint64()
	}
	dup := hs[0]
	for i := range 30 { // one key 30 times: at most 2*4 copies fit
		hs[1+i*1001] = dup
	}
	k, err := f.Build(hs, 2)
	if !errors.Is(err, ErrFull) || hs[k] != dup {
		t.Fatalf("Build placed %d of %d (%v); hs[k] is %#x, want the repeated key %#x", k, len(hs), err, hs[k], dup)
	}
	for _, h := range hs[k:] {
		if h != dup {
			t.Fatalf("key %#x left out beside the repeated one's copies (%d of %d placed)", h, k, len(hs))
		}
	}
	checkBuilt(t, "Build", f, hs[:k])
}
