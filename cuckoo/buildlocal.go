package cuckoo

import (
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/filterstore/filterstore/internal/workers"
)

// Builds by blocks. In a DeriveLocal table of two blocks or more, both
// buckets of a key, and every bucket a displacement from them reaches,
// lie in the block of its primary bucket. So Build deals the keys into
// groups, each the keys whose primary bucket lies in one run of whole
// blocks, and its goroutines claim the groups in turn and insert each
// group's keys, in the order Build was given them, with plain writes:
// first every key whose primary bucket has room, then the others as
// InsertOwned does (a displacement search when both buckets are full;
// insertGroup says why two passes). No word is written by two
// goroutines, no lock or compare-and-swap is needed, and no key waits
// for a serial phase after the parallel one (as the left-over keys of a
// build of one block do). There are a few groups
// per goroutine, so that none waits for one that shares its CPU with
// something else (a Load's key source). The deal is a counting sort on
// the goroutines too: they claim chunks of hs in turn, counting the
// keys of each, then placing them. A group whose block fills (maxGroupMisses keys found no free slot)
// gives up its other keys; the other groups go on, since their blocks
// are apart. The keys left go on the caller's goroutine as every Build's
// do. The words a build leaves depend only on the keys' order, the
// number of goroutines and the filter's generator, not on timing: every
// group is worked, and each draws its displacements' slot orders from its
// own generator.

// localGroupsPerProc is how many groups of blocks Build deals the keys
// into per goroutine (fewer if the table has fewer blocks).
const localGroupsPerProc = 4

// maxLocalGroups bounds the groups of a block build (the deal counts
// them in an array on the stack).
const maxLocalGroups = 256

// dealer maps a key to its group in a block build: block(i1) * mult >>
// 32, where i1 is the key's primary bucket of m (DeriveLocal: h^salt
// ranged onto m) and block(i1) = min(i1 >> localShift, last).
type dealer struct{ m, salt, last, mult uint64 }

func (d dealer) group(h uint64) int {
	i1, _ := bits.Mul64(h^d.salt, d.m)
	return int(min(i1>>localShift, d.last) * d.mult >> 32)
}

// localDealChunks is how many chunks of keys per goroutine a block
// build's deal splits its keys into (each at least buildMinShare keys).
const localDealChunks = 4

// localBuild is the scratch of one block build, reused through
// localBuildPool: the keys as dealt, and the counts of the deal.
type localBuild struct {
	dealt []uint64
	pos   []int
}

var localBuildPool = sync.Pool{New: func() any { return new(localBuild) }}

// buildLocal is Build for a table of two blocks or more (f.split > 0), on
// procs >= 2 goroutines.
func (f *Filter) buildLocal(hs []uint64, procs int) (int, error) {
	blocks := f.split>>localShift + 1 // the last runs from split to Buckets
	groups := int(min(uint64(procs*localGroupsPerProc), blocks, maxLocalGroups))
	// A key's group is block(i1) * mult >> 32: monotone in the block,
	// below groups, about blocks/groups blocks each (dealer.group).
	d := dealer{m: f.g.Buckets, salt: f.g.Salt, last: blocks - 1, mult: uint64(groups) << 32 / blocks}
	lb := localBuildPool.Get().(*localBuild)
	defer localBuildPool.Put(lb)
	if cap(lb.dealt) < len(hs) {
		lb.dealt = make([]uint64, len(hs))
	}
	dealt := lb.dealt[:len(hs)]
	// The deal, in chunks the goroutines claim in turn (a fixed share
	// would wait for the goroutine that shares its CPU with the key
	// source). pos[c*groups+g] counts chunk c's keys of group g, then
	// becomes where in dealt the first of them goes. starts[g] is group
	// g's first key in dealt, starts[groups] their end. A chunk counts and
	// places on a copy of its row on its own stack: rows of chunks that
	// run at once may share a cache line.
	size := max(buildMinShare, (len(hs)+localDealChunks*procs-1)/(localDealChunks*procs))
	chunks := (len(hs) + size - 1) / size
	if need := chunks * groups; cap(lb.pos) < need {
		lb.pos = make([]int, need)
	}
	pos := lb.pos[:chunks*groups]
	workers.Chunks(procs, len(hs), size, func(_, c, lo, hi int) {
		var cnt [maxLocalGroups]int
		for _, h := range hs[lo:hi] {
			cnt[d.group(h)]++
		}
		copy(pos[c*groups:(c+1)*groups], cnt[:groups])
	})
	starts := make([]int, groups+1)
	at := 0
	for g := range groups {
		starts[g] = at
		for c := range chunks {
			at, pos[c*groups+g] = at+pos[c*groups+g], at
		}
	}
	starts[groups] = at
	workers.Chunks(procs, len(hs), size, func(_, c, lo, hi int) {
		var next [maxLocalGroups]int
		copy(next[:groups], pos[c*groups:(c+1)*groups])
		for _, h := range hs[lo:hi] {
			g := d.group(h)
			dealt[next[g]] = h
			next[g]++
		}
	})

	// The inserts: goroutines claim groups in turn, every one of them
	// (a full block stops its own group only). Group g's keys end up as
	// [its placed[g] placed keys | the others], each part in order.
	placed := make([]int, groups)
	moves := make([]uint64, groups)
	var claimed atomic.Int64
	seed := f.rand()
	workers.Run(procs, func(int) {
		qp := queuePool.Get().(*[]node)
		q := (*qp)[:0]
		defer func() { *qp = q[:0]; queuePool.Put(qp) }()
		for {
			g := int(claimed.Add(1) - 1)
			if g >= groups {
				return
			}
			q, placed[g], moves[g] = f.insertGroup(dealt[starts[g]:starts[g+1]], q, mix(seed+uint64(g)*fpConst))
		}
	})
	// hs becomes every group's placed keys, then the others: those go on
	// the caller's goroutine, in order, until one finds no free slot.
	n := 0
	for g := range groups {
		n += copy(hs[n:], dealt[starts[g]:starts[g]+placed[g]])
		f.moves.Add(moves[g])
	}
	f.count.Add(uint64(n))
	if n == len(hs) {
		return n, nil
	}
	rest := n
	for g := range groups {
		rest += copy(hs[rest:], dealt[starts[g]+placed[g]:starts[g+1]])
	}
	return f.insertRest(hs, n)
}

// maxGroupMisses is how many distinct keys of a group of a block build
// may find no free slot before it gives up its other keys: one such key
// may be a key held more times than its two buckets have slots (its
// copies count once), while the block has room for the rest; a few mean
// the block is full, and each more costs a whole displacement search.
const maxGroupMisses = 8

// insertGroup inserts the keys of hs as InsertHashOwned does but
// counting nothing in the filter, drawing the displacement searches'
// slot orders from rng: the work of one group of a block build. It
// places the keys in two passes. The first puts each key, in order, in
// its primary bucket if that has a free slot, and leaves it for the
// second otherwise; the second puts each key left, in order, in either
// bucket or by a displacement search. A lookup reads a key's primary
// bucket first and its alternate only if the fingerprint is not there,
// so a key in its primary bucket costs a lookup one cache miss and a
// key in its alternate two, with a mispredicted branch between; in one
// pass, a key whose primary bucket was full when it came went to its
// alternate though a later key could have taken that slot instead
// (BenchmarkFirstBucket's plan-build at 1e7: 77.26% of the keys in
// their primary bucket in one pass, 80.78% in two; the most any
// placement reaches at a 90% fill is 84.2%).
//
// It reorders hs as [placed | not placed]: the keys that found no free
// slot, then, if maxGroupMisses did, the ones left that it did not try.
// The order within each part follows from hs's (the first pass swaps
// each key it places to the front). It returns the search queue (q,
// grown), how many keys it placed and the moves they made.
func (f *Filter) insertGroup(hs []uint64, q []node, rng uint64) (_ []node, placed int, moves uint64) {
	for i, b := range f.batches(hs) {
		for j := range b.n {
			if f.putPlain((*uint64)(b.words[2*j]), b.fps[j]) {
				hs[placed], hs[i+j] = hs[i+j], hs[placed] // placed <= i+j
				placed++
			}
		}
	}
	var missed []uint64 // in order; rare
	distinct := 0
	left := hs[placed:]
	done := 0 // of left: placed in the second pass
	for i, b := range f.batches(left) {
		for j := range b.n {
			h, fp := left[i+j], b.fps[j]
			if f.putPlain((*uint64)(b.words[2*j]), fp) || f.putPlain((*uint64)(b.words[2*j+1]), fp) {
				left[done] = h // done <= i+j: a key already read
				done++
				continue
			}
			i1, _, i2 := f.locate(h)
			rng = mix(rng + fpConst)
			var last node
			var free int
			var ok bool
			if q, last, free, ok = f.findPath(f.own, i1, i2, MaxIterations, q[:0], rng); ok {
				moves += f.movePath(f.own, q, last, free, fp)
				left[done] = h
				done++
				continue
			}
			if !slices.Contains(missed, h) {
				distinct++
			}
			missed = append(missed, h)
			if distinct == maxGroupMisses {
				// done+len(missed) == i+j+1: the keys not tried,
				// left[i+j+1:], already follow where the misses go.
				copy(left[done:], missed)
				return q, placed + done, moves
			}
		}
	}
	copy(left[done:], missed)
	return q, placed + done, moves
}

// putPlain stores fp in the lowest empty slot of the word at p, if it has
// one, with a plain write (putOwned through a pointer).
func (f *Filter) putPlain(p *uint64, fp uint64) bool {
	v := *p
	z := f.lowestEmpty(v)
	if z == 0 {
		return false
	}
	*p = v | fp*z
	return true
}
