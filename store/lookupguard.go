package store

import (
	"runtime/debug"
	"sync/atomic"
)

// frontOf is a kind's lookup front (bloom.Front, bloom.CountingFront,
// cuckoo.Front), as a pointer type.
type frontOf[E any] interface {
	*E
	Has(key []byte) bool
	HasHash(h uint64) bool
}

// lookupGuard is a handle's fronts under Options.GuardLookups: the
// handle's front is guarded, whose lookups call inner's (the front the
// handle would use without the option) with faults turned into panics,
// which recoverLookup recovers: a fault answers "maybe" and points inner
// at slow, which checks off, set by then, before it reads. The overlay's
// mutex, which slow's lookups may take, is released by a deferred unlock,
// which a fault's unwinding runs. Without the option, show stores into
// the front directly.
//
// (The guard is written out in has and hasHash rather than through
// guardLookup: a closure and two calls fewer took a guarded Bloom lookup
// from 45-48 to 38-41 ns, against 15-19 unguarded, in
// BenchmarkLookupGuarded.)
type lookupGuard[E any, P frontOf[E]] struct {
	b       *filterBase
	front   *atomic.Pointer[E] // the handle's front
	slow    *E                 // the handle's slow path
	guarded *E                 // nil without Options.GuardLookups
	inner   atomic.Pointer[E]
}

// init sets the guard up for b's handle whose front and slow path these
// are; slowFront makes a front of two lookup functions (bloom.SlowFront,
// for one).
func (g *lookupGuard[E, P]) init(b *filterBase, front *atomic.Pointer[E], slow *E, slowFront func(has func([]byte) bool, hasHash func(uint64) bool) *E) {
	g.b, g.front, g.slow = b, front, slow
	b.toSlow = g.showSlow
	if b.s.opts.GuardLookups {
		g.guarded = slowFront(g.has, g.hasHash)
	}
}

// show makes fr the front lookups take: directly, or, with
// Options.GuardLookups, as inner, which guarded's lookups call under the
// fault guard.
func (g *lookupGuard[E, P]) show(fr *E) {
	if g.guarded == nil {
		g.front.Store(fr)
		return
	}
	g.inner.Store(fr)
	g.front.Store(g.guarded)
}

// showSlow points the front at slow (see show).
func (g *lookupGuard[E, P]) showSlow() { g.show(g.slow) }

// has is guarded's Has.
func (g *lookupGuard[E, P]) has(key []byte) (ok bool) {
	defer g.b.recoverLookup(&ok, g.showSlow, debug.SetPanicOnFault(true))
	return P(g.inner.Load()).Has(key)
}

// hasHash is guarded's HasHash.
func (g *lookupGuard[E, P]) hasHash(h uint64) (ok bool) {
	defer g.b.recoverLookup(&ok, g.showSlow, debug.SetPanicOnFault(true))
	return P(g.inner.Load()).HasHash(h)
}
