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
// lookup that read them answers "maybe". A Front made by SlowFront calls
// the wrapper's own lookups. A Front is immutable.
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
		return g.miss()
	}
	return f.hasRetry(f.own, i1, fp, i2) || g.miss()
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
		return g.miss()
	}
	return f.hasRetry(f.own, i1, fp, i2) || g.miss()
}
