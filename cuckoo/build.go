package cuckoo

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/filterstore/filterstore/internal/prefetch"
	"github.com/filterstore/filterstore/internal/workers"
)

// Parallel builds. Build fills a filter that nothing else reads or
// changes meanwhile (a bulk load's private layer) on several goroutines,
// in two phases:
//
//  1. Each goroutine takes a contiguous share of the keys and puts each
//     key's fingerprint into an empty slot of its first bucket, or else of
//     its second, with a compare-and-swap on the bucket's word, the
//     buckets of the keys ahead prefetched as InsertHashes does. A key
//     whose two buckets are both full is left over for phase 2. Into a
//     table filled to its target load, some 7% of keys are (b = 4).
//  2. The leftover keys need displacements. Each goroutine claims a few
//     at a time and, for each, searches for a path of displacements as
//     InsertTo does, reading the words and writing nothing, while other
//     goroutines search and apply theirs. It then takes a mutex, checks
//     that the path is still one (every fingerprint it moves still sits
//     where the search saw it go from, and the end still has an empty
//     slot), and applies it; a stale path is searched for again under the
//     mutex. The searches, which are the cache misses, overlap; the moves,
//     a few words already in the cache, are serial.
//
// Phase 1 writes no word that phase 2 reads: the phases are apart. Every
// word write is atomic, as lookups need, and every key's fingerprint is
// in one of its two buckets when Build returns, as after InsertHashes,
// but the layout (which slot, which of the two buckets) depends on the
// goroutines' timing.

// buildChunk is how many leftover keys a goroutine claims at a time in
// phase 2.
const buildChunk = 16

// buildMinShare is the fewest keys per goroutine for which Build starts
// goroutines; fewer go in on the caller's, in order, as InsertHashes puts
// them.
const buildMinShare = 1024

// Build inserts the hashes of hs on up to procs goroutines and returns
// how many it inserted. f must not be read or changed by anything else
// while it runs. Unlike InsertHashes, the keys do not go in in order:
// Build reorders hs so that the keys it inserted are hs[:n] and the ones
// it did not are hs[n:], and it does not stop at the first key that finds
// no free slot (ErrFull): once one does, it stops starting displacement
// searches, and that key and every key not yet placed are in hs[n:].
// With n < len(hs) the error wraps ErrFull. On one goroutine (procs is
// 1, or hs has fewer than 2*buildMinShare keys) it is InsertHashes.
func (f *Filter) Build(hs []uint64, procs int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	procs = max(1, min(procs, len(hs)/buildMinShare))
	if procs == 1 {
		return f.insertHashes(hs)
	}

	// Phase 1: each goroutine's share ends up as [placed | left over].
	share := (len(hs) + procs - 1) / procs
	placed := make([]int, procs)
	workers.Run(procs, func(w int) {
		lo := min(w*share, len(hs))
		placed[w] = f.placeEmpty(hs[lo:min(lo+share, len(hs))])
	})
	// Gather: every placed key first, the left-over ones after.
	left := make([]uint64, 0, len(hs)/8)
	n := 0
	for w := range procs {
		lo := min(w*share, len(hs))
		hi := min(lo+share, len(hs))
		left = append(left, hs[lo+placed[w]:hi]...)
		n += copy(hs[n:], hs[lo:lo+placed[w]])
	}
	f.count.Add(uint64(n))
	if len(left) == 0 {
		return n, nil
	}

	// Phase 2. Each goroutine keeps its own lists and count of moves
	// until it is done (no shared line written per key).
	type result struct {
		ins, failed []uint64
		moves       uint64
	}
	var (
		next  atomic.Int64 // leftover keys claimed
		full  atomic.Bool  // a key found no path: start no more searches
		apply sync.Mutex   // serializes the moves
	)
	procs = max(1, min(procs, len(left)/buildChunk))
	res := make([]result, procs)
	workers.Run(procs, func(w int) {
		var r result
		qp := queuePool.Get().(*[]node)
		q := (*qp)[:0]
		defer func() {
			*qp = q[:0]
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
				i1, _, i2 := f.g.Locate(h)
				ps[2*i], ps[2*i+1] = unsafe.Pointer(&f.words[i1]), unsafe.Pointer(&f.words[i2])
			}
			prefetch.Lines(ps[:2*len(chunk)])
			for _, h := range chunk {
				if full.Load() {
					r.failed = append(r.failed, h)
					continue
				}
				var m int
				if q, m = f.displace(h, q[:0], &apply); m >= 0 {
					r.ins = append(r.ins, h)
					r.moves += uint64(m)
				} else {
					full.Store(true)
					r.failed = append(r.failed, h)
				}
			}
		}
	})
	for _, r := range res {
		n += copy(hs[n:], r.ins)
		f.count.Add(uint64(len(r.ins)))
		f.moves.Add(r.moves)
	}
	m := n
	for _, r := range res {
		m += copy(hs[m:], r.failed)
	}
	// Keys no goroutine claimed (a search failed first).
	if start := int(next.Load()); start < len(left) {
		copy(hs[m:], left[start:])
	}
	if n < len(hs) {
		return n, fmt.Errorf("cuckoo: %w: %d of %d keys left after one found no free slot within %d examined buckets",
			ErrFull, len(hs)-n, len(hs), MaxIterations)
	}
	return n, nil
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

// displace inserts h, whose buckets were both full, through a path of
// displacements: searched without a lock, then checked and applied with
// mu held (searched again there if it went stale). It returns the
// search's queue for reuse, and the moves it made, -1 if h did not go
// in. It changes no shared counter (the filter's count, moves and
// move-sequence counter), so that the goroutines share only the words
// and mu; Build adds up their counts at the end.
func (f *Filter) displace(h uint64, q []node, mu *sync.Mutex) ([]node, int) {
	i1, fp := f.g.primary(h)
	i2 := f.g.Alt(i1, fp)
	q, last, free, ok := f.findPath(f.own, i1, i2, MaxIterations, q)
	mu.Lock()
	defer mu.Unlock()
	if !ok || !f.pathHolds(q, last, free) {
		staleBuildPaths.Add(1)
		// Phase 1 is over, so the two buckets may have an empty slot now
		// only if a move freed one, which moves never do: search again.
		q, last, free, ok = f.findPath(f.own, i1, i2, MaxIterations, q[:0])
		if !ok {
			return q, -1
		}
	}
	return q, int(f.movePath(f.own, q, last, free, fp))
}

// staleBuildPaths counts the searches displace made again under the
// mutex (for tests).
var staleBuildPaths atomic.Uint64

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
		if fp == 0 || f.g.Alt(par.bucket, fp) != cur.bucket {
			return false
		}
	}
	return true
}
