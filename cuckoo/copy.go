package cuckoo

import "sync/atomic"

// CopyInto stores the words of f from index lo to hi that hold a
// fingerprint into dst's, one atomic store each, for a layer built in
// private memory and then published: dst must have f's geometry and hold
// no fingerprint in those words (a layer with no items), since a bucket
// of dst is overwritten, not merged. Lookups of dst may run meanwhile:
// they find a fingerprint once its bucket is stored. Nothing else may
// change dst until CopyInto returns. It moves neither count. Loaders give
// each goroutine a range of words.
func (f *Filter) CopyInto(dst *Filter, lo, hi uint64) {
	src, out := f.words[lo:hi], dst.words[lo:hi]
	for i, w := range src {
		if w != 0 {
			atomic.StoreUint64(&out[i], w)
		}
	}
}
