package cuckoo

// CountHashIn is CountHash reading buckets through w (for example a store's
// overlay of changes not yet applied to the words). Callers serialize it
// with mutations through w.
func (f *Filter) CountHashIn(w Words, h uint64) uint64 {
	i1, fp, i2 := f.g.Locate(h)
	c := f.countIn(w.Load(i1), fp)
	if i2 != i1 {
		c += f.countIn(w.Load(i2), fp)
	}
	return c
}
