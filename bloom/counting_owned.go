package bloom

import (
	"iter"
	"sync/atomic"
	"unsafe"
)

// addOwned is addUncounted with plain loads and stores, for a counting
// filter whose words nothing else reads or writes until the call returns
// (a private build, merged into a live filter afterwards with MergeInto).
// The counters end as addUncounted's would: each of a key's K positions is
// incremented once per occurrence, never past MaxCounter.
func (c *Counting) addOwned(hs []uint64) {
	var blks [2][batchSize]unsafe.Pointer
	var draws, states [2][batchSize]uint64
	cur := 0
	address(&c.g, c.words, hs[:min(batchSize, len(hs))], &blks[cur], &draws[cur], &states[cur])
	for i := 0; i < len(hs); i += batchSize {
		end := min(i+batchSize, len(hs))
		if end < len(hs) {
			// Prefetch the next batch's blocks before adding this one's.
			address(&c.g, c.words, hs[end:min(end+batchSize, len(hs))], &blks[1-cur], &draws[1-cur], &states[1-cur])
		}
		for j := range end - i {
			incrOwned((*[BlockWords]uint64)(blks[cur][j]), draws[cur][j], states[cur][j], c.g.K)
		}
		cur = 1 - cur
	}
}

// incrOwned increments the k counters drawn from state in blk, with plain
// loads and stores, each once per draw, saturating at MaxCounter.
//
// It draws the positions itself, as probeCounters does, rather than
// through the array positions fills: going through such an array made a
// counting Load of 1e7 keys on one CPU about 10% slower
// (BenchmarkLoadCounting, two alternated runs: 54.0-60.3 ns/key with it,
// 51.5-57.6 without). For 3 to 9 positions (all in the first draw) the
// positions are unrolled with constant shifts, as AddHashOwned's: the loop
// took 1.11-1.13x the unrolled code's time (the same benchmark on one
// CPU, three alternated runs of two each: 395-403 against 352-363 ms).
func incrOwned(blk *[BlockWords]uint64, draw, state uint64, k uint32) {
	if k >= 3 && k <= ctrPosPerDraw {
		// The first draw's positions, unrolled with constant shifts.
		d := draw
		incrAt(blk, d, 0)
		incrAt(blk, d, 1)
		incrAt(blk, d, 2)
		if k > 3 {
			incrAt(blk, d, 3)
		}
		if k > 4 {
			incrAt(blk, d, 4)
		}
		if k > 5 {
			incrAt(blk, d, 5)
		}
		if k > 6 {
			incrAt(blk, d, 6)
		}
		if k > 7 {
			incrAt(blk, d, 7)
		}
		if k > 8 {
			incrAt(blk, d, 8)
		}
		return
	}
	for j, left := uint32(0), uint32(ctrPosPerDraw); j < k; j++ {
		if left == 0 {
			state, draw = nextDraw(state)
			left = ctrPosPerDraw
		}
		left--
		p := draw & ctrPosMask
		draw >>= ctrPosBits
		w, sh := p/CountersPerWord, p%CountersPerWord*CounterBits
		if blk[w]>>sh&MaxCounter != MaxCounter {
			blk[w] += 1 << sh
		}
	}
}

// MergeInto adds the counters of c's words lo to hi (word indexes) to
// dst's, each sum saturating at MaxCounter: dst's counters become those
// of adding to dst every key added to c, since a counter incremented n
// times from v reads min(v+n, MaxCounter) either way. dst must have c's
// geometry. Each changed word of dst is written with one atomic store, so
// lookups of dst may run meanwhile and see every counter either before or
// after the merge, never lower than before; nothing else may change dst
// (or c) until MergeInto returns. Neither Items moves. Loaders give each
// goroutine a range of words.
func (c *Counting) MergeInto(dst *Counting, lo, hi uint64) {
	src, out := c.words[lo:hi], dst.words[lo:hi]
	// Page by page of dst's memory: the first word of a page that
	// changes is written (an atomic add of 0) before it is read. A page
	// of a file mapping not yet in memory is then faulted in once,
	// writable; read first, it is faulted in read-only and faulted again
	// by the store (a fresh counting filter of 5.4 GB merged three times
	// slower that way than a cuckoo layer of 2.2 GB copied in).
	for from, to := range pages(out) {
		touched := false
		for i, w := range src[from:to] {
			if w == 0 {
				continue
			}
			p := &out[from+i]
			if !touched {
				atomic.AddUint64(p, 0)
				touched = true
			}
			atomic.StoreUint64(p, addCounters(atomic.LoadUint64(p), w))
		}
	}
}

// pageSize is the memory page size that MergeInto and OrInto write
// before they read.
const pageSize = 4096

// pages yields the bounds of words's parts that lie in one memory page
// each, in order.
func pages(words []uint64) iter.Seq2[int, int] {
	return func(yield func(from, to int) bool) {
		if len(words) == 0 {
			return
		}
		n := (pageSize - int(uintptr(unsafe.Pointer(&words[0]))%pageSize)) / 8
		for from := 0; from < len(words); from, n = from+n, pageSize/8 {
			if !yield(from, min(from+n, len(words))) {
				return
			}
		}
	}
}

// addCounters returns the 16 4-bit counters of a plus those of b, each
// sum saturating at MaxCounter. The even and the odd counters are added in
// separate words, one per byte, where a sum (at most 30) cannot carry into
// the next counter; bit 4 of a byte then says the sum overflowed, and that
// counter is set to MaxCounter.
func addCounters(a, b uint64) uint64 {
	const low = 0x0f0f0f0f0f0f0f0f   // the low counter of each byte
	const carry = 0x1010101010101010 // bit 4 of each byte
	even := a&low + b&low
	odd := a>>CounterBits&low + b>>CounterBits&low
	even |= (even & carry >> 4) * MaxCounter
	odd |= (odd & carry >> 4) * MaxCounter
	return even&low | (odd&low)<<CounterBits
}

// incrAt increments, with a plain load and store, the counter of blk at
// position j of draw d, unless it is MaxCounter.
func incrAt(blk *[BlockWords]uint64, d uint64, j uint) {
	p := d >> (j * ctrPosBits) & ctrPosMask
	w, sh := p/CountersPerWord, p%CountersPerWord*CounterBits
	if blk[w]>>sh&MaxCounter != MaxCounter {
		blk[w] += 1 << sh
	}
}
