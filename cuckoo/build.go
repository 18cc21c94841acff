package cuckoo

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/filterstore/filterstore/internal/prefetch"
	"github.com/filterstore/filterstore/internal/workers"
)

// Parallel builds. Build fills a filter that nothing else reads or
// changes meanwhile (a bulk load's private layer) on several goroutines.
// A DeriveLocal table of two blocks or more is built by blocks, each
// goroutine inserting the keys of its own blocks (buildlocal.go). Any
// other table (DeriveMix, DeriveMul, one block) is built in two phases:
//
//  1. The goroutines claim chunks of the keys in turn and put each
//     key's fingerprint into an empty slot of its first bucket, or else of
//     its second, with a compare-and-swap on the bucket's word, the
//     buckets of the keys ahead prefetched as InsertHashes does. A key
//     whose two buckets are both full is left over for phase 2. Into a
//     table filled to its target load, some 7% of keys are (b = 4).
//  2. The leftover keys need displacements. Each goroutine claims a few
//     at a time and, for each, searches for a path of displacements as
//     InsertTo does, reading the words and writing nothing, while other
//     goroutines search and apply theirs. It then locks the stripes of
//     the path's buckets (spin locks, each over every 4096th bucket,
//     taken in order), checks that the path is still one (every
//     fingerprint it moves still sits where the search saw it go from,
//     and the end still has an empty slot), applies it and unlocks; a
//     stale path is searched for again. The searches, which are the
//     cache misses, overlap, and so do moves on different stripes.
//  3. What is left, on the caller's goroutine, in order: keys whose
//     paths kept going stale, keys whose search found no path (a search
//     racing other goroutines' moves can miss one; once one fails, the
//     goroutines start no more searches), and keys no goroutine claimed
//     after that, each inserted as InsertTo does until one finds no
//     path alone: the table is full.
//
// Phase 1 writes no word that phase 2 reads: the phases are apart. Every
// word write is atomic, as lookups need, and every key's fingerprint is
// in one of its two buckets when Build returns, as after InsertHashes,
// but the layout (which slot, which of the two buckets) depends on the
// goroutines' timing.

// buildChunk is how many leftover keys a goroutine claims at a time in
// phase 2.
const buildChunk = 16

// buildPhase1Chunk is how many keys a goroutine claims at a time in
// phase 1: enough that the claims (one shared counter) cost nothing
// next to the cache misses, few enough that the goroutines finish
// together.
const buildPhase1Chunk = 2048

// buildMinShare is the fewest keys per goroutine for which Build starts
// goroutines; fewer go in on the caller's, in order, as InsertHashes puts
// them.
const buildMinShare = 1024

// Build inserts the hashes of hs on up to procs goroutines and returns
// how many it inserted. f must not be read or changed by anything else
// while it runs. Unlike InsertHashes, the keys do not go in in order:
// Build reorders hs so that the keys it inserted are hs[:n] and the ones
// it did not are hs[n:]. It does not stop where InsertHashes would, at
// the first key in order that finds no free slot: once a search finds
// none, the goroutines start no more (a block build: no more in that
// key's group of blocks, after a few such keys), and the keys not yet
// placed are tried one by one on the caller's goroutine until one finds
// no free slot alone (ErrFull); that key and the rest are hs[n:]. With n < len(hs)
// the error wraps ErrFull. On one goroutine (procs is
// 1, or hs has fewer than 2*buildMinShare keys) it is InsertHashes with
// InsertOwned's plain writes: the same words, count and moves. A build by
// blocks leaves words that depend on the keys' order and procs but not on
// timing.
func (f *Filter) Build(hs []uint64, procs int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	procs = max(1, min(procs, len(hs)/buildMinShare))
	if procs == 1 {
		return f.insertHashes(hs, true)
	}
	if f.split > 0 {
		return f.buildLocal(hs, procs)
	}

	// Phase 1: the goroutines claim chunks of the keys in turn (so that
	// none waits for one that shares its CPU with something else, such as
	// a Load's key source); each chunk ends up as [placed | left over].
	chunks := (len(hs) + buildPhase1Chunk - 1) / buildPhase1Chunk
	placed := make([]int, chunks)
	workers.Chunks(procs, len(hs), buildPhase1Chunk, func(_, c, lo, hi int) {
		placed[c] = f.placeEmpty(hs[lo:hi])
	})
	// Gather: every placed key first, the left-over ones after.
	left := make([]uint64, 0, len(hs)/8)
	n := 0
	for c := range chunks {
		lo := c * buildPhase1Chunk
		hi := min(lo+buildPhase1Chunk, len(hs))
		left = append(left, hs[lo+placed[c]:hi]...)
		n += copy(hs[n:], hs[lo:lo+placed[c]])
	}
	f.count.Add(uint64(n))
	if len(left) == 0 {
		return n, nil
	}

	// Phase 2. Each goroutine keeps its own lists and count of moves
	// until it is done (no shared line written per key).
	type result struct {
		ins, again, failed []uint64
		moves              uint64
	}
	var (
		next atomic.Int64 // leftover keys claimed
		full atomic.Bool  // a key found no path: start no more searches
	)
	locks := newStripes()
	seed := f.rand()
	procs = max(1, min(procs, len(left)/buildChunk))
	res := make([]result, procs)
	workers.Run(procs, func(w int) {
		var r result
		qp := queuePool.Get().(*[]node)
		d := displacer{f: f, locks: locks, q: (*qp)[:0], rng: mix(seed + uint64(w)*fpConst)}
		defer func() {
			*qp = d.q[:0]
			queuePool.Put(qp)
			res[w] = r
		}()
		for !full.Load() {
			end := int(next.Add(buildChunk))
			start := end - buildChunk
			if start >= len(left) {
				return
			}
			chunk := left[start:min(end, len(left))]
			// The first buckets each search reads: fetch them all now.
			var ps [2 * buildChunk]unsafe.Pointer
			for i, h := range chunk {
				i1, _, i2 := f.locate(h)
				ps[2*i], ps[2*i+1] = unsafe.Pointer(&f.words[i1]), unsafe.Pointer(&f.words[i2])
			}
			prefetch.Lines(ps[:2*len(chunk)])
			for _, h := range chunk {
				if full.Load() {
					r.failed = append(r.failed, h)
					continue
				}
				switch m := d.displace(h); {
				case m >= 0:
					r.ins = append(r.ins, h)
					r.moves += uint64(m)
				case m == displaceStale:
					r.again = append(r.again, h)
				default:
					full.Store(true)
					r.failed = append(r.failed, h)
				}
			}
		}
	})
	var rest []uint64 // for the caller's goroutine, in this order:
	for _, r := range res {
		n += copy(hs[n:], r.ins)
		f.count.Add(uint64(len(r.ins)))
		f.moves.Add(r.moves)
		rest = append(rest, r.again...) // their paths kept going stale
	}
	for _, r := range res {
		// A search that raced other goroutines' moves may have missed a
		// path that exists: alone, it finds one or the table is full.
		rest = append(rest, r.failed...)
	}
	if start := int(next.Load()); start < len(left) {
		rest = append(rest, left[start:]...) // no goroutine claimed them
	}
	copy(hs[n:], rest)
	return f.insertRest(hs, n)
}

// insertRest inserts hs[n:], in order, on the caller's goroutine as
// InsertTo does, until one finds no free slot: the end of every Build
// that could not place all its keys on its goroutines. It returns how
// many of hs are in the filter (hs[:k]).
func (f *Filter) insertRest(hs []uint64, n int) (int, error) {
	for k := n; k < len(hs); k++ {
		if err := f.InsertTo(f.own, hs[k], MaxIterations); err != nil {
			return k, fmt.Errorf("cuckoo: %w: %d of %d keys left after one found no free slot within %d examined buckets",
				ErrFull, len(hs)-k, len(hs), MaxIterations)
		}
	}
	return len(hs), nil
}

// placeEmpty puts the fingerprint of each key of hs into an empty slot of
// its first or second bucket, compare-and-swap on the word, and reorders
// hs so that the keys it placed come first; it returns how many it
// placed. Buckets of the keys ahead are prefetched, a batch at a time.
func (f *Filter) placeEmpty(hs []uint64) int {
	n := 0 // keys placed, moved to hs[:n]
	left := make([]uint64, 0, len(hs)/8)
	for i, b := range f.batches(hs) {
		for j := range b.n {
			h := hs[i+j]
			if f.casEmpty((*uint64)(b.words[2*j]), b.fps[j]) || f.casEmpty((*uint64)(b.words[2*j+1]), b.fps[j]) {
				hs[n] = h // n <= i+j: a key already read
				n++
			} else {
				left = append(left, h)
			}
		}
	}
	copy(hs[n:], left)
	return n
}

// casEmpty stores fp in the lowest empty slot of the word at p, if it has
// one, with a compare-and-swap (retried while other goroutines change the
// word).
func (f *Filter) casEmpty(p *uint64, fp uint64) bool {
	for {
		v := atomic.LoadUint64(p)
		z := f.lowestEmpty(v)
		if z == 0 {
			return false
		}
		if atomic.CompareAndSwapUint64(p, v, v|fp*z) {
			return true
		}
	}
}

// displace's results other than a number of moves.
const (
	displaceFull  = -1 // no path: the table is full, or seemed so
	displaceStale = -2 // every path found went stale before it was locked
)

// displacer is one phase-2 goroutine's: the filter and its stripes, and
// the goroutine's own search queue, stripe list and slot-order generator,
// reused from key to key.
type displacer struct {
	f     *Filter
	locks stripes
	q     []node
	held  []uint32
	rng   uint64
}

// displace inserts h, whose buckets were both full, through a path of
// displacements: searched without a lock, then applied with the stripes
// of every bucket on it locked, once they show the path still holds. A
// stale path is searched for again, a few times. It returns the moves it
// made, or displaceFull or displaceStale (h did not go in). It changes no
// shared counter (the filter's count, moves and move-sequence counter),
// so that the goroutines share only the words and the stripes; Build
// adds up their counts at the end.
func (d *displacer) displace(h uint64) int {
	f := d.f
	i1, fp := f.g.primary(h)
	i2 := f.alt(i1, fp)
	misses := 0
	for range 4 {
		d.rng = mix(d.rng + fpConst)
		var last node
		var free int
		var ok bool
		d.q, last, free, ok = f.findPath(f.own, i1, i2, MaxIterations, d.q[:0], d.rng)
		if buildSearchHook != nil {
			ok = buildSearchHook(f, d.locks, last, free, ok)
		}
		if !ok {
			// Moves that raced the search can hide its free slot: one
			// more search before calling the table full.
			if misses++; misses == 2 {
				return displaceFull
			}
			continue
		}
		d.held = d.locks.lockPath(d.q, last, d.held[:0])
		if f.pathHolds(d.q, last, free) {
			m := f.movePath(f.own, d.q, last, free, fp)
			d.locks.unlock(d.held)
			return int(m)
		}
		d.locks.unlock(d.held)
		staleBuildPaths.Add(1)
	}
	return displaceStale
}

// staleBuildPaths counts the paths displace found stale once it held
// their stripes (for tests).
var staleBuildPaths atomic.Uint64

// buildSearchHook, if set (by tests), runs after each of displace's
// searches, before the path's stripes are locked, with the path's end
// and the search's answer; displace goes on with the answer it returns.
// A test changes the table there, as another goroutine's moves would.
var buildSearchHook func(f *Filter, locks stripes, last node, free int, ok bool) bool

// stripes are the spin locks of Build's phase 2: stripe i guards every
// bucket b with b mod len == i. A goroutine applying a path holds the
// stripes of all its buckets, taken in increasing order (so no two
// goroutines wait for each other in a cycle), and releases them once the
// moves are stored. Paths are a few buckets and the moves a few
// nanoseconds, so two goroutines rarely want one stripe and none waits
// for long: cheaper than a mutex over all moves, whose one word every
// goroutine wrote.
type stripes []atomic.Uint32

// stripeCount is how many stripes Build uses (16 KiB of them); a power
// of two. A variable for the tests, which make every path contend.
var stripeCount = 1 << 12

func newStripes() stripes { return make(stripes, stripeCount) }

// lockPath locks the stripes of every bucket on the path ending at last
// and returns their indices, appended to held.
func (s stripes) lockPath(q []node, last node, held []uint32) []uint32 {
	mask := uint64(len(s) - 1)
	held = append(held, uint32(last.bucket&mask))
	for cur := last; cur.parent >= 0; {
		cur = q[cur.parent]
		held = append(held, uint32(cur.bucket&mask))
	}
	slices.Sort(held)
	held = slices.Compact(held)
	for _, i := range held {
		for spins := 0; !s[i].CompareAndSwap(0, 1); spins++ {
			if spins >= 64 {
				runtime.Gosched() // the holder may have lost its CPU
				spins = 0
			}
		}
	}
	return held
}

// unlock releases the stripes lockPath took.
func (s stripes) unlock(held []uint32) {
	for _, i := range held {
		s[i].Store(0)
	}
}

// pathHolds reports whether the path of q ending at last, found by a
// search without the lock, can still be applied: slot free of the last
// bucket is empty and, at every step, the parent's slot holds a
// fingerprint whose other bucket is the child's.
func (f *Filter) pathHolds(q []node, last node, free int) bool {
	if f.slot(f.load(last.bucket), free) != 0 {
		return false
	}
	for cur := last; cur.parent >= 0; cur = q[cur.parent] {
		par := q[cur.parent]
		fp := f.slot(f.load(par.bucket), int(cur.slot))
		if fp == 0 || f.alt(par.bucket, fp) != cur.bucket {
			return false
		}
	}
	return true
}
