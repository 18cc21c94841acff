package bloom

import (
	"sync/atomic"
	"unsafe"

	"github.com/filterstore/filterstore/internal/prefetch"
)

// Batched lookups: HasMany and HasManyHash of Filter and Counting. A lookup
// on a filter larger than the caches waits for one cache miss (and, on
// 4 KiB pages, a TLB miss); a batch computes the block addresses of many
// lookups and prefetches their lines (internal/prefetch) before it probes
// any, so the misses overlap. The pipeline prefetches the next batch's
// blocks before it probes the current batch, so two batches' misses are in
// flight at once.

// batchSize is how many lookups a batch addresses and prefetches before it
// probes them. 16 lines in flight suit the CPU measured: on the 2-vCPU
// AMD VM, store's BenchmarkHasMany at 1e8 keys took 26-29 ns/key with 16,
// 26-32 with 8 and 37-40 with 32 (two alternated runs); more prefetches
// than the core can track wait for a slot, and hold up the loads of the
// batch being probed. At 1e9 keys (a 1.2 GB filter, where each lookup
// also walks the page tables) 32 did no better: 31-36 ns/key with 16,
// 33-35 with 32 (three alternated runs).
const batchSize = 16

// hashChunk is how many keys HasMany hashes onto the stack before it looks
// them up.
const hashChunk = 256

// HasMany reports for each key whether it may be in the filter, as Has does.
// The answers go to out[:len(keys)], which is allocated only if
// cap(out) < len(keys), and that slice is returned. Lookups go in batches
// of 16: the block addresses of the next batch are computed and their
// cache lines prefetched (see internal/prefetch) while the bits of the
// current one are probed, so that the misses of two batches are in flight
// at once. On a filter larger than the caches it is several times faster
// per key than a loop over Has.
func (f *Filter) HasMany(keys [][]byte, out []bool) []bool {
	out = resize(out, len(keys))
	var hs [hashChunk]uint64
	for i := 0; i < len(keys); i += hashChunk {
		n := min(hashChunk, len(keys)-i)
		for j := range n {
			hs[j] = Hash(keys[i+j])
		}
		f.hasPipelined(hs[:n], out[i:i+n])
	}
	return out
}

// HasManyHash is HasMany for keys given by their hashes.
func (f *Filter) HasManyHash(hs []uint64, out []bool) []bool {
	out = resize(out, len(hs))
	f.hasPipelined(hs, out[:len(hs)])
	return out
}

// hasPipelined answers the lookups of hs into out[:len(hs)], batch by
// batch, prefetching the blocks of batch i+1 before it probes batch i.
func (f *Filter) hasPipelined(hs []uint64, out []bool) {
	var blks [2][batchSize]unsafe.Pointer
	var draws, states [2][batchSize]uint64
	out = out[:len(hs)]
	n := min(batchSize, len(hs))
	address(&f.g, f.words, hs[:n], &blks[0], &draws[0], &states[0])
	for i, cur := 0, 0; i < len(hs); i, cur = i+n, cur^1 {
		n = min(batchSize, len(hs)-i)
		if next := i + n; next < len(hs) {
			address(&f.g, f.words, hs[next:min(next+batchSize, len(hs))], &blks[cur^1], &draws[cur^1], &states[cur^1])
		}
		for j := range n {
			out[i+j] = probe((*[BlockWords]uint64)(blks[cur][j]), draws[cur][j], states[cur][j], f.g.K)
		}
	}
}

// address computes the blocks (in words, of geometry g) and the first
// draws and states of the position streams (locate's results) of len(hs)
// <= batchSize lookups into blks, draws and states, and prefetches the
// blocks.
func address(g *Geometry, words []uint64, hs []uint64, blks *[batchSize]unsafe.Pointer, draws, states *[batchSize]uint64) {
	hs = hs[:min(len(hs), batchSize)]
	for j, h := range hs {
		block, draw, state := locateMul(h, g.Salt, g.Blocks)
		if g.Derivation != DeriveMul {
			block, draw, state = locateMix(h, g.Salt, g.Blocks)
		}
		blks[j], draws[j], states[j] = unsafe.Pointer(&words[block*BlockWords]), draw, state
	}
	prefetch.Lines(blks[:len(hs)])
}

// hasBatch answers len(hs) <= batchSize lookups into out: first it computes
// every block address and prefetches the blocks, so the CPU has all the
// cache misses in flight at once, then it probes the bits.
func (f *Filter) hasBatch(hs []uint64, out []bool) {
	var blks [batchSize]unsafe.Pointer
	var draws, states [batchSize]uint64
	hs = hs[:min(len(hs), batchSize)]
	out = out[:len(hs)]
	address(&f.g, f.words, hs, &blks, &draws, &states)
	for j := range hs {
		out[j] = probe((*[BlockWords]uint64)(blks[j]), draws[j], states[j], f.g.K)
	}
}

// HasMany is Filter.HasMany for the counting filter: out[i] is Has(keys[i]).
func (c *Counting) HasMany(keys [][]byte, out []bool) []bool {
	out = resize(out, len(keys))
	var hs [hashChunk]uint64
	for i := 0; i < len(keys); i += hashChunk {
		n := min(hashChunk, len(keys)-i)
		for j := range n {
			hs[j] = Hash(keys[i+j])
		}
		c.hasPipelined(hs[:n], out[i:i+n])
	}
	return out
}

// HasManyHash is HasMany for keys given by their hashes.
func (c *Counting) HasManyHash(hs []uint64, out []bool) []bool {
	out = resize(out, len(hs))
	c.hasPipelined(hs, out[:len(hs)])
	return out
}

// hasPipelined is Filter.hasPipelined for the counting filter.
func (c *Counting) hasPipelined(hs []uint64, out []bool) {
	var blks [2][batchSize]unsafe.Pointer
	var draws, states [2][batchSize]uint64
	out = out[:len(hs)]
	n := min(batchSize, len(hs))
	address(&c.g, c.words, hs[:n], &blks[0], &draws[0], &states[0])
	for i, cur := 0, 0; i < len(hs); i, cur = i+n, cur^1 {
		n = min(batchSize, len(hs)-i)
		if next := i + n; next < len(hs) {
			address(&c.g, c.words, hs[next:min(next+batchSize, len(hs))], &blks[cur^1], &draws[cur^1], &states[cur^1])
		}
		for j := range n {
			out[i+j] = probeCounters((*[BlockWords]uint64)(blks[cur][j]), draws[cur][j], states[cur][j], c.g.K)
		}
	}
}

// probeCounters reports whether none of the k counters of the position
// stream locate returned (draw, state) is zero in blk: HasHash's answer.
func probeCounters(blk *[BlockWords]uint64, draw, state uint64, k uint32) bool {
	if k <= ctrPosPerDraw {
		return probeCounters1(blk, draw, k)
	}
	var zero uint64
	for j, left := uint32(0), uint32(ctrPosPerDraw); j < k; j++ {
		if left == 0 {
			state, draw = nextDraw(state)
			left = ctrPosPerDraw
		}
		left--
		p := draw & ctrPosMask
		draw >>= ctrPosBits
		// Branch-free, as in probe: (v-1)>>63 is 1 exactly when v == 0.
		v := atomic.LoadUint64(&blk[p/CountersPerWord]) >> (p % CountersPerWord * CounterBits) & MaxCounter
		zero |= (v - 1) >> 63
	}
	return zero == 0
}

// probeCounters1 is probeCounters for k <= ctrPosPerDraw (PlanCounting
// gives k = 6 at 1%): every position is in the first draw, unrolled as in
// probe.
func probeCounters1(blk *[BlockWords]uint64, d uint64, k uint32) bool {
	var zero uint64
	switch k {
	case 9:
		zero |= counterZero(blk, d, 8)
		fallthrough
	case 8:
		zero |= counterZero(blk, d, 7)
		fallthrough
	case 7:
		zero |= counterZero(blk, d, 6)
		fallthrough
	case 6:
		zero |= counterZero(blk, d, 5)
		fallthrough
	case 5:
		zero |= counterZero(blk, d, 4)
		fallthrough
	case 4:
		zero |= counterZero(blk, d, 3)
		fallthrough
	case 3:
		zero |= counterZero(blk, d, 2)
		fallthrough
	case 2:
		zero |= counterZero(blk, d, 1)
		fallthrough
	case 1:
		zero |= counterZero(blk, d, 0)
	}
	return zero == 0
}

// counterZero returns 1 if counter j of draw d (bits 7j..7j+6: its word
// the top three, its nibble the low four) is zero in blk, else 0.
func counterZero(blk *[BlockWords]uint64, d uint64, j uint) uint64 {
	v := atomic.LoadUint64(&blk[d>>(j*ctrPosBits+4)&(BlockWords-1)]) >> (d >> (j * ctrPosBits) & (CountersPerWord - 1) * CounterBits) & MaxCounter
	return (v - 1) >> 63
}
