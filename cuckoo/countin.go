package cuckoo

import "sync/atomic"

// CountHashIn is CountHash reading buckets through w (for example a store's
// overlay of changes not yet applied to the words; nil reads the filter's
// own). Callers serialize it
// with mutations through w. Like CountHash, it retries while moves overlap
// it, and returns CountUnknown (math.MaxUint64) if the move-sequence counter
// stays odd or moving for about 10 ms.
func (f *Filter) CountHashIn(w Words, h uint64) uint64 {
	if w == nil {
		w = f.own
	}
	i1, fp, i2 := f.locate(h)
	s := atomic.LoadUint64(f.seq)
	c := f.countIn(w.Load(i1), fp)
	if i2 != i1 {
		c += f.countIn(w.Load(i2), fp)
	}
	if f.stable(s) {
		return c
	}
	return f.countRetry(w, i1, fp, i2)
}

// CopiesFill reports whether h's two buckets, read through w, hold
// nothing but copies of h's fingerprint: an insert of h fails there
// however empty the rest of the filter is, and a chain must not grow a
// layer for it. It answers false if moves keep the count unknown.
func (f *Filter) CopiesFill(w Words, h uint64) bool {
	i1, _, i2 := f.locate(h)
	slots := uint64(f.g.BucketSize)
	if i2 != i1 {
		slots *= 2
	}
	n := f.CountHashIn(w, h)
	return n != CountUnknown && n >= slots
}
