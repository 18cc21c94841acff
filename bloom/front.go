package bloom

import "sync/atomic"

// Front is an entry point for single lookups in a Filter, for a wrapper
// that adds a state of its own: the store keeps one per Bloom filter in
// an atomic pointer and calls it from a method small enough to be inlined
// into its caller, so that the lookup runs one call below the caller, as
// Filter.Has does. (Its Has and HasHash repeat Filter's: a Filter calling
// a Front of its own cost cache-resident lookups 4-7%.)
//
// A Front made by NewFront looks up its Filter and, where the lookup
// finds the key absent, answers off.Load() instead of false: the store's
// flag, set before it replaces a closed or dropped filter's mapping by
// placeholder pages (mmapbits), so a lookup that read them answers "maybe". A Front made by
// SlowFront calls the wrapper's own lookups. A Front is immutable.
type Front struct {
	f        *Filter      // nil: slow
	off      *atomic.Bool // nil: a miss is false
	slow     func(key []byte) bool
	slowHash func(h uint64) bool
}

// NewFront returns a Front that looks up f and answers off.Load() where
// the key is absent from f (off may be nil: false).
func NewFront(f *Filter, off *atomic.Bool) *Front { return &Front{f: f, off: off} }

// SlowFront returns a Front whose Has and HasHash call has and hasHash.
func SlowFront(has func(key []byte) bool, hasHash func(h uint64) bool) *Front {
	return &Front{slow: has, slowHash: hasHash}
}

// Filter returns the filter a NewFront looks up, or nil for a SlowFront.
func (g *Front) Filter() *Filter { return g.f }

// miss is the answer for a key the filter does not hold.
func (g *Front) miss() bool { return g.off != nil && g.off.Load() }

// Has reports whether key may be in the filter (see Front): Filter.Has
// with the miss answer of the Front. TestFilterMatchesLocate holds the
// two to the same answers.
func (g *Front) Has(key []byte) bool {
	f := g.f
	if f == nil {
		return g.slow(key)
	}
	h := Hash(key)
	block, draw, state := locateMul(h, f.g.Salt, f.g.Blocks)
	if f.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, f.g.Salt, f.g.Blocks)
	}
	blk := f.block(block)
	k := f.g.K
	if k < 3 || k > bitPosPerDraw {
		return probe(blk, draw, state, k) || g.miss()
	}
	d := draw
	if bitAt(blk, d, 0)&bitAt(blk, d, 1)&1 == 0 {
		return g.miss()
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
	return acc&1 != 0 || g.miss()
}

// HasHash is Has for a key whose Hash is h.
func (g *Front) HasHash(h uint64) bool {
	f := g.f
	if f == nil {
		return g.slowHash(h)
	}
	block, draw, state := locateMul(h, f.g.Salt, f.g.Blocks)
	if f.g.Derivation != DeriveMul {
		block, draw, state = locateMix(h, f.g.Salt, f.g.Blocks)
	}
	blk := f.block(block)
	k := f.g.K
	if k < 3 || k > bitPosPerDraw {
		return probe(blk, draw, state, k) || g.miss()
	}
	// As Filter.HasHash.
	d := draw
	if bitAt(blk, d, 0)&bitAt(blk, d, 1)&1 == 0 {
		return g.miss()
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
	return acc&1 != 0 || g.miss()
}
