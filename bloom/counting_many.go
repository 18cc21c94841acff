package bloom

import "unsafe"

// AddHashes adds the keys of hs in order, as a loop of AddHash would (the
// same words and Items after it), under one acquisition of the filter's
// mutex. The blocks of each batchSize keys are prefetched before the keys
// before them are added, so that their cache misses overlap instead of
// costing one after another: each add's stores are locked instructions on
// amd64, which no later load may pass, so a loop of AddHash waits out one
// miss per key.
func (c *Counting) AddHashes(hs []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addUncounted(hs)
	c.items.Add(uint64(len(hs)))
}

// addUncounted is AddHashes without the mutex and without counting the
// items: a NewCountingBuilder lane's adds, which own their blocks.
func (c *Counting) addUncounted(hs []uint64) {
	var blks [batchSize]unsafe.Pointer
	var draws, states [batchSize]uint64
	address(&c.g, c.words, hs[:min(batchSize, len(hs))], &blks, &draws, &states)
	for i := 0; i < len(hs); i += batchSize {
		end := min(i+batchSize, len(hs))
		if end < len(hs) {
			address(&c.g, c.words, hs[end:min(end+batchSize, len(hs))], &blks, &draws, &states)
		}
		for _, h := range hs[i:end] {
			c.addWords(c.own, h)
		}
	}
}
