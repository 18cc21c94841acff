package store

import (
	"fmt"
	"math"
	"runtime/debug"
	"sync/atomic"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// Counting is a persistent counting Bloom filter (4-bit saturating
// counters, blocked like Bloom): one layer, keys can be deleted. Changes are
// logged as after-images and reach the file only once durable. A nil or
// zero Counting (one no Store call returned) answers HasMany and its
// variants "maybe present", Count math.MaxUint64 and Items 0, and its
// other methods return an error wrapping ErrInvalid that names it, except
// Has and HasHash, which panic as a
// method of a nil pointer does (see the package doc).
type Counting struct {
	b *filterBase
	c *bloom.Counting
	// front is what Has and HasHash call (see setFront): the counters'
	// own lookup, or slow, the lookup through a read-only or SyncInterval
	// overlay.
	front atomic.Pointer[bloom.CountingFront]
	slow  *bloom.CountingFront
	guard lookupGuard[bloom.CountingFront, *bloom.CountingFront] // the front under Options.GuardLookups
}

// base returns the handle's filterBase: for a nil or zero handle, the
// stand-in nilCounting.
func (f *Counting) base() *filterBase {
	if f == nil || f.b == nil {
		return nilCounting
	}
	return f.b
}

// CreateCounting creates a counting Bloom filter. Zero config fields take
// defaults; Expansion is ignored (one layer). Adds beyond Capacity fail
// with ErrFull if NonScaling is set; otherwise they succeed while the
// false-positive rate rises past ErrorRate (see Info).
func (s *Store) CreateCounting(name string, cfg BloomConfig) (*Counting, error) {
	bc := cfg.withDefaults()
	g, err := bloom.PlanCounting(bc.Capacity, bc.ErrorRate)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	pages, err := layerPages(g.Words(), 0, fmt.Sprintf("capacity %d at error rate %v", bc.Capacity, bc.ErrorRate))
	if err != nil {
		return nil, err
	}
	l := format.LayerMeta{Capacity: bc.Capacity, ErrorRate: bc.ErrorRate, Size: g.Blocks, K: g.K, Salt: g.Salt,
		DataPages: pages, Derivation: uint32(g.Derivation)}
	m := &format.FilterMeta{Kind: mmapbits.KindCounting, Capacity: bc.Capacity, ErrorRate: bc.ErrorRate,
		NonScaling: bc.NonScaling, Layers: []format.LayerMeta{l}}
	h, err := s.create(name, m, func(b *filterBase) (handle, error) { return newCounting(b) })
	if err != nil {
		return nil, err
	}
	return h.(*Counting), nil
}

// Counting returns the counting Bloom filter called name.
func (s *Store) Counting(name string) (*Counting, error) {
	h, err := s.lookup(name, mmapbits.KindCounting)
	if err != nil {
		return nil, err
	}
	return h.(*Counting), nil
}

func newCounting(b *filterBase) (*Counting, error) {
	if len(b.meta.Layers) != 1 {
		return nil, fmt.Errorf("counting filter has %d layers, want 1", len(b.meta.Layers))
	}
	l := b.meta.Layers[0]
	g := bloomGeometry(l)
	w := b.regions[0].Words()
	if uint64(len(w)) < g.Words() {
		return nil, fmt.Errorf("layer has %d words, geometry needs %d", len(w), g.Words())
	}
	c, err := bloom.NewCounting(g, w[:g.Words()])
	if err != nil {
		return nil, err
	}
	c.SetItems(l.Items)
	f := &Counting{b: b, c: c}
	f.slow = bloom.SlowCountingFront(f.hasSlow, f.hasHashSlow)
	f.guard.init(b, &f.front, f.slow, bloom.SlowCountingFront)
	f.setFront()
	b.items = func() []uint64 { return []uint64{c.Items()} }
	b.applyWrites = func(layer int, ws []format.WordWrite) error {
		words := c.Words()
		for _, w := range ws {
			if layer != 0 || w.Index >= uint64(len(words)) {
				return fmt.Errorf("word %d of layer %d is outside the filter (%d words, 1 layer)", w.Index, layer, len(words))
			}
			atomic.StoreUint64(&words[w.Index], w.Value)
		}
		return nil
	}
	return f, nil
}

func (f *Counting) replay(r format.WALRecord) error {
	if r.Op != format.WALOpWords {
		return fmt.Errorf("store: %w: counting filter %q got a hash record", ErrCorrupt, f.b.name())
	}
	if err := f.b.replayWrites(r); err != nil {
		return err
	}
	f.count(r)
	return nil
}

func (f *Counting) count(r format.WALRecord) {
	if f.c != nil {
		f.c.SetItems(addDelta(f.c.Items(), int64(r.Delta)))
	}
}

// Add increments key's counters.
func (f *Counting) Add(key []byte) error { return f.AddHash(Hash(key)) }

// AddHash is Add for a hashed key.
func (f *Counting) AddHash(h uint64) error {
	return f.mutate(func(t *wordTx) (int8, bool, error) {
		if f.b.meta.NonScaling && f.c.Items() >= f.b.meta.Capacity {
			return 0, false, fmt.Errorf("store: counting filter %q holds its capacity of %d: %w", f.b.name(), f.b.meta.Capacity, ErrFull)
		}
		f.c.AddTo(t, h)
		return 1, true, nil
	})
}

// AddMany adds every key, in order, as Add would one after another,
// logging them in one WAL record and waiting once for durability. It
// returns how many keys it added: it stops at the first key it cannot add
// (ErrFull, for a NonScaling filter at capacity) and returns that error,
// and the keys before it are added and durable. A count of 0 with an
// error wrapping ErrFailed, ErrClosed, ErrCorrupt or ErrIncomplete
// acknowledges nothing.
func (f *Counting) AddMany(keys [][]byte) (int, error) { return f.AddManyHash(hashAll(keys)) }

// AddManyHash is AddMany for hashed keys.
func (f *Counting) AddManyHash(hs []uint64) (int, error) {
	res, err := applyMany(f, batchCountingAdd, hs)
	return len(res), err
}

// DeleteMany deletes every key, in order, as Delete would one after
// another, logging the deletes in one WAL record and waiting once for
// durability. results[i] is Delete's answer for key i: whether it
// decremented. On an error (the filter cannot be changed, or the store
// fails: ErrFailed) results is nil and nothing is acknowledged.
func (f *Counting) DeleteMany(keys [][]byte) ([]bool, error) {
	return f.DeleteManyHash(hashAll(keys))
}

// DeleteManyHash is DeleteMany for hashed keys.
func (f *Counting) DeleteManyHash(hs []uint64) ([]bool, error) {
	return applyMany(f, batchCountingDelete, hs)
}

// Delete decrements key's counters if all are above zero and reports
// whether it did. Delete only keys that were added.
func (f *Counting) Delete(key []byte) (bool, error) { return f.DeleteHash(Hash(key)) }

// DeleteHash is Delete for a hashed key.
func (f *Counting) DeleteHash(h uint64) (bool, error) {
	var done bool
	err := f.mutate(func(t *wordTx) (int8, bool, error) {
		done = f.c.DeleteFrom(t, h)
		return -1, done, nil
	})
	return done, err
}

// mutate plans a change with fn under the filter's mutex, logs it and
// waits until it is durable and applied.
func (f *Counting) mutate(fn func(t *wordTx) (delta int8, log bool, err error)) error {
	b := f.base()
	if err := b.lock(); err != nil {
		return err
	}
	defer b.end()
	t := b.tx(0)
	delta, log, err := f.plan(fn, t)
	if err != nil || !log {
		lsn := b.lastLSN
		b.mu.Unlock()
		if err != nil {
			return err
		}
		return b.settleNoop(lsn)
	}
	lsn, err := b.logWords(t, delta)
	b.mu.Unlock()
	if err != nil {
		return err
	}
	return b.settle(lsn)
}

// plan runs fn, mutate's planning, on t under the fault guard of changes
// (recoverChange). Called with b.mu held.
func (f *Counting) plan(fn func(t *wordTx) (int8, bool, error), t *wordTx) (delta int8, log bool, err error) {
	defer f.b.recoverChange(&err, debug.SetPanicOnFault(true))
	return fn(t)
}

// Count returns the smallest of key's counters: at least the number of
// times key was added and not deleted, unless a counter saturated at 15.
// A closed, dropped, broken or incomplete filter answers math.MaxUint64:
// unknown, never "absent".
func (f *Counting) Count(key []byte) uint64 { return f.CountHash(Hash(key)) }

// CountHash is Count for a hashed key.
func (f *Counting) CountHash(h uint64) uint64 {
	// Written out for each kind (a shared body calling lookupCount
	// through a func value took a cuckoo Count from 49-50 to 55-75 ns).
	b := f.base()
	if b.off.Load() {
		return math.MaxUint64
	}
	beforeLookupRead(b)
	var n uint64
	if b.s.opts.GuardLookups {
		n = countGuarded(b, h, f.lookupCount, f.guard.showSlow)
	} else {
		n = f.lookupCount(h)
	}
	if b.off.Load() {
		return math.MaxUint64 // closed or dropped while reading: see countGuarded
	}
	return n
}

// countGuarded is a counting or cuckoo filter b's count of h, count(h),
// under Options.GuardLookups: its reads run under the fault guard, and a
// fault answers "maybe" (math.MaxUint64, as a filter that is off does)
// and turns the filter's lookups off, as a guarded Has does
// (recoverLookup); count's locked reads (through the overlay) release the
// mutex by a deferred unlock, which the fault's unwinding runs. slow is
// the handle's showSlow. (A filter closed or dropped while count read
// may have read a closed mapping's placeholder, or another file's mapping
// that reuses its addresses (mmapbits): any count at all, which
// CountHash, checking off again after, does not answer.)
func countGuarded(b *filterBase, h uint64, count func(uint64) uint64, slow func()) (n uint64) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			addr, _ := faultOf(r)
			n = math.MaxUint64
			b.lookupFaulted(addr, slow)
		}
	}()
	return count(h)
}

// lookupCount is CountHash on a usable filter.
func (f *Counting) lookupCount(h uint64) uint64 {
	b := f.b
	switch {
	case b.ro != nil:
		// Counters do not move: the overlay's words as of Open, the
		// live file for the others (see readonly.go). A block the
		// records did not change is read from the live file alone,
		// without an index lookup per counter.
		if v := b.ro.view(0); v.notedBlock(f.c.BlockOf(h)) {
			return f.c.CountFrom(v, h)
		}
		return f.c.CountHash(h)
	case b.ov.size.Load() > 0 && b.s.opts.Sync == SyncInterval:
		b.mu.Lock()
		defer b.mu.Unlock()
		return f.c.CountFrom(b.view(0), h)
	}
	return f.c.CountHash(h)
}

// setFront points front at the counters' own lookup if lookups read no
// overlay (the filter is healthy, the store not read-only with WAL
// records for it, and its Sync not SyncInterval, whose acknowledged
// changes may wait in the overlay), and at slow otherwise. The fast front
// reads the counters and checks off only where one is zero, as the Bloom
// filter's does (see Bloom.setFront). Called before the handle is used,
// and by a read-only open once it gives the filter an overlay. (A
// read-only filter's lookups read the live counters of a block the
// records after the checkpoint did not change, and the overlay's of one
// they did, where a delete may have brought a counter down: lookupCount.)
func (f *Counting) setFront() {
	b := f.b
	if f.c != nil && b.ro == nil && b.broken == nil && b.s.opts.Sync != SyncInterval {
		f.guard.show(bloom.NewCountingFront(f.c, &b.off))
		return
	}
	f.guard.show(f.slow)
}

// Has reports whether key may be present: false means certainly not. A
// closed, dropped, broken or incomplete filter answers true.
func (f *Counting) Has(key []byte) bool {
	// Inlined into the caller, as Bloom.Has is: through a method that
	// checked off, hashed, called the counters' lookup and checked off
	// again, misses took 1.36x the counters' own lookup (a throwaway
	// comparison on a 1e7-key store filter, 15 interleaved rounds).
	g := f.front.Load()
	beforeCountingFrontRead(f.b, g)
	return g.Has(key)
}

// HasHash is Has for a hashed key.
func (f *Counting) HasHash(h uint64) bool {
	g := f.front.Load()
	beforeCountingFrontRead(f.b, g)
	return g.HasHash(h)
}

// hasSlow is slow's Has.
func (f *Counting) hasSlow(key []byte) bool { return f.hasHashSlow(Hash(key)) }

// hasHashSlow is slow's HasHash.
func (f *Counting) hasHashSlow(h uint64) bool {
	b := f.b
	if b.off.Load() {
		return true
	}
	beforeLookupRead(b)
	switch {
	case b.ro != nil:
		// A read-only store: the overlay's counters where the records
		// after the checkpoint changed the key's block (a delete may
		// have brought one down), the live ones elsewhere, as
		// lookupCount reads, but through HasHash, which stops at a zero
		// and reads the words without an interface call each.
		if v := b.ro.view(0); v.notedBlock(f.c.BlockOf(h)) {
			if f.c.CountFrom(v, h) > 0 {
				return true
			}
		} else if f.c.HasHash(h) {
			return true
		}
		return b.off.Load()
	case b.ov.size.Load() > 0 && b.s.opts.Sync == SyncInterval:
		// Through the writer's overlay, as lookupCount reads.
		return f.CountHash(h) > 0
	}
	// The mapped counters: bloom.Counting.HasHash stops at the first
	// two counters when either is zero, where a count reads all k.
	if f.c.HasHash(h) {
		return true
	}
	// Closed or dropped while reading: the zero may be a placeholder's.
	return b.off.Load()
}

// HasMany answers Has for every key. It allocates its result;
// HasManyInto reuses one.
func (f *Counting) HasMany(keys [][]byte) []bool { return f.HasManyInto(nil, keys) }

// HasManyInto is HasMany writing into dst, grown only if its capacity is
// below len(keys); it returns dst[:len(keys)] and, with room in dst,
// allocates nothing. Keys are looked up in batches whose blocks are
// prefetched before any is read (bloom.Counting.HasManyHash).
func (f *Counting) HasManyInto(dst []bool, keys [][]byte) []bool {
	dst = fitBools(dst, len(keys))
	var hs [manyChunk]uint64
	for i := 0; i < len(keys); i += manyChunk {
		n := min(manyChunk, len(keys)-i)
		for j := range n {
			hs[j] = Hash(keys[i+j])
		}
		f.hasManyChunk(hs[:n], dst[i:i+n])
	}
	return dst
}

// HasManyHash is HasMany for hashed keys.
func (f *Counting) HasManyHash(hs []uint64) []bool { return f.HasManyHashInto(nil, hs) }

// HasManyHashInto is HasManyInto for hashed keys.
func (f *Counting) HasManyHashInto(dst []bool, hs []uint64) []bool {
	dst = fitBools(dst, len(hs))
	for i := 0; i < len(hs); i += manyChunk {
		n := min(manyChunk, len(hs)-i)
		f.hasManyChunk(hs[i:i+n], dst[i:i+n])
	}
	return dst
}

// hasManyChunk answers up to manyChunk hashed keys into out, as HasHash
// would one by one.
func (f *Counting) hasManyChunk(hs []uint64, out []bool) {
	b := f.base()
	if b.off.Load() {
		allTrue(out)
		return
	}
	beforeLookupRead(b)
	if b.ro != nil || b.ov.size.Load() > 0 && b.s.opts.Sync == SyncInterval {
		// Lookups through an overlay: one at a time, under the guard too
		// (their locked reads release the mutex by a deferred unlock,
		// which a fault's unwinding runs).
		read := func() {
			for j, h := range hs {
				out[j] = f.HasHash(h)
			}
		}
		if !b.guardLookup(read, f.guard.showSlow) || b.off.Load() {
			allTrue(out)
		}
		return
	}
	if !b.guardLookup(func() { f.c.HasManyHash(hs, out) }, f.guard.showSlow) || b.off.Load() {
		// Closed or dropped, maybe while reading: no answer is "absent".
		allTrue(out)
	}
}

// Items returns adds minus successful deletes; 0 for a nil or zero
// handle.
func (f *Counting) Items() uint64 {
	if f == nil || f.c == nil {
		return 0
	}
	return f.c.Items()
}

// Info describes the filter; see (*Bloom).Info.
func (f *Counting) Info() (Info, error) { return f.base().info() }

// Fill counts the non-zero counters by reading every data word; see
// (*Bloom).Fill.
func (f *Counting) Fill() (FillInfo, error) { return f.base().fill() }
