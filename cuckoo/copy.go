package cuckoo

import (
	"fmt"
	"sync/atomic"
)

// CopyInto stores the words of f from index lo to hi that hold a
// fingerprint into dst's, for a layer built in private memory and then
// published: dst must have f's geometry. Each word goes in with one
// compare-and-swap against an empty bucket, so a bucket of dst that holds
// a fingerprint already is never overwritten: CopyInto leaves it and
// returns its index among busy, for MergeBucket. (A loader publishes over
// a layer its count says is empty; a count that is wrong, such as one
// from a catalog older than the layer file, must not cost the layer's
// fingerprints.) Lookups of dst may run meanwhile: they find a
// fingerprint once its bucket is stored. Nothing else may change dst
// until CopyInto returns. It moves neither count. Loaders give each
// goroutine a range of words.
func (f *Filter) CopyInto(dst *Filter, lo, hi uint64) (busy []uint64) {
	src, out := f.words[lo:hi], dst.words[lo:hi]
	for i, w := range src {
		// The compare-and-swap costs what the atomic store it replaced
		// did (both are one locked instruction on amd64).
		if w != 0 && !atomic.CompareAndSwapUint64(&out[i], 0, w) {
			busy = append(busy, lo+uint64(i))
		}
	}
	return busy
}

// MergeBucket inserts every fingerprint of f's bucket i into dst, which
// has f's geometry, as InsertTo would a key of that fingerprint whose
// first bucket is i (into i or its alternate bucket, with displacements if
// both are full): for the buckets CopyInto found busy. It returns how
// many it inserted; once one finds no free slot it stops with an error
// wrapping ErrFull. It moves neither count (the loader adds f's count to
// dst's). Lookups of dst may run meanwhile; dst's other mutations must be
// serialized with it, and f must not change.
func (f *Filter) MergeBucket(dst *Filter, i uint64) (int, error) {
	if i >= f.g.Buckets || f.g != dst.g {
		return 0, fmt.Errorf("cuckoo: MergeBucket: %w: bucket %d of %d, geometries %+v and %+v", ErrInvalid, i, f.g.Buckets, f.g, dst.g)
	}
	v := f.load(i)
	n := 0
	for j := range f.g.BucketSize {
		fp := f.slot(v, j)
		if fp == 0 {
			continue
		}
		i2 := dst.alt(i, fp)
		if !dst.putEmpty(dst.own, i, fp) && !dst.putEmpty(dst.own, i2, fp) {
			if err := dst.displace(dst.own, i, i2, fp, MaxIterations); err != nil {
				return n, err
			}
		}
		n++
	}
	return n, nil
}
