package store

import "math/bits"

// sparseIndex numbers a fixed, sparse set of indices (words or blocks of a
// layer) 0..n-1 in increasing order, so that values kept for them can live
// in a plain slice: a read-only store's overlay, built once at Open and
// read by every lookup after. A lookup reads a bit of a small top-level
// set (one bit per chunk of 512 indices), then, where that is set, the
// chunk's 512-bit mask: no hashing, and an index in no noted chunk costs
// one read of a set that stays in cache (a map lookup cost a hash and two
// cache misses, and most lookups of a filter are of absent keys).
type sparseIndex struct {
	top   []uint64      // bit c: chunk c (indices c*chunkSpan...) holds some
	ranks []uint32      // chunks set in top before word w of it
	masks []sparseChunk // one per chunk set, in order
}

// chunkSpan is how many consecutive indices one chunk's mask covers.
const chunkSpan = 512

// sparseChunk is one chunk's set indices: bit j of words[j/64] for index
// chunk*chunkSpan+j, and the number of the first index of each word.
type sparseChunk struct {
	words [chunkSpan / 64]uint64
	first [chunkSpan / 64]uint32
}

// newSparseIndex indexes idx, increasing and without duplicates: idx[n]
// gets number n.
func newSparseIndex(idx []uint64) sparseIndex {
	if len(idx) == 0 {
		return sparseIndex{}
	}
	chunks := idx[len(idx)-1]/chunkSpan + 1
	x := sparseIndex{top: make([]uint64, (chunks+63)/64)}
	for n, i := range idx {
		c := i / chunkSpan
		if x.top[c/64]&(1<<(c%64)) == 0 {
			x.top[c/64] |= 1 << (c % 64)
			x.masks = append(x.masks, sparseChunk{})
		}
		m := &x.masks[len(x.masks)-1]
		j := i % chunkSpan
		if m.words[j/64] == 0 {
			m.first[j/64] = uint32(n)
		}
		m.words[j/64] |= 1 << (j % 64)
	}
	x.ranks = make([]uint32, len(x.top))
	r := uint32(0)
	for w, t := range x.top {
		x.ranks[w] = r
		r += uint32(bits.OnesCount64(t))
	}
	return x
}

// find returns the number of index i, if the set holds it.
func (x *sparseIndex) find(i uint64) (int, bool) {
	c := i / chunkSpan
	if c/64 >= uint64(len(x.top)) {
		return 0, false
	}
	t, bit := x.top[c/64], uint64(1)<<(c%64)
	if t&bit == 0 {
		return 0, false
	}
	m := &x.masks[x.ranks[c/64]+uint32(bits.OnesCount64(t&(bit-1)))]
	j := i % chunkSpan
	w, b := m.words[j/64], uint64(1)<<(j%64)
	if w&b == 0 {
		return 0, false
	}
	return int(m.first[j/64]) + bits.OnesCount64(w&(b-1)), true
}

// anyIn reports whether the set holds an index in [lo, lo+n), a run that
// lies within one aligned word of 64 indices (lo%64+n <= 64, n >= 1).
func (x *sparseIndex) anyIn(lo, n uint64) bool {
	c := lo / chunkSpan
	if c/64 >= uint64(len(x.top)) {
		return false
	}
	t, bit := x.top[c/64], uint64(1)<<(c%64)
	if t&bit == 0 {
		return false
	}
	m := &x.masks[x.ranks[c/64]+uint32(bits.OnesCount64(t&(bit-1)))]
	j := lo % chunkSpan
	run := ^uint64(0) >> (64 - n) << (j % 64)
	return m.words[j/64]&run != 0
}
