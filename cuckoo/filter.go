package cuckoo

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Words is word memory that a mutation reads and writes; the store
// implements it to capture after-images for its WAL and to defer applying
// them. Store must write the value atomically. Given a nil Words, the
// lookups (HasHashIn, CountHashIn) read the filter's own words, DeleteFrom
// deletes nothing and InsertTo fails with ErrInvalid.
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
	split    uint64 // g.Split(), for the lookups' inlined altIn
	lo, hi   uint64 // lowest / highest bit of each of the b lanes (SWAR match)

	// seq points to the move-sequence counter, odd while a displacement
	// is being applied; every displacement adds 2. Misses retry if it
	// moved (see the package doc). It is a private word, or the layer
	// file's shared word (ShareSeq); accessed only atomically.
	seq *uint64
	// stuck is an odd counter value that a lookup saw unchanged for a
	// whole maxRetryWait (a writer died in the middle of a move, or
	// stalls in one): while the counter holds it, lookups that miss give
	// the safe answer at once instead of waiting again (stuckAt).
	stuck atomic.Uint64
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
		var err error
		if words, err = heapWords(g); err != nil {
			return nil, err
		}
	} else if uint64(len(words)) != g.Buckets {
		return nil, fmt.Errorf("cuckoo: %w: len(words) must equal Buckets (%d), got %d", ErrInvalid, g.Buckets, len(words))
	}
	f := &Filter{g: g, words: words, own: ownWords(words), seq: new(uint64), split: g.Split()}
	fb := uint(g.FingerprintBits)
	f.slotMask = 1<<fb - 1
	for j := 0; j < g.BucketSize; j++ {
		f.lo |= 1 << (uint(j) * fb)
	}
	f.hi = f.lo << (fb - 1)
	f.rng.Store(g.Salt)
	return f, nil
}

// heapWords returns g.Buckets zeroed words, or an error wrapping
// ErrInvalid for a geometry too large for any slice (make panics with
// "len out of range"; one that fits the address space but not the memory
// still ends the process, as any allocation does).
func heapWords(g Geometry) (words []uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cuckoo: %w: %d buckets cannot be allocated in memory: %v", ErrInvalid, g.Buckets, r)
		}
	}()
	return make([]uint64, g.Buckets), nil
}

// ShareSeq makes the filter use *p as its move-sequence counter instead of
// its own: pass a layer file's Region.Seq so that lookups through any
// mapping of the file, in any process, retry instead of missing a
// fingerprint being moved. Call it before the filter is used concurrently;
// p must be 8-byte aligned. A filter that only reads (through a read-only
// mapping) never writes *p. ShareSeq panics if p is nil or misaligned.
func (f *Filter) ShareSeq(p *uint64) {
	if p == nil || uintptr(unsafe.Pointer(p))%8 != 0 {
		panic(fmt.Sprintf("cuckoo: ShareSeq: %p is not an 8-byte aligned word", p))
	}
	f.seq = p
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

// lowestEmpty returns the lowest bit of v's lowest empty slot (so that
// v | fp*lowestEmpty(v) fills that slot with fp), or 0 if every slot holds
// a fingerprint. It uses the SWAR zero-lane test of match: its lowest
// flagged lane is always a true zero lane.
func (f *Filter) lowestEmpty(v uint64) uint64 {
	z := (v - f.lo) &^ v & f.hi
	return (z & -z) >> (uint(f.g.FingerprintBits) - 1)
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

// Bounds of a lookup's retries while the move-sequence counter is odd or
// moving (see the package doc).
const (
	// clockRetries is how many retries a lookup makes before it reads the
	// clock: live moves end within a few, so the fast path reads no clock.
	clockRetries = 32
	// maxRetryWait bounds how long a lookup that misses keeps retrying
	// while the move-sequence counter stays odd or keeps moving, as it does
	// forever after a writer died in the middle of a move. The lookup then
	// answers safely: "maybe present", or an unknown count.
	maxRetryWait = 10 * time.Millisecond
)

// retrier paces a lookup's retries; its zero value is ready.
type retrier struct {
	n     int
	start time.Time // of the clock-read retries, once n > clockRetries
}

// again waits a little before a lookup re-reads the buckets, and reports
// whether it may: false once the counter has been odd or moving for
// maxRetryWait.
func (r *retrier) again() bool {
	r.n++
	if r.n > 16 {
		runtime.Gosched()
	}
	switch {
	case r.n <= clockRetries:
		return true
	case r.n == clockRetries+1:
		r.start = time.Now()
		return true
	}
	return time.Since(r.start) < maxRetryWait
}

// stable reports whether the counter read s before a lookup and still
// holds it after: no move overlapped the lookup.
func (f *Filter) stable(s uint64) bool {
	return s&1 == 0 && atomic.LoadUint64(f.seq) == s
}

// HasHash reports whether h may have been inserted (false means definitely
// not). Lock-free; safe during concurrent mutations, in this process or, with
// ShareSeq, another one. A miss that overlaps moves is retried; if the
// move-sequence counter stays odd or keeps moving for about 10 ms (a writer
// died in the middle of a move), HasHash answers true.
func (f *Filter) HasHash(h uint64) bool {
	var i1, fp, i2 uint64
	if f.g.Derivation != DeriveMix { // the common case, inline
		var z uint64
		i1, fp, z = f.g.mulParts(h)
		i2 = altIn(i1, z, f.g.Buckets, f.split)
	} else {
		i1, fp, i2 = f.g.locateMix(h)
	}
	s := atomic.LoadUint64(f.seq)
	// i2 is read only when i1 lacks fp. Loading both before comparing
	// either (so that a hit in i2 waits out one miss, not two) was tried:
	// against this form in one process (compare -pairs, seed 14) its hits
	// took 1.19x the time on the 16-core Xeon at 1e7 keys and 0.99x at
	// 1e8, and 0.95x and 0.97x on the 2-vCPU VM; misses did not move. The
	// likely reason, not measured: a loop of hits is bound by the loads
	// in flight, and the extra load per hit takes up room for them.
	if f.match(f.load(i1), fp) || f.match(f.load(i2), fp) {
		return true
	}
	if f.stable(s) {
		return false
	}
	return f.hasRetry(f.own, i1, fp, i2)
}

// Has reports whether key may have been inserted.
func (f *Filter) Has(key []byte) bool { return f.HasHash(Hash(key)) }

// HasHashIn is HasHash reading buckets through w (for example a store's
// overlay of changes not yet applied to the words; nil reads the
// filter's own). Like HasHash, it answers true if the move-sequence
// counter stays odd or moving for about 10 ms.
func (f *Filter) HasHashIn(w Words, h uint64) bool {
	if w == nil {
		w = f.own
	}
	var i1, fp, i2 uint64
	if f.g.Derivation != DeriveMix { // the common case, inline
		var z uint64
		i1, fp, z = f.g.mulParts(h)
		i2 = altIn(i1, z, f.g.Buckets, f.split)
	} else {
		i1, fp, i2 = f.g.locateMix(h)
	}
	s := atomic.LoadUint64(f.seq)
	if f.match(w.Load(i1), fp) || f.match(w.Load(i2), fp) {
		return true
	}
	if f.stable(s) {
		return false
	}
	return f.hasRetry(w, i1, fp, i2)
}

// hasRetry retries a lookup of fp in buckets i1 and i2, read through w,
// whose first attempt missed while moves were in progress. It is out of
// line, so that the lookups' fast path stays small.
func (f *Filter) hasRetry(w Words, i1, fp, i2 uint64) bool {
	first := atomic.LoadUint64(f.seq)
	if f.stuckAt(first) {
		return true // the safe answer, without waiting again
	}
	var r retrier
	for r.again() {
		s := atomic.LoadUint64(f.seq)
		if f.match(w.Load(i1), fp) || f.match(w.Load(i2), fp) {
			return true
		}
		if f.stable(s) {
			return false
		}
	}
	f.markStuck(first)
	return true // the safe answer: maybe present
}

// stuckAt reports whether s is an odd counter value that a lookup already
// waited out for maxRetryWait (see Filter.stuck).
func (f *Filter) stuckAt(s uint64) bool { return s&1 == 1 && f.stuck.Load() == s }

// markStuck records first, the counter when a lookup began retrying, as
// stuck if the counter still holds it after the whole wait: a move that
// lasts that long has stopped, and until the counter moves (the next
// writer's recovery, or the stalled one going on) lookups that miss give
// the safe answer at once. A counter that moved meanwhile is not stuck.
func (f *Filter) markStuck(first uint64) {
	if s := atomic.LoadUint64(f.seq); s&1 == 1 && s == first {
		f.stuck.Store(s)
	}
}

// CountUnknown (math.MaxUint64) is what CountHash and CountHashIn return
// when the move-sequence counter stayed odd or moving for about 10 ms (a
// writer died in the middle of a move): "unknown", not a count.
const CountUnknown = math.MaxUint64

// CountHash returns the number of slots in h's two buckets holding h's
// fingerprint (a bucket counted once when i1 == i2): at least the number of
// copies of h stored. Lock-free. If the move-sequence counter stays odd or
// moving for about 10 ms (a writer died in the middle of a move), it
// returns CountUnknown (math.MaxUint64).
func (f *Filter) CountHash(h uint64) uint64 {
	i1, fp, i2 := f.locate(h)
	s := atomic.LoadUint64(f.seq)
	c := f.countIn(f.load(i1), fp)
	if i2 != i1 {
		c += f.countIn(f.load(i2), fp)
	}
	if f.stable(s) {
		return c
	}
	return f.countRetry(f.own, i1, fp, i2)
}

// countRetry retries a count of fp in buckets i1 and i2, read through w,
// whose first attempt overlapped moves.
func (f *Filter) countRetry(w Words, i1, fp, i2 uint64) uint64 {
	first := atomic.LoadUint64(f.seq)
	if f.stuckAt(first) {
		return CountUnknown
	}
	var r retrier
	for r.again() {
		s := atomic.LoadUint64(f.seq)
		c := f.countIn(w.Load(i1), fp)
		if i2 != i1 {
			c += f.countIn(w.Load(i2), fp)
		}
		if f.stable(s) {
			return c
		}
	}
	f.markStuck(first)
	return CountUnknown
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
		used += uint64(f.g.UsedSlots(atomic.LoadUint64(&f.words[i])))
	}
	return float64(used) / float64(f.g.Slots())
}

// InsertHash inserts h into the filter's own words (see InsertTo), with
// MaxIterations, serialized by the filter's mutex.
func (f *Filter) InsertHash(h uint64) error {
	f.mu.Lock()
	err := f.InsertTo(f.own, h, MaxIterations)
	f.mu.Unlock()
	return err
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
	i1, fp, i2 := f.locate(h)
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
	f.beginMoves()
	for k, i := range idx {
		atomic.StoreUint64(&f.words[i], vals[k])
	}
	f.endMoves()
	return nil
}

// beginMoves makes the move-sequence counter odd: moves are in progress. A
// counter already odd was left so by a writer that died in the middle of a
// move; it is stepped twice, so that this writer's moves, and from then on
// every writer's, leave it even when stable.
func (f *Filter) beginMoves() {
	if atomic.AddUint64(f.seq, 1)&1 == 0 {
		atomic.AddUint64(f.seq, 1)
	}
}

// endMoves makes the move-sequence counter even: moves are done.
func (f *Filter) endMoves() { atomic.AddUint64(f.seq, 1) }
