package cuckoo

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Words is word memory that a mutation reads and writes; the store
// implements it to capture after-images for its WAL and to defer applying
// them. Store must write the value atomically.
type Words interface {
	Load(i uint64) uint64
	Store(i, v uint64)
}

// ownWords is the Words of a filter's own slice.
type ownWords []uint64

func (w ownWords) Load(i uint64) uint64 { return atomic.LoadUint64(&w[i]) }
func (w ownWords) Store(i, v uint64)    { atomic.StoreUint64(&w[i], v) }

// Filter is one cuckoo filter layer over a slice of words, one word per
// bucket (see the package doc for the layout). Lookups are lock-free;
// mutations must be serialized (the plain methods take a mutex).
type Filter struct {
	g     Geometry
	words []uint64 // len(words) == g.Buckets; accessed only atomically
	own   Words    // ownWords(words)

	slotMask uint64 // 1<<f - 1
	lo, hi   uint64 // lowest / highest bit of each of the b lanes (SWAR match)

	// seq is odd while a displacement is being applied; every
	// displacement adds 2. Misses retry if it moved (see the package doc).
	seq   atomic.Uint64
	count atomic.Uint64 // items: successful inserts - successful deletes
	rng   atomic.Uint64 // counter state of the slot-order PRNG
	moves atomic.Uint64 // fingerprints relocated by displacements

	mu sync.Mutex // serializes the plain mutations
}

// New returns a filter of geometry g over words, which must have exactly
// g.Words() elements (nil allocates zeroed words). Existing contents are
// used as they are: the count starts at 0 (see SetCount).
func New(g Geometry, words []uint64) (*Filter, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if words == nil {
		words = make([]uint64, g.Buckets)
	} else if uint64(len(words)) != g.Buckets {
		return nil, fmt.Errorf("cuckoo: %w: len(words) must equal Buckets (%d), got %d", ErrInvalid, g.Buckets, len(words))
	}
	f := &Filter{g: g, words: words, own: ownWords(words)}
	fb := uint(g.FingerprintBits)
	f.slotMask = 1<<fb - 1
	for j := 0; j < g.BucketSize; j++ {
		f.lo |= 1 << (uint(j) * fb)
	}
	f.hi = f.lo << (fb - 1)
	f.rng.Store(g.Salt)
	return f, nil
}

// Geometry returns the filter's geometry.
func (f *Filter) Geometry() Geometry { return f.g }

// Words returns the filter's word slice (shared, not a copy). Read it only
// with atomic loads while the filter is in use.
func (f *Filter) Words() []uint64 { return f.words }

// slot returns the fingerprint in slot j of bucket word v.
func (f *Filter) slot(v uint64, j int) uint64 {
	return v >> (uint(j) * uint(f.g.FingerprintBits)) & f.slotMask
}

// setSlot returns v with slot j set to fp.
func (f *Filter) setSlot(v uint64, j int, fp uint64) uint64 {
	sh := uint(j) * uint(f.g.FingerprintBits)
	return v&^(f.slotMask<<sh) | fp<<sh
}

// match reports whether some slot of v holds fp (SWAR zero-lane test on
// v ^ broadcast(fp); exact, since borrows only propagate above a zero lane).
func (f *Filter) match(v, fp uint64) bool {
	x := v ^ fp*f.lo
	return (x-f.lo)&^x&f.hi != 0
}

// emptySlot returns the lowest empty slot of v, or -1.
func (f *Filter) emptySlot(v uint64) int {
	for j := 0; j < f.g.BucketSize; j++ {
		if f.slot(v, j) == 0 {
			return j
		}
	}
	return -1
}

// countIn returns the number of slots of v holding fp.
func (f *Filter) countIn(v, fp uint64) uint64 {
	var n uint64
	for j := 0; j < f.g.BucketSize; j++ {
		if f.slot(v, j) == fp {
			n++
		}
	}
	return n
}

func (f *Filter) load(i uint64) uint64 { return atomic.LoadUint64(&f.words[i]) }

// retry waits a little before a lookup re-reads the buckets.
func retry(n int) {
	if n > 16 {
		runtime.Gosched()
	}
}

// HasHash reports whether h may have been inserted (false means definitely
// not). Lock-free; safe during concurrent mutations.
func (f *Filter) HasHash(h uint64) bool {
	i1, fp, i2 := f.g.Locate(h)
	for n := 0; ; n++ {
		s := f.seq.Load()
		if f.match(f.load(i1), fp) || f.match(f.load(i2), fp) {
			return true
		}
		if s&1 == 0 && f.seq.Load() == s {
			return false
		}
		retry(n)
	}
}

// Has reports whether key may have been inserted.
func (f *Filter) Has(key []byte) bool { return f.HasHash(Hash(key)) }

// HasHashIn is HasHash reading buckets through w (for example a store's
// overlay of changes not yet applied to the words).
func (f *Filter) HasHashIn(w Words, h uint64) bool {
	i1, fp, i2 := f.g.Locate(h)
	for n := 0; ; n++ {
		s := f.seq.Load()
		if f.match(w.Load(i1), fp) || f.match(w.Load(i2), fp) {
			return true
		}
		if s&1 == 0 && f.seq.Load() == s {
			return false
		}
		retry(n)
	}
}

// CountHash returns the number of slots in h's two buckets holding h's
// fingerprint (a bucket counted once when i1 == i2): at least the number of
// copies of h stored. Lock-free.
func (f *Filter) CountHash(h uint64) uint64 {
	i1, fp, i2 := f.g.Locate(h)
	for n := 0; ; n++ {
		s := f.seq.Load()
		c := f.countIn(f.load(i1), fp)
		if i2 != i1 {
			c += f.countIn(f.load(i2), fp)
		}
		if s&1 == 0 && f.seq.Load() == s {
			return c
		}
		retry(n)
	}
}

// CountKey returns CountHash(Hash(key)).
func (f *Filter) CountKey(key []byte) uint64 { return f.CountHash(Hash(key)) }

// Count returns the number of items: successful inserts minus successful
// deletes since New or the last SetCount.
func (f *Filter) Count() uint64 { return f.count.Load() }

// SetCount sets the item count (the store restores it after reopening).
func (f *Filter) SetCount(n uint64) { f.count.Store(n) }

// Occupancy returns the fraction of slots holding a fingerprint, by scanning
// every word.
func (f *Filter) Occupancy() float64 {
	var used uint64
	for i := range f.words {
		v := atomic.LoadUint64(&f.words[i])
		for j := 0; j < f.g.BucketSize; j++ {
			if f.slot(v, j) != 0 {
				used++
			}
		}
	}
	return float64(used) / float64(f.g.Slots())
}

// InsertHash inserts h into the filter's own words (see InsertTo), with
// MaxIterations, serialized by the filter's mutex.
func (f *Filter) InsertHash(h uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.InsertTo(f.own, h, MaxIterations)
}

// Insert inserts key; see InsertHash.
func (f *Filter) Insert(key []byte) error { return f.InsertHash(Hash(key)) }

// DeleteHash removes one copy of h's fingerprint from the filter's own
// words (see DeleteFrom), serialized by the filter's mutex.
func (f *Filter) DeleteHash(h uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.DeleteFrom(f.own, h)
}

// Delete removes one copy of key; see DeleteHash.
func (f *Filter) Delete(key []byte) bool { return f.DeleteHash(Hash(key)) }

// DeleteFrom removes one copy of h's fingerprint, from bucket i1 if it holds
// one, else from i2, reading and writing through w. It reports whether a
// copy was found. Delete only hashes that were inserted (see the package
// doc). Callers serialize mutations.
func (f *Filter) DeleteFrom(w Words, h uint64) bool {
	if w == nil {
		return false
	}
	i1, fp, i2 := f.g.Locate(h)
	for _, i := range [2]uint64{i1, i2} {
		v := w.Load(i)
		for j := 0; j < f.g.BucketSize; j++ {
			if f.slot(v, j) == fp {
				w.Store(i, f.setSlot(v, j, 0))
				f.decCount()
				return true
			}
		}
	}
	return false
}

func (f *Filter) decCount() {
	for {
		c := f.count.Load()
		if c == 0 || f.count.CompareAndSwap(c, c-1) {
			return
		}
	}
}

// Apply writes words captured from InsertTo or DeleteFrom through another
// Words (idx[k] gets vals[k]) into the filter's own words, bracketed by the
// displacement sequence counter so that concurrent lookups retry rather than
// miss a fingerprint whose move is half applied. Serialize with mutations.
func (f *Filter) Apply(idx, vals []uint64) error {
	if len(idx) != len(vals) {
		return fmt.Errorf("cuckoo: %w: len(idx) %d != len(vals) %d", ErrInvalid, len(idx), len(vals))
	}
	for k, i := range idx {
		if i >= f.g.Buckets {
			return fmt.Errorf("cuckoo: %w: idx[%d] = %d must be < Buckets %d", ErrInvalid, k, i, f.g.Buckets)
		}
	}
	f.seq.Add(1)
	for k, i := range idx {
		atomic.StoreUint64(&f.words[i], vals[k])
	}
	f.seq.Add(1)
	return nil
}
