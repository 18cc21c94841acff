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
// placeholder pages (mmapbits), so a lookup that read them answers
// "maybe". A Front made by NewOverlayFront first asks a function of the
// wrapper about a key absent from the words (bits the wrapper keeps beside
// them). A Front made by SlowFront calls the wrapper's own lookups. A
// Front is immutable.
type Front struct {
	f        *Filter      // nil: slow
	off      *atomic.Bool // never nil for a Filter's Front (noOff: a miss is false)
	more     func(h uint64) bool
	slow     func(key []byte) bool
	slowHash func(h uint64) bool
}

// NewFront returns a Front that looks up f and answers off.Load() where
// the key is absent from f (off may be nil: false).
func NewFront(f *Filter, off *atomic.Bool) *Front {
	if off == nil {
		off = &noOff
	}
	return &Front{f: f, off: off}
}

// noOff is the off of a Front given none: never set.
var noOff atomic.Bool

// NewOverlayFront returns a Front that looks up f and, where the key is
// absent from f's words, answers more(h) || off.Load() for its hash h: the
// store's read-only overlay, the bits that adds logged after the files'
// checkpoint set, is asked only for the keys the words miss, so that a hit
// costs what it costs without one.
func NewOverlayFront(f *Filter, off *atomic.Bool, more func(h uint64) bool) *Front {
	g := NewFront(f, off)
	g.more = more
	return g
}

// SlowFront returns a Front whose Has and HasHash call has and hasHash.
func SlowFront(has func(key []byte) bool, hasHash func(h uint64) bool) *Front {
	return &Front{slow: has, slowHash: hasHash}
}

// Filter returns the filter a NewFront looks up, or nil for a SlowFront.
func (g *Front) Filter() *Filter { return g.f }

// miss is the answer for a key, of hash h, the filter's words do not hold.
func (g *Front) miss(h uint64) bool {
	if g.more != nil {
		return g.missMore(h)
	}
	return g.off.Load()
}

// missMore is miss for a Front made by NewOverlayFront, kept out of line
// so that miss stays small enough to be inlined into Has and HasHash.
//
//go:noinline
func (g *Front) missMore(h uint64) bool { return g.more(h) || g.off.Load() }

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
		return probe(blk, draw, state, k) || g.miss(h)
	}
	d := draw
	if bitAt(blk, d, 0)&bitAt(blk, d, 1)&1 == 0 {
		return g.miss(h)
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
	return acc&1 != 0 || g.miss(h)
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
		return probe(blk, draw, state, k) || g.miss(h)
	}
	// As Filter.HasHash.
	d := draw
	if bitAt(blk, d, 0)&bitAt(blk, d, 1)&1 == 0 {
		return g.miss(h)
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
	return acc&1 != 0 || g.miss(h)
}
