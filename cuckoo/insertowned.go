package cuckoo

import "github.com/filterstore/filterstore/internal/owned"

// InsertOwned is Insert for a filter that one goroutine owns while it
// runs: no other goroutine calls any method of the filter (InsertOwned
// included) or reads its words (through Words, a chain's layers, or
// another mapping of them, such as another process's through ShareSeq)
// from the call's start to its end, and the filter passes between
// goroutines only through a synchronizing operation (a channel, a mutex,
// a WaitGroup). It takes no lock and stores with plain writes, as
// panmari's and linvon's filters do (their inserts are not safe for
// concurrent use either): the insert for a filter one goroutine fills
// before it is shared. Breaking the contract is a data race, which the
// race detector reports.
//
// Insert takes the filter's mutex and stores atomically; on amd64 each of
// those is a locked instruction, which no later load may pass, so a loop
// of Inserts waits out each insert's cache miss in turn, where a loop of
// InsertOwned overlaps them. On a 16-core Xeon, filling a table of
// panmari's size (bench's compare at 1e7 keys, medians of 3 rounds),
// Insert took 1.53x panmari's time per key and InsertOwned 1.03x. The
// filter's words, count and displacements after it are those Insert
// would leave.
func (f *Filter) InsertOwned(key []byte) error { return f.InsertHashOwned(Hash(key)) }

// InsertHashOwned is InsertOwned for a key whose Hash is h.
func (f *Filter) InsertHashOwned(h uint64) error {
	i1, fp := f.g.primary(h)
	if f.putOwned(i1, fp) {
		owned.Inc(&f.count)
		return nil
	}
	i2 := f.alt(i1, fp)
	if f.putOwned(i2, fp) {
		owned.Inc(&f.count)
		return nil
	}
	// Both buckets full: the displacement search, as InsertTo runs it
	// (rare until the table is most of the way full, and dear enough
	// that its atomic stores do not matter).
	if err := f.displace(f.own, i1, i2, fp, MaxIterations); err != nil {
		return err
	}
	owned.Inc(&f.count)
	return nil
}

// putOwned is ownWords.putEmpty with plain accesses.
func (f *Filter) putOwned(i, fp uint64) bool {
	p := &f.words[i]
	v := *p
	z := f.lowestEmpty(v)
	if z == 0 {
		return false
	}
	*p = v | fp*z
	return true
}
