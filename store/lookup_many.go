package store

// Batched lookups (HasMany and its variants) of Bloom, Cuckoo and
// Counting: keys are hashed in chunks of manyChunk on the stack, and each
// chunk is answered by the layers' own batched lookups, which prefetch
// the words of many keys before they read any (bloom.Filter.HasManyHash,
// cuckoo.Filter.HasManyHash, bloom.Counting.HasManyHash). With room in
// dst nothing is allocated.

// The chunk loops are written out per filter type, and the layers' types
// are concrete: a chunk function passed as a value, or a generic layer
// type, makes the compiler move the stack arrays handed to it to the heap.

// pending holds the lookups of a chunk that no layer answered yet, for
// filters of several layers asked newest first, each only about the keys
// no newer layer had (as HasHash asks them).
type pending struct {
	hs  [manyChunk]uint64 // hashes still unanswered, hs[:n]
	idx [manyChunk]uint16 // their positions in the chunk
	res [manyChunk]bool   // a layer's answers for hs[:n]
	n   int
}

// start makes every lookup of hs, len(hs) <= manyChunk, pending and
// clears out.
func (p *pending) start(hs []uint64, out []bool) {
	p.n = copy(p.hs[:], hs)
	for j := range p.n {
		p.idx[j] = uint16(j)
	}
	clear(out)
}

// settle records a layer's answers res[:n]: each hit goes to out and
// leaves the pending lookups.
func (p *pending) settle(out []bool) {
	m := 0
	for j, ok := range p.res[:p.n] {
		if ok {
			out[p.idx[j]] = true
			continue
		}
		p.hs[m], p.idx[m] = p.hs[j], p.idx[j]
		m++
	}
	p.n = m
}

// allTrue sets every answer of out to true: what a closed, dropped, broken
// or incomplete filter answers.
func allTrue(out []bool) {
	for i := range out {
		out[i] = true
	}
}
