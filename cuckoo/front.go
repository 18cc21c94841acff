package cuckoo

import "sync/atomic"

// Front is an entry point for single lookups in a Filter, for a wrapper
// that adds a state of its own: the store keeps one per cuckoo filter in
// an atomic pointer and calls it from a method small enough to be inlined
// into its caller, so that a one-layer filter's lookup runs one call below
// the caller. Its Has and HasHash repeat Filter.HasHash's lookup.
//
// A Front made by NewFront looks up its Filter and, where the lookup
// finds the key absent (after any retries while fingerprints moved),
// answers off.Load() instead of false: the store's flag, set before it
// replaces a closed or dropped filter's mapping by placeholder pages, so a
// lookup that read them answers "maybe". A Front made by NewOverlayFront
// first asks a function of the wrapper about a key absent from the words
// (changes the wrapper keeps beside them). A Front made by SlowFront calls
// the wrapper's own lookups. A Front is immutable.
type Front struct {
	f        *Filter      // nil: slow
	off      *atomic.Bool // never nil for a Filter's Front (noOff: a miss is false)
	more     func(h, i1, i2 uint64) bool
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
// absent from f's words, answers more(h, i1, i2) || off.Load(), for the
// key's hash h and its two buckets i1 and i2: the store's read-only
// overlay, the words that changes logged after the files' checkpoint
// wrote, is asked only for the keys the words miss, so that a hit costs
// what it costs without one.
func NewOverlayFront(f *Filter, off *atomic.Bool, more func(h, i1, i2 uint64) bool) *Front {
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

// miss is the answer for a key, of hash h and buckets i1 and i2, the
// filter's words do not hold.
func (g *Front) miss(h, i1, i2 uint64) bool {
	if g.more != nil {
		return g.missMore(h, i1, i2)
	}
	return g.off.Load()
}

// missMore is miss for a Front made by NewOverlayFront, kept out of line
// so that miss stays small enough to be inlined into Has and HasHash.
//
//go:noinline
func (g *Front) missMore(h, i1, i2 uint64) bool { return g.more(h, i1, i2) || g.off.Load() }

// Has reports whether key may have been inserted (see Front): Filter.Has
// with the miss answer of the Front. TestFrontMatchesFilter holds the two
// to the same answers.
func (g *Front) Has(key []byte) bool {
	f := g.f
	if f == nil {
		return g.slow(key)
	}
	// As Filter.HasHash.
	h := Hash(key)
	var i1, fp, i2 uint64
	if f.g.Derivation != DeriveMix { // the common case, inline
		var z uint64
		i1, fp, z = f.g.mulParts(h)
		i2 = altIn(i1, z, f.g.Buckets, f.split)
	} else {
		i1, fp, i2 = f.g.locateMix(h)
	}
	s := atomic.LoadUint64(f.seq)
	if f.match(f.load(i1), fp) || f.match(f.load(i2), fp) {
		return true
	}
	if f.stable(s) {
		return g.miss(h, i1, i2)
	}
	return f.hasRetry(f.own, i1, fp, i2) || g.miss(h, i1, i2)
}

// HasHash is Has for a key whose Hash is h.
func (g *Front) HasHash(h uint64) bool {
	f := g.f
	if f == nil {
		return g.slowHash(h)
	}
	var i1, fp, i2 uint64
	if f.g.Derivation != DeriveMix { // the common case, inline
		var z uint64
		i1, fp, z = f.g.mulParts(h)
		i2 = altIn(i1, z, f.g.Buckets, f.split)
	} else {
		i1, fp, i2 = f.g.locateMix(h)
	}
	s := atomic.LoadUint64(f.seq)
	if f.match(f.load(i1), fp) || f.match(f.load(i2), fp) {
		return true
	}
	if f.stable(s) {
		return g.miss(h, i1, i2)
	}
	return f.hasRetry(f.own, i1, fp, i2) || g.miss(h, i1, i2)
}
