//go:build filterstore_testhooks

package store

import (
	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
)

// lookupReadHook, if set, is called by beforeLookupRead. Tests set it
// before the lookups they run and clear it after; it is not synchronized.
var lookupReadHook func(b *filterBase)

// beforeLookupRead runs in every lookup after its first check that the
// filter is on and before it reads the filter's words; in this build it
// calls lookupReadHook.
func beforeLookupRead(b *filterBase) {
	if h := lookupReadHook; h != nil {
		h(b)
	}
}

// beforeFrontRead is beforeLookupRead for a Bloom filter's front: it runs
// before a one-layer front reads (a slow front runs beforeLookupRead
// itself, after its first check).
func beforeFrontRead(b *filterBase, g *bloom.Front) {
	if g.Filter() != nil {
		beforeLookupRead(b)
	}
}

// beforeCountingFrontRead is beforeFrontRead for a counting filter's
// front.
func beforeCountingFrontRead(b *filterBase, g *bloom.CountingFront) {
	if g.Counting() != nil {
		beforeLookupRead(b)
	}
}

// beforeCuckooFrontRead is beforeFrontRead for a cuckoo filter's front.
func beforeCuckooFrontRead(b *filterBase, g *cuckoo.Front) {
	if g.Filter() != nil {
		beforeLookupRead(b)
	}
}
