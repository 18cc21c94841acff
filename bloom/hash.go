package bloom

import (
	"fmt"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// Hash derivation constants. They are part of the file format and must never
// change: a filter written with one derivation is unreadable (it gives false
// negatives) under another.
const (
	// mixGamma is the splitmix64 increment (2^64 / golden ratio, odd).
	mixGamma = 0x9e3779b97f4a7c15
	// mixMul1 and mixMul2 are the multipliers of the splitmix64 finalizer
	// ("Mix13" of Stafford's variants).
	mixMul1 = 0xbf58476d1ce4e5b9
	mixMul2 = 0x94d049bb133111eb

	// bitPosBits is the width of one bit position inside a 512-bit block;
	// bitPosPerDraw positions are cut from one 64-bit draw (63 bits used).
	bitPosBits    = 9
	bitPosMask    = 1<<bitPosBits - 1
	bitPosPerDraw = 64 / bitPosBits // 7

	// ctrPosBits is the width of one counter position inside a block of
	// 128 four-bit counters; ctrPosPerDraw positions per 64-bit draw.
	ctrPosBits    = 7
	ctrPosMask    = 1<<ctrPosBits - 1
	ctrPosPerDraw = 64 / ctrPosBits // 9
)

// Hash returns the 64-bit hash of key that every other operation derives its
// block and bit positions from: XXH64 with seed 0 (xxhash.Sum64). Callers
// that already hold this hash use the ...Hash variants to avoid hashing
// twice. Part of the file format: never changes.
func Hash(key []byte) uint64 { return xxhash.Sum64(key) }

// mix64 is the splitmix64 finalizer: a bijection on uint64 with full
// avalanche (every input bit flips every output bit with probability ~1/2).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= mixMul1
	x ^= x >> 27
	x *= mixMul2
	x ^= x >> 31
	return x
}

// Derivation says how a geometry turns a hash into a block and the draws
// its positions are cut from (drawn in the package doc). It is recorded per
// layer by the store (file format version 4); files of versions 1 to 3
// hold DeriveMix. Part of the file format: values never change.
type Derivation uint32

const (
	// DeriveMix finalizes h^Salt with splitmix64, takes the block from
	// the result and cuts the positions from splitmix64 draws after it:
	// five multiplies before the first probe, three of them (the
	// finalizer's two and the range reduction) before the block's
	// address is known. The zero value: every filter written
	// before DeriveMul existed uses it, and a Geometry built by hand
	// without the field keeps meaning what it meant.
	DeriveMix Derivation = 0
	// DeriveMul takes the block from the high bits of x = h^Salt and the
	// first draw from the low bits of x times an odd constant: one
	// multiply before the block's address, one more for the first seven
	// Bloom (nine counting) positions; positions beyond those come from
	// splitmix64 draws seeded by x. It relies on h being XXH64 (Hash),
	// whose every bit is uniform. Plan and PlanCounting choose it.
	DeriveMul Derivation = 1
)

// String returns "mix" or "mul".
func (d Derivation) String() string {
	switch d {
	case DeriveMix:
		return "mix"
	case DeriveMul:
		return "mul"
	}
	return fmt.Sprintf("derivation(%d)", uint32(d))
}

// locate returns the block index of hash h in geometry g, the first draw
// its positions are cut from, and the state nextDraw derives any further
// draws from. The block is the high word of x*Blocks (Lemire's fast
// range), which is uniform for any block count, not only powers of two.
//
// It is too large for the compiler to inline, so the hot paths (lookups,
// adds, the batched and owned paths, a Load's lane assignment) spell out
// its two lines: locateMul, then locateMix over it unless the geometry is
// DeriveMul. Both inline; a mix geometry computes and discards
// locateMul's two multiplies. Called through locate, mul lookups at 1e8
// keys took 99-100 ns against 71-75 for an inlined copy (one run of a
// throwaway benchmark), and old (mix) filters showed no slowdown against
// the code before the split in three alternated compare runs.
func (g *Geometry) locate(h uint64) (block, draw, state uint64) {
	if g.Derivation != DeriveMul {
		return locateMix(h, g.Salt, g.Blocks)
	}
	return locateMul(h, g.Salt, g.Blocks)
}

// locateMul is locate under DeriveMul. The block depends on x's high
// bits, the positions (bits 0..62 of the product) on its low ones: the low
// 9j+9 bits of the product are a bijection of x's low 9j+9 bits.
func locateMul(h, salt, blocks uint64) (block, draw, state uint64) {
	x := h ^ salt
	block, _ = bits.Mul64(x, blocks)
	return block, x * mixGamma, x
}

// locateMix is locate under DeriveMix.
func locateMix(h, salt, blocks uint64) (block, draw, state uint64) {
	seed := mix64(h ^ salt)
	block, _ = bits.Mul64(seed, blocks)
	state = seed + mixGamma
	return block, mix64(state), state
}

// nextDraw advances the position stream (splitmix64: add the gamma, mix) and
// returns the new state and the 64-bit draw that positions are cut from.
// Successive draws are independent of each other and of the block index
// (which depends on the high bits of seed only through the multiply).
func nextDraw(state uint64) (next, draw uint64) {
	next = state + mixGamma
	return next, mix64(next)
}

// LayerSalt returns the salt of layer i of a Scalable filter. Distinct layers
// get unrelated salts, so a key's bit pattern in one layer says nothing about
// its pattern in another. Part of the file format: never changes.
func LayerSalt(i int) uint64 {
	return mix64(uint64(i+1) * mixGamma)
}

// Locate returns the block that hash h maps to in a Bloom filter of geometry
// g and appends the g.K bit positions (0..511) inside that block to dst.
// Positions are independent uniform draws and may repeat. It is the
// reference for the derivation drawn in the package doc; the filter's hot
// paths inline the same steps. g must be valid.
func (g Geometry) Locate(h uint64, dst []uint16) (block uint64, pos []uint16) {
	block, draw, state := g.locate(h)
	for j := uint32(0); j < g.K; j++ {
		if j > 0 && j%bitPosPerDraw == 0 {
			state, draw = nextDraw(state)
		}
		dst = append(dst, uint16(draw&bitPosMask))
		draw >>= bitPosBits
	}
	return block, dst
}

// LocateCounters is Locate for a counting filter: it appends the g.K counter
// positions (0..127) inside the block to dst.
func (g Geometry) LocateCounters(h uint64, dst []uint16) (block uint64, pos []uint16) {
	block, draw, state := g.locate(h)
	for j := uint32(0); j < g.K; j++ {
		if j > 0 && j%ctrPosPerDraw == 0 {
			state, draw = nextDraw(state)
		}
		dst = append(dst, uint16(draw&ctrPosMask))
		draw >>= ctrPosBits
	}
	return block, dst
}
