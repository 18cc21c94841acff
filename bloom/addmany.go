package bloom

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// AddNewHashes adds the keys of hs in order, each as AddHashBlock would
// after the ones before it, pipelined as HasManyHash is: the blocks of the
// next 16 keys are addressed and prefetched while the current 16 are set,
// so that the cache misses of a batch overlap instead of costing one
// after another. added[i] reports whether key i changed the filter (was
// new to it), and blocks[i] is then the index of its block; both must hold
// len(hs) entries.
//
// A key that skip marks (skip may be nil; else it holds len(hs) entries)
// is left out: added[i] is false and nothing is read. The store marks the
// keys that an older layer of its chain holds.
//
// limit bounds Count: AddNewHashes stops before the first key that it
// would add while Count() >= limit, and returns that key's index, which
// neither it nor any key after it was looked at; it returns len(hs) when
// it answered every key. A key the filter holds is answered at any count.
// Count moves by the keys added once, before it returns.
//
// The caller serializes the adds to the filter, as the store does: a key
// sees the bits of the keys before it since each is set before the next is
// probed.
func (f *Filter) AddNewHashes(hs []uint64, skip, added []bool, blocks []uint64, limit uint64) int {
	added = added[:len(hs)]
	blocks = blocks[:len(hs)]
	if skip != nil {
		skip = skip[:len(hs)]
	}
	if len(hs) == 0 {
		return 0
	}
	start := f.count.Load()
	count := start
	base := uintptr(unsafe.Pointer(&f.words[0]))
	var blks [2][batchSize]unsafe.Pointer
	var draws, states [2][batchSize]uint64
	n := min(batchSize, len(hs))
	address(&f.g, f.words, hs[:n], &blks[0], &draws[0], &states[0])
	for i, cur := 0, 0; i < len(hs); i, cur = i+n, cur^1 {
		n = min(batchSize, len(hs)-i)
		if next := i + n; next < len(hs) {
			address(&f.g, f.words, hs[next:min(next+batchSize, len(hs))], &blks[cur^1], &draws[cur^1], &states[cur^1])
		}
		for j := range n {
			k := i + j
			added[k] = false
			if skip != nil && skip[k] {
				continue
			}
			blk := (*[BlockWords]uint64)(blks[cur][j])
			if count >= limit {
				if probe(blk, draws[cur][j], states[cur][j], f.g.K) {
					continue
				}
				f.count.Add(count - start)
				return k
			}
			if orBits(blk, draws[cur][j], states[cur][j], f.g.K) {
				added[k] = true
				blocks[k] = uint64(uintptr(unsafe.Pointer(blk))-base) / (BlockWords * 8)
				count++
			}
		}
	}
	f.count.Add(count - start)
	return len(hs)
}

// orBits sets the k bits of the position stream locate returned (draw,
// state) in blk (atomically, skipping words whose bits are set already)
// and reports whether any of them was unset: the add of AddHashBlock and
// AddHashUncounted.
func orBits(blk *[BlockWords]uint64, draw, state uint64, k uint32) bool {
	// The masks are built and the words holding a position noted in one
	// pass; the second visits only those words. A loop over all eight
	// that skipped the empty ones mispredicted about three times an add
	// (with k = 6, the plan for 1%, each word is empty with probability
	// (7/8)^6, about 0.45): this form made an add to a cache-resident
	// filter 1.3-1.4 times faster (BenchmarkAdd at 1e6: 66-67 ns against
	// 46-51).
	var masks [BlockWords]uint64
	var words uint // bit w: masks[w] != 0
	if k <= bitPosPerDraw {
		d := draw
		for ; k > 0; k-- {
			w := d >> 6 & (BlockWords - 1)
			masks[w] |= 1 << (d & 63)
			words |= 1 << w
			d >>= bitPosBits
		}
	} else {
		drawMasks(draw, state, k, &masks)
		for w, m := range masks {
			if m != 0 {
				words |= 1 << w
			}
		}
	}
	changed := false
	for ; words != 0; words &= words - 1 {
		w := bits.TrailingZeros(words) & (BlockWords - 1)
		m := masks[w]
		// No locked instruction (nor dirtied line or page) where the
		// bits are set already. The OR's result is not used, so it
		// compiles to one LOCK OR, not a compare-and-swap loop.
		if atomic.LoadUint64(&blk[w])&m != m {
			atomic.OrUint64(&blk[w], m)
			changed = true
		}
	}
	return changed
}
