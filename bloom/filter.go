package bloom

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// Filter is one blocked Bloom filter over a slice of words, typically a
// memory-mapped file. Each key sets K bits inside one 512-bit block.
//
// All methods are safe for concurrent use but the owned adds (AddOwned,
// AddHashOwned, AddHashesOwned), which are for a filter, or a range of
// its blocks, that one goroutine owns meanwhile: lookups read words with
// atomic loads and take no lock; adds set bits with atomic OR.
type Filter struct {
	g     Geometry
	words []uint64 // len(words) == g.Words()
	count atomic.Uint64
}

// New returns a filter of geometry g over words, which must hold exactly
// g.Words() words, or, if words is nil, over newly allocated zeroed words
// aligned to a cache line (a geometry too large for any slice is
// ErrInvalid; one larger than the memory ends the process, as any
// allocation does). The filter reads and writes words in place; the
// caller must not write them except through the filter. Its Count starts at
// 0 (see SetCount).
func New(g Geometry, words []uint64) (*Filter, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if words == nil {
		var err error
		if words, err = heapWords(g); err != nil {
			return nil, err
		}
	} else if uint64(len(words)) != g.Words() {
		return nil, fmt.Errorf("bloom: %w: words must hold %d words for %d blocks, got %d",
			ErrInvalid, g.Words(), g.Blocks, len(words))
	}
	return &Filter{g: g, words: words}, nil
}

// heapWords returns alignedWords(g.Words()), or an error wrapping
// ErrInvalid for a geometry too large for any slice (make panics with
// "len out of range"; one that fits the address space but not the memory
// still ends the process, as any allocation does).
func heapWords(g Geometry) (words []uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bloom: %w: %d blocks (%d words) cannot be allocated in memory: %v", ErrInvalid, g.Blocks, g.Words(), r)
		}
	}()
	return alignedWords(g.Words()), nil
}

// alignedWords returns n zeroed words starting on a 64-byte boundary, so that
// each block is one cache line, as it is in a page-aligned mapping.
func alignedWords(n uint64) []uint64 {
	buf := make([]uint64, n+BlockWords-1)
	off := 0
	if len(buf) > 0 {
		off = int(uintptr(unsafe.Pointer(&buf[0])) / 8 % BlockWords)
		if off != 0 {
			off = BlockWords - off
		}
	}
	return buf[off : uint64(off)+n : uint64(off)+n]
}

// Geometry returns the filter's geometry.
func (f *Filter) Geometry() Geometry { return f.g }

// Words returns the words the filter works on (not a copy).
func (f *Filter) Words() []uint64 { return f.words }

// Count returns the number of adds that changed the filter: an estimate of
// the number of distinct items, low by the adds that were false positives.
func (f *Filter) Count() uint64 { return f.count.Load() }

// SetCount sets the value Count reports; the store restores it after
// reopening a filter.
func (f *Filter) SetCount(n uint64) { f.count.Store(n) }

// FillRatio returns the fraction of bits that are set. It reads every word:
// O(size of the filter).
func (f *Filter) FillRatio() float64 {
	var ones uint64
	for i := range f.words {
		ones += uint64(bits.OnesCount64(atomic.LoadUint64(&f.words[i])))
	}
	return float64(ones) / float64(f.g.Bits())
}

// EstimateFPR returns EstimateFPR(f.Geometry(), f.Count()).
func (f *Filter) EstimateFPR() float64 { return EstimateFPR(f.g, f.Count()) }

// Add adds key and reports whether any bit changed, that is, whether key is
// new to the filter (false means it was already present or a false
// positive), as RedisBloom's BF.ADD does.
func (f *Filter) Add(key []byte) bool { return f.AddHash(Hash(key)) }

// AddHash is Add for a key whose Hash is h.
//
// Two concurrent adds of the same new key may both report true (each saw
// some bit unset before setting it); the store serializes adds to a filter,
// so its counts are exact.
func (f *Filter) AddHash(h uint64) bool {
	added, _ := f.AddHashBlock(h)
	return added
}

// AddHashBlock is AddHash that also returns the index of the block holding
// h's bits (the store marks that block's page written).
func (f *Filter) AddHashBlock(h uint64) (added bool, block uint64) {
	// orBits is not inlined; the call cost about 5% of an add to a
	// cache-resident filter, against the copy of its body this used to
	// hold.
	block, draw, state := locateMul(h, f.g.Salt, f.g.Blocks)
	if f.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, f.g.Salt, f.g.Blocks)
	}
	if orBits((*[BlockWords]uint64)(f.words[block*BlockWords:]), draw, state, f.g.K) {
		f.count.Add(1)
		return true, block
	}
	return false, block
}

// AddHashUncounted is AddHashBlock without counting the add: Count does
// not move. A bulk load adding on several goroutines counts the keys it
// reports added and calls AddCount once per batch, since one counter
// moved by every add would bounce between their CPUs (it cost more than
// the add itself).
func (f *Filter) AddHashUncounted(h uint64) (added bool, block uint64) {
	block, draw, state := locateMul(h, f.g.Salt, f.g.Blocks)
	if f.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, f.g.Salt, f.g.Blocks)
	}
	return orBits((*[BlockWords]uint64)(f.words[block*BlockWords:]), draw, state, f.g.K), block
}

// BlockOf returns the index of the block that holds h's bits. Loaders
// adding on several goroutines give each a range of blocks, so that no
// cache line moves between their CPUs.
func (f *Filter) BlockOf(h uint64) uint64 {
	block, _, _ := f.g.locate(h)
	return block
}

// AddCount adds n to Count: the adds AddHashUncounted reported.
func (f *Filter) AddCount(n uint64) { f.count.Add(n) }

// SetHash sets h's bits like AddHash, but writes every word of the block
// that gets a bit, whether or not its bits are set already, and leaves the
// count alone. It returns the block index. Recovery replays logged adds
// with it: the write dirties the page even when the bits are there, so a
// page that an earlier failed sync left clean (its bits in memory, not on
// disk) is written by the next one.
func (f *Filter) SetHash(h uint64) (block uint64) {
	var masks [BlockWords]uint64
	block = f.masks(h, &masks)
	blk := (*[BlockWords]uint64)(f.words[block*BlockWords:])
	for w, m := range masks {
		if m != 0 {
			atomic.OrUint64(&blk[w], m)
		}
	}
	return block
}

// Block returns the index of the block that holds h's bits (its words are
// Words()[Block(h)*BlockWords:][:BlockWords]).
func (f *Filter) Block(h uint64) uint64 {
	block, _, _ := f.g.locate(h)
	return block
}

// masks sets, per word of h's block, the bits h sets in m (zeroed by the
// caller) and returns the block's index.
func (f *Filter) masks(h uint64, m *[BlockWords]uint64) (block uint64) {
	block, draw, state := f.g.locate(h)
	drawMasks(draw, state, f.g.K, m)
	return block
}

// drawMasks sets in m (zeroed by the caller), per word of a block, the k
// bits of the position stream whose first draw is draw and whose later
// draws follow state (locate's results).
func drawMasks(draw, state uint64, k uint32, m *[BlockWords]uint64) {
	if k <= bitPosPerDraw {
		// Every position in the first draw (k = 6 at 1%), as in orBits.
		for ; k > 0; k-- {
			m[draw>>6&(BlockWords-1)] |= 1 << (draw & 63)
			draw >>= bitPosBits
		}
		return
	}
	for j, left := uint32(0), uint32(bitPosPerDraw); j < k; j++ {
		if left == 0 {
			state, draw = nextDraw(state)
			left = bitPosPerDraw
		}
		left--
		p := draw & bitPosMask
		draw >>= bitPosBits
		m[p>>6] |= 1 << (p & 63)
	}
}

// Has reports whether key may be in the filter: false means definitely not.
func (f *Filter) Has(key []byte) bool {
	// HasHash's body, with the key hashed here: as f.HasHash(Hash(key))
	// (two calls, so not inlined into its caller) it ran a call level
	// deeper, and with each key hashed in the loop misses took 1.10-1.21x
	// this form's time, hits 1.04x (a throwaway benchmark, 20 interleaved
	// rounds at 1e7 and 1e8 keys on the 2-vCPU VM, median per-round
	// ratios). TestFilterMatchesLocate holds the two to the same answers.
	h := Hash(key)
	block, draw, state := locateMul(h, f.g.Salt, f.g.Blocks)
	if f.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, f.g.Salt, f.g.Blocks)
	}
	blk := f.block(block)
	k := f.g.K
	if k < 3 || k > bitPosPerDraw {
		return probe(blk, draw, state, k)
	}
	d := draw
	if bitAt(blk, d, 0)&bitAt(blk, d, 1)&1 == 0 {
		return false
	}
	acc := bitAt(blk, d, 2)
	if k > 3 {
		acc &= bitAt(blk, d, 3)
	}
	if k > 4 {
		acc &= bitAt(blk, d, 4)
	}
	if k > 5 {
		acc &= bitAt(blk, d, 5)
	}
	if k > 6 {
		acc &= bitAt(blk, d, 6)
	}
	return acc&1 != 0
}

// HasHash is Has for a key whose Hash is h.
func (f *Filter) HasHash(h uint64) bool {
	block, draw, state := locateMul(h, f.g.Salt, f.g.Blocks)
	if f.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, f.g.Salt, f.g.Blocks)
	}
	blk := f.block(block)
	k := f.g.K
	if k < 3 || k > bitPosPerDraw {
		return probe(blk, draw, state, k)
	}
	// k = 3..7 (Plan's k from about 18% down to 0.45%; 1% is k = 6), all
	// positions in the first draw, inlined here rather than a call to
	// probe and its switch on k. The first two positions decide about four
	// misses in five (in a filter at its capacity a bit is set with
	// probability about 0.45), so they exit early; the rest are ANDed
	// without branches, as probe does. Against probe, one lookup at a time
	// on keys hashed in the loop (a throwaway benchmark, 20 interleaved
	// rounds on the 2-vCPU VM, median ratios per round): at 1e7 keys hits
	// 0.98x, misses 0.73x, a random half-and-half mix 0.97x (1.06x in a
	// second run); at 1e5 (cache-resident) 0.66x, 0.80x, 0.74x. An exit
	// after one position mispredicted too often, after three or four
	// saved less on misses out of the caches.
	d := draw
	if bitAt(blk, d, 0)&bitAt(blk, d, 1)&1 == 0 {
		return false
	}
	acc := bitAt(blk, d, 2)
	if k > 3 {
		acc &= bitAt(blk, d, 3)
	}
	if k > 4 {
		acc &= bitAt(blk, d, 4)
	}
	if k > 5 {
		acc &= bitAt(blk, d, 5)
	}
	if k > 6 {
		acc &= bitAt(blk, d, 6)
	}
	return acc&1 != 0
}

// block returns block i's words. i < f.g.Blocks, as locateMul and
// locateMix guarantee (the high word of a product with Blocks), and
// len(f.words) == f.g.Words() (New checks it), so the block lies inside
// f.words; the pointer arithmetic skips the two slice checks that
// f.words[i*BlockWords:] converted to an array pointer costs a lookup.
func (f *Filter) block(i uint64) *[BlockWords]uint64 {
	return (*[BlockWords]uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(f.words)), i*BlockWords*8))
}

// probe reports whether all k bits of the position stream that locate
// returned (draw, state) are set in blk.
func probe(blk *[BlockWords]uint64, draw, state uint64, k uint32) bool {
	if k > bitPosPerDraw {
		return probeDraws(blk, draw, state, k)
	}
	// One draw holds every position (k <= 7: Plan gives it for error
	// rates down to about 0.45%; 1% is k = 6). Unrolled, without
	// probeDraws' per-position bookkeeping, a lookup runs about half the
	// instructions.
	//
	// Branch-free: an exit after each position mispredicts on about
	// every miss. On a loop of lookups of bare hashes (bench's
	// BenchmarkHotBloom, 1e7 keys, 2-vCPU VM) it made misses faster
	// (55-60 ns against 67-74), the CPU running ahead into the next
	// lookup while a block's miss was outstanding; but in bench's
	// compare, which hashes each key first, misses were 1.36-1.71x
	// blobloom's with it against 1.12-1.46x without (two alternated runs
	// of each build), and on a cache-resident filter (1e5 keys) misses
	// took 19-20 ns with it against 14. HasMany's pipelined loop uses
	// this; a single HasHash exits once, after two positions.
	d := draw
	acc := uint64(1)
	switch k {
	case 7:
		acc &= bitAt(blk, d, 6)
		fallthrough
	case 6:
		acc &= bitAt(blk, d, 5)
		fallthrough
	case 5:
		acc &= bitAt(blk, d, 4)
		fallthrough
	case 4:
		acc &= bitAt(blk, d, 3)
		fallthrough
	case 3:
		acc &= bitAt(blk, d, 2)
		fallthrough
	case 2:
		acc &= bitAt(blk, d, 1)
		fallthrough
	case 1:
		acc &= bitAt(blk, d, 0)
	}
	return acc&1 != 0
}

// bitAt returns blk's word holding position j of draw d, shifted so that
// the position's bit is bit 0. Position j is bits 9j..9j+8 of d: its
// word is the top three of them, its bit the low six.
func bitAt(blk *[BlockWords]uint64, d uint64, j uint) uint64 {
	return atomic.LoadUint64(&blk[d>>(j*bitPosBits+6)&(BlockWords-1)]) >> (d >> (j * bitPosBits) & 63)
}

// probeDraws is probe for any k: a new draw every bitPosPerDraw positions.
func probeDraws(blk *[BlockWords]uint64, draw, state uint64, k uint32) bool {
	acc := uint64(1)
	for j, left := uint32(0), uint32(bitPosPerDraw); j < k; j++ {
		if left == 0 {
			state, draw = nextDraw(state)
			left = bitPosPerDraw
		}
		left--
		p := draw & bitPosMask
		draw >>= bitPosBits
		acc &= atomic.LoadUint64(&blk[p>>6]) >> (p & 63)
	}
	return acc&1 != 0
}

// resize returns out[:n], allocating a new slice if out is too short.
func resize(out []bool, n int) []bool {
	if cap(out) < n {
		return make([]bool, n)
	}
	return out[:n]
}
