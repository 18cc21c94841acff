package bloom

import (
	"sync/atomic"
	"unsafe"

	"github.com/filterstore/filterstore/internal/prefetch"
)

// AddHashesOwned adds every hash of hs whose block lies in [lo, hi), and
// for which seen (if not nil) reports false, with plain writes and no
// branch per word, and returns how many of those adds changed the filter
// or base (Count does not move: see AddCount). A hash is new when base,
// if not nil, and the filter together lack one of its bits: a bulk load
// builds into a private filter of base's geometry, then ORs it into base
// with OrInto.
//
// It is for a filter whose words in those blocks no other goroutine reads
// or writes while it runs (base may be read by others, but not written),
// such as one made by New(g, nil) that a loader fills on several
// goroutines, each owning a range of blocks. Adds on the shared path
// (AddHash) load each word atomically, skip it when its bits are set and
// set the rest with atomic ORs: about twice its cost per key.
func (f *Filter) AddHashesOwned(hs []uint64, lo, hi uint64, base *Filter, seen func(h uint64) bool) (added uint64) {
	// As HasMany does, the next batch's blocks are located and prefetched
	// before the current batch's bits are set, so that on a filter larger
	// than the caches the misses overlap.
	var o ownedBatches
	o.f, o.base, o.lo, o.hi, o.seen = f, base, lo, hi, seen
	rest := o.next(0, hs)
	for cur := 0; o.n[cur] > 0; cur ^= 1 {
		rest = o.next(cur^1, rest)
		added += o.add(cur)
	}
	return added
}

// ownedBatches is the state of AddHashesOwned: two batches of located
// keys, the one being added and the one being prefetched.
type ownedBatches struct {
	f, base *Filter
	lo, hi  uint64
	seen    func(h uint64) bool
	n       [2]int
	blocks  [2][batchSize]uint64
	draws   [2][batchSize]uint64
	states  [2][batchSize]uint64
}

// next fills batch i with the next keys of hs to add, prefetches their
// blocks (in base too, if any), and returns the keys of hs after them.
func (o *ownedBatches) next(i int, hs []uint64) []uint64 {
	g, n := o.f.g, 0
	var ptrs [2 * batchSize]unsafe.Pointer
	for len(hs) > 0 && n < batchSize {
		h := hs[0]
		hs = hs[1:]
		block, draw, state := locateMul(h, g.Salt, g.Blocks)
		if g.Derivation != DeriveMul {
			block, draw, state = locateMix(h, g.Salt, g.Blocks)
		}
		if block < o.lo || block >= o.hi || o.seen != nil && o.seen(h) {
			continue
		}
		o.blocks[i][n], o.draws[i][n], o.states[i][n] = block, draw, state
		ptrs[n] = unsafe.Pointer(&o.f.words[block*BlockWords])
		n++
	}
	o.n[i] = n
	lines := ptrs[:n]
	if o.base != nil {
		for j := range n {
			ptrs[n+j] = unsafe.Pointer(&o.base.words[o.blocks[i][j]*BlockWords])
		}
		lines = ptrs[:2*n]
	}
	prefetch.Lines(lines)
	return hs
}

// add sets the bits of batch i's keys and returns how many were new.
func (o *ownedBatches) add(i int) (added uint64) {
	k, words := o.f.g.K, o.f.words
	var bw []uint64
	if o.base != nil {
		bw = o.base.words[:len(words)]
	}
	if k >= 3 && k <= bitPosPerDraw {
		// The first draw's positions, unrolled as AddHashOwned sets them:
		// the mask array below took 1.59-1.63x this loop's time
		// (BenchmarkAddHashesOwned at 1e7 on the 2-vCPU VM, three
		// alternated runs: 24.0-24.3 against 14.8-15.2 ns per key).
		if bw != nil {
			return o.addOver(i, (*[BlockWords]uint64)(bw))
		}
		for j, block := range o.blocks[i][:o.n[i]] {
			blk := o.f.block(block)
			d := o.draws[i][j]
			changed := setOwned(blk, d, 0) | setOwned(blk, d, 1) | setOwned(blk, d, 2)
			if k > 3 {
				changed |= setOwned(blk, d, 3)
			}
			if k > 4 {
				changed |= setOwned(blk, d, 4)
			}
			if k > 5 {
				changed |= setOwned(blk, d, 5)
			}
			if k > 6 {
				changed |= setOwned(blk, d, 6)
			}
			if changed != 0 {
				added++
			}
		}
		return added
	}
	for j, block := range o.blocks[i][:o.n[i]] {
		var masks [BlockWords]uint64
		drawMasks(o.draws[i][j], o.states[i][j], k, &masks)
		blk := (*[BlockWords]uint64)(words[block*BlockWords:])
		var missing uint64
		if bw != nil {
			bb := (*[BlockWords]uint64)(bw[block*BlockWords:])
			for w, m := range masks {
				old := blk[w] | atomic.LoadUint64(&bb[w])
				missing |= m &^ old
				blk[w] |= m
			}
		} else {
			for w, m := range masks {
				missing |= m &^ blk[w]
				blk[w] |= m
			}
		}
		if missing != 0 {
			added++
		}
	}
	return added
}

// addOver is add for a batch i of keys with 3 to 7 positions (the first
// draw's) and a base, whose words start at base: a key is new when one of
// its bits is clear in both the filter and base. The mask array of add
// took 1.38-1.40x its time (BenchmarkAddHashesOwned/base at 1e7 on the
// 2-vCPU VM, three alternated runs: 35.4-35.9 against 25.7 ns per key).
// add keeps its own loop for the case without a base: run through addOver
// with the filter's words as the base (one more load a position), it took
// 17.6 ns a key against 14.7-14.9 (the same benchmark, three alternations).
func (o *ownedBatches) addOver(i int, base *[BlockWords]uint64) (added uint64) {
	k := o.f.g.K
	for j, block := range o.blocks[i][:o.n[i]] {
		blk := o.f.block(block)
		bb := (*[BlockWords]uint64)(unsafe.Add(unsafe.Pointer(base), block*BlockWords*8))
		d := o.draws[i][j]
		unset := setOwnedOver(blk, bb, d, 0) | setOwnedOver(blk, bb, d, 1) | setOwnedOver(blk, bb, d, 2)
		if k > 3 {
			unset |= setOwnedOver(blk, bb, d, 3)
		}
		if k > 4 {
			unset |= setOwnedOver(blk, bb, d, 4)
		}
		if k > 5 {
			unset |= setOwnedOver(blk, bb, d, 5)
		}
		if k > 6 {
			unset |= setOwnedOver(blk, bb, d, 6)
		}
		if unset != 0 {
			added++
		}
	}
	return added
}

// setOwnedOver sets, with a plain load and store, the bit of blk at
// position j of draw d, and returns it if it was clear in both blk and
// base (read atomically: base may be a live filter), else 0.
func setOwnedOver(blk, base *[BlockWords]uint64, d uint64, j uint) uint64 {
	w := d >> (j*bitPosBits + 6) & (BlockWords - 1)
	bit := uint64(1) << (d >> (j * bitPosBits) & 63)
	old := blk[w]
	blk[w] = old | bit
	return bit &^ (old | atomic.LoadUint64(&base[w]))
}

// OrInto ORs the filter's words from index lo to hi into dst's, which
// must have the same geometry, with atomic ORs, skipping the words that
// add no bit: lookups of dst may run meanwhile. It moves neither count.
// Loaders give each goroutine a range of words. As MergeInto, it writes
// a page of dst (an atomic OR of the page's first nonzero word) before it
// reads it, so a page of a file mapping not yet in memory faults once.
// It panics, as slicing does, unless lo <= hi <= len(f.Words()) and dst
// has as many words.
func (f *Filter) OrInto(dst *Filter, lo, hi uint64) {
	src, out := f.words[lo:hi], dst.words[lo:hi]
	for from, to := range pages(out) {
		touched := false
		for i, w := range src[from:to] {
			if w == 0 {
				continue
			}
			p := &out[from+i]
			if !touched {
				atomic.OrUint64(p, w)
				touched = true
			} else if w&^atomic.LoadUint64(p) != 0 {
				atomic.OrUint64(p, w)
			}
		}
	}
}
