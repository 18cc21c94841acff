package cuckoo

// InsertHashes inserts the hashes of hs in order, as a loop of InsertHash
// would (the same words, count and displacements after it), under one
// acquisition of the filter's mutex. The buckets of each batchSize keys
// are prefetched (address, as for HasManyHash) before the keys before
// them are inserted, so that their cache misses overlap instead of
// costing one after another: each insert's store is a locked instruction
// on amd64, which no later load may pass, so a loop of InsertHash waits
// out one miss per key. It stops at the first insert that fails and
// returns how many keys were inserted with that error (wrapping ErrFull);
// the keys after it are not tried.
func (f *Filter) InsertHashes(hs []uint64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.insertHashes(hs, false)
}

// insertHashes is InsertHashes with f.mu held. With owned set it
// inserts with InsertHashOwned's plain writes, for a filter nothing else
// reads or changes meanwhile (Build's on one goroutine): the same words,
// count and moves.
func (f *Filter) insertHashes(hs []uint64, owned bool) (int, error) {
	var ahead batch
	f.address(hs, &ahead)
	for i := 0; i < len(hs); i += batchSize {
		end := min(i+batchSize, len(hs))
		if end < len(hs) {
			f.address(hs[end:], &ahead)
		}
		for j := i; j < end; j++ {
			var err error
			if owned {
				err = f.InsertHashOwned(hs[j])
			} else {
				err = f.InsertTo(f.own, hs[j], MaxIterations)
			}
			if err != nil {
				return j, err
			}
		}
	}
	return len(hs), nil
}
