package bloom

import (
	"sync/atomic"
	"unsafe"
)

// CountingFront is Front for a Counting filter: an entry point for single
// lookups that the store keeps in an atomic pointer per counting filter
// and calls from a method small enough to be inlined into its caller.
// Its Has and HasHash repeat Counting.HasHash's lookup in their own
// bodies, so that the lookup runs one call below the caller.
//
// A CountingFront made by NewCountingFront looks up its Counting filter
// and, where some counter is zero, answers off.Load() instead of false. A
// CountingFront made by SlowCountingFront calls the wrapper's own
// lookups. A CountingFront is immutable.
type CountingFront struct {
	c        *Counting    // nil: slow
	off      *atomic.Bool // nil: a miss is false
	slow     func(key []byte) bool
	slowHash func(h uint64) bool
}

// NewCountingFront returns a CountingFront that looks up c and answers
// off.Load() where the key is absent from c (off may be nil: false).
func NewCountingFront(c *Counting, off *atomic.Bool) *CountingFront {
	return &CountingFront{c: c, off: off}
}

// SlowCountingFront returns a CountingFront whose Has and HasHash call
// has and hasHash.
func SlowCountingFront(has func(key []byte) bool, hasHash func(h uint64) bool) *CountingFront {
	return &CountingFront{slow: has, slowHash: hasHash}
}

// Counting returns the filter a NewCountingFront looks up, or nil for a
// SlowCountingFront.
func (g *CountingFront) Counting() *Counting { return g.c }

// miss is the answer for a key the filter does not hold.
func (g *CountingFront) miss() bool { return g.off != nil && g.off.Load() }

// Has reports whether key may be in the filter (see CountingFront):
// Counting.Has with the miss answer of the CountingFront.
// TestFilterMatchesLocate holds the two to the same answers.
func (g *CountingFront) Has(key []byte) bool {
	c := g.c
	if c == nil {
		return g.slow(key)
	}
	h := Hash(key)
	block, draw, state := locateMul(h, c.g.Salt, c.g.Blocks)
	if c.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, c.g.Salt, c.g.Blocks)
	}
	// As Counting.HasHash.
	blk := (*[BlockWords]uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(c.words)), block*BlockWords*8))
	k := c.g.K
	if k < 3 || k > ctrPosPerDraw {
		return hasCounters(blk, draw, state, k) || g.miss()
	}
	d := draw
	if counterZero(blk, d, 0)|counterZero(blk, d, 1) != 0 {
		return g.miss()
	}
	zero := counterZero(blk, d, 2)
	if k > 3 {
		zero |= counterZero(blk, d, 3)
	}
	if k > 4 {
		zero |= counterZero(blk, d, 4)
	}
	if k > 5 {
		zero |= counterZero(blk, d, 5)
	}
	if k > 6 {
		zero |= counterZero(blk, d, 6)
	}
	if k > 7 {
		zero |= counterZero(blk, d, 7)
	}
	if k > 8 {
		zero |= counterZero(blk, d, 8)
	}
	return zero == 0 || g.miss()
}

// HasHash is Has for a key whose Hash is h.
func (g *CountingFront) HasHash(h uint64) bool {
	c := g.c
	if c == nil {
		return g.slowHash(h)
	}
	block, draw, state := locateMul(h, c.g.Salt, c.g.Blocks)
	if c.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, c.g.Salt, c.g.Blocks)
	}
	// As Counting.HasHash.
	blk := (*[BlockWords]uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(c.words)), block*BlockWords*8))
	k := c.g.K
	if k < 3 || k > ctrPosPerDraw {
		return hasCounters(blk, draw, state, k) || g.miss()
	}
	d := draw
	if counterZero(blk, d, 0)|counterZero(blk, d, 1) != 0 {
		return g.miss()
	}
	zero := counterZero(blk, d, 2)
	if k > 3 {
		zero |= counterZero(blk, d, 3)
	}
	if k > 4 {
		zero |= counterZero(blk, d, 4)
	}
	if k > 5 {
		zero |= counterZero(blk, d, 5)
	}
	if k > 6 {
		zero |= counterZero(blk, d, 6)
	}
	if k > 7 {
		zero |= counterZero(blk, d, 7)
	}
	if k > 8 {
		zero |= counterZero(blk, d, 8)
	}
	return zero == 0 || g.miss()
}
