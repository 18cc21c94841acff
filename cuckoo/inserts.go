package cuckoo

import (
	"unsafe"

	"github.com/filterstore/filterstore/internal/prefetch"
)

// InsertHashes inserts the hashes of hs in order, as a loop of InsertHash
// would (the same words, count and displacements after it), under one
// acquisition of the filter's mutex. The buckets of each batchSize keys
// are prefetched before the keys before them are inserted, so that their
// cache misses overlap instead of costing one after another: each
// insert's store is a locked instruction on amd64, which no later load
// may pass, so a loop of InsertHash waits out one miss per key. It stops
// at the first insert that fails and returns how many keys were inserted
// with that error (wrapping ErrFull); the keys after it are not tried.
func (f *Filter) InsertHashes(hs []uint64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ahead [2 * batchSize]unsafe.Pointer
	f.prefetchBuckets(hs, &ahead)
	for i := 0; i < len(hs); i += batchSize {
		end := min(i+batchSize, len(hs))
		if end < len(hs) {
			f.prefetchBuckets(hs[end:], &ahead)
		}
		for j := i; j < end; j++ {
			if err := f.InsertTo(f.own, hs[j], MaxIterations); err != nil {
				return j, err
			}
		}
	}
	return len(hs), nil
}

// prefetchBuckets prefetches both buckets of the first batchSize (at
// most) keys of hs.
func (f *Filter) prefetchBuckets(hs []uint64, ps *[2 * batchSize]unsafe.Pointer) {
	hs = hs[:min(len(hs), batchSize)]
	for j, h := range hs {
		i1, _, i2 := f.g.Locate(h)
		ps[2*j] = unsafe.Pointer(&f.words[i1])
		ps[2*j+1] = unsafe.Pointer(&f.words[i2])
	}
	prefetch.Lines(ps[:2*len(hs)])
}
