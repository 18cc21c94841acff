//go:build !filterstore_testhooks

package store

import (
	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
)

// beforeLookupRead runs in every lookup after its first check that the
// filter is on and before it reads the filter's words. Built without the
// filterstore_testhooks tag it does nothing and compiles away; with it
// (lookuphook_testhooks.go) a test can close or drop the filter at that
// point, to check that the lookup still never answers "absent" for what it
// read from the placeholder pages that replaced the mapping.
func beforeLookupRead(*filterBase) {}

// beforeFrontRead is beforeLookupRead for a Bloom filter's front: it runs
// before a one-layer front reads (a slow front runs beforeLookupRead
// itself, after its first check).
func beforeFrontRead(*filterBase, *bloom.Front) {}

// beforeCountingFrontRead is beforeFrontRead for a counting filter's
// front.
func beforeCountingFrontRead(*filterBase, *bloom.CountingFront) {}

// beforeCuckooFrontRead is beforeFrontRead for a cuckoo filter's front.
func beforeCuckooFrontRead(*filterBase, *cuckoo.Front) {}
