package store

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync/atomic"

	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// CuckooConfig configures a cuckoo filter. Zero fields take defaults.
type CuckooConfig struct {
	// Capacity is the number of items the first layer holds. Default 1024.
	Capacity uint64
	// BucketSize is the number of slots per bucket, 1..16. Default 4.
	BucketSize int
	// FingerprintBits is the fingerprint width, 4..16, with
	// BucketSize*FingerprintBits <= 64. Default 16.
	FingerprintBits int
	// MaxIterations bounds the buckets an insert examines looking for a
	// free slot, 0..cuckoo.MaxIterationsLimit (65535, the top of Redis's
	// cf-max-iterations range): past it, CreateCuckoo fails with ErrInvalid.
	// Default 500. (Releases before the limit stored any value up to
	// 2^32-1, and a larger int cut to its low 32 bits; a filter they made
	// with more than the limit keeps its value in the catalog (cmd/inspect
	// shows it), and its inserts examine at most the limit.)
	MaxIterations int
	// Expansion is the capacity factor of each new layer, 1..64: when an
	// insert finds no free slot, the filter grows a layer of
	// Capacity*Expansion^i items. Default 1 (layers of the first's size),
	// as RedisBloom's CF.RESERVE.
	Expansion uint
	// NonScaling makes a filter that finds no free slot refuse the add
	// with ErrFull instead of growing a layer; Expansion is then ignored
	// (Info reports 0). It is recorded as Expansion 0, which is how a
	// filter created before growth became the default (when a zero
	// Expansion meant no growth) is recorded too: such a filter keeps
	// refusing to grow.
	NonScaling bool
}

func (c CuckooConfig) withDefaults() cuckoo.Config {
	if c.Capacity == 0 {
		c.Capacity = 1024
	}
	if c.BucketSize == 0 {
		c.BucketSize = cuckoo.DefaultBucketSize
	}
	if c.FingerprintBits == 0 {
		c.FingerprintBits = cuckoo.DefaultFingerprintBits
	}
	if c.MaxIterations == 0 {
		c.MaxIterations = cuckoo.MaxIterations
	}
	switch {
	case c.NonScaling:
		c.Expansion = 0 // cuckoo.Config: no growth
	case c.Expansion == 0:
		c.Expansion = 1
	}
	return cuckoo.Config{Capacity: c.Capacity, BucketSize: c.BucketSize, FingerprintBits: c.FingerprintBits,
		MaxIterations: c.MaxIterations, Expansion: c.Expansion}
}

// Cuckoo is a persistent cuckoo filter with optional expansion layers.
// Every change is logged as after-images of the bucket words it touches and
// reaches the mapped file only once durable; lookups take no lock. A nil
// or zero Cuckoo (one no Store call returned) answers HasMany and its
// variants "maybe present", Count math.MaxUint64 and Items 0, and its
// other methods return an error wrapping ErrInvalid that names it, except
// Has and HasHash, which panic as a
// method of a nil pointer does (see the package doc).
type Cuckoo struct {
	b      *filterBase
	cfg    cuckoo.Config
	layers atomic.Pointer[[]*cuckoo.Filter]
	// front is what Has and HasHash call (see setFront): the only
	// layer's lookup, or slow, the lookup through every layer and any
	// overlay.
	front atomic.Pointer[cuckoo.Front]
	slow  *cuckoo.Front
	guard lookupGuard[cuckoo.Front, *cuckoo.Front] // the front under Options.GuardLookups
}

// base returns the handle's filterBase: for a nil or zero handle, the
// stand-in nilCuckoo.
func (f *Cuckoo) base() *filterBase {
	if f == nil || f.b == nil {
		return nilCuckoo
	}
	return f.b
}

// CreateCuckoo creates a cuckoo filter.
func (s *Store) CreateCuckoo(name string, cfg CuckooConfig) (*Cuckoo, error) {
	cc := cfg.withDefaults()
	if err := cc.Validate(); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	l, err := cuckooLayer(cc, 0)
	if err != nil {
		return nil, err
	}
	m := &format.FilterMeta{Kind: mmapbits.KindCuckoo, Capacity: cc.Capacity, Expansion: uint32(cc.Expansion),
		BucketSize: uint32(cc.BucketSize), FingerprintBits: uint32(cc.FingerprintBits),
		MaxIterations: uint32(cc.MaxIterations), NonScaling: cc.Expansion == 0, Layers: []format.LayerMeta{l}}
	h, err := s.create(name, m, func(b *filterBase) (handle, error) { return newCuckoo(b) })
	if err != nil {
		return nil, err
	}
	return h.(*Cuckoo), nil
}

// Cuckoo returns the cuckoo filter called name.
func (s *Store) Cuckoo(name string) (*Cuckoo, error) {
	h, err := s.lookup(name, mmapbits.KindCuckoo)
	if err != nil {
		return nil, err
	}
	return h.(*Cuckoo), nil
}

func cuckooLayer(cfg cuckoo.Config, i int) (format.LayerMeta, error) {
	capacity, g, err := cuckoo.LayerParams(cfg, i)
	if err != nil {
		return format.LayerMeta{}, fmt.Errorf("store: %w", err)
	}
	pages, err := layerPages(g.Words(), i, fmt.Sprintf("capacity %d", capacity))
	if err != nil {
		return format.LayerMeta{}, err
	}
	return format.LayerMeta{Capacity: capacity, Size: g.Buckets, Salt: g.Salt, DataPages: pages,
		Derivation: uint32(g.Derivation)}, nil
}

// storedMaxIterations is the search bound of a filter whose catalog
// entry holds v: v, or cuckoo.MaxIterationsLimit for a larger v, which
// releases before the limit stored (see CuckooConfig.MaxIterations).
func storedMaxIterations(v uint32) int { return int(min(v, cuckoo.MaxIterationsLimit)) }

func newCuckoo(b *filterBase) (*Cuckoo, error) {
	m := b.meta
	f := &Cuckoo{b: b, cfg: cuckoo.Config{Capacity: m.Capacity, BucketSize: int(m.BucketSize),
		FingerprintBits: int(m.FingerprintBits), MaxIterations: storedMaxIterations(m.MaxIterations), Expansion: uint(m.Expansion)}}
	if err := f.cfg.Validate(); err != nil {
		return nil, err
	}
	layers := make([]*cuckoo.Filter, len(m.Layers))
	for i, l := range m.Layers {
		cf, err := f.openLayer(b.regions[i], l)
		if err != nil {
			return nil, err
		}
		layers[i] = cf
	}
	f.layers.Store(&layers)
	f.slow = cuckoo.SlowFront(f.hasSlow, f.hasHashSlow)
	f.guard.init(b, &f.front, f.slow, cuckoo.SlowFront)
	f.setFront()
	b.items = func() []uint64 { return layerCounts(*f.layers.Load()) }
	b.applyWrites = func(layer int, ws []format.WordWrite) error {
		idx, vals := make([]uint64, len(ws)), make([]uint64, len(ws))
		for i, w := range ws {
			idx[i], vals[i] = w.Index, w.Value
		}
		return (*f.layers.Load())[layer].Apply(idx, vals)
	}
	return f, nil
}

func (f *Cuckoo) openLayer(r mmapbits.Region, l format.LayerMeta) (*cuckoo.Filter, error) {
	g := cuckoo.Geometry{Buckets: l.Size, BucketSize: f.cfg.BucketSize, FingerprintBits: f.cfg.FingerprintBits, Salt: l.Salt,
		Derivation: cuckoo.Derivation(l.Derivation)}
	w := r.Words()
	if uint64(len(w)) < g.Words() {
		return nil, fmt.Errorf("layer has %d words, geometry needs %d", len(w), g.Words())
	}
	cf, err := cuckoo.New(g, w[:g.Words()])
	if err != nil {
		return nil, err
	}
	// Moves are bracketed by the word in the file's header page, which
	// every mapping of the file shares: readers in other processes (a
	// ReadOnly store, cmd/inspect) retry instead of missing a moving entry.
	cf.ShareSeq(r.Seq())
	cf.SetCount(l.Items)
	return cf, nil
}

// replay stores a record's after-images directly, not through Apply:
// recovery holds the layer's move-sequence word odd for the whole replay
// (see replayWAL), because replaying older after-images over a file that
// already holds later ones can take an entry out of both its buckets until
// a later record puts it back, and a reader in another process must retry
// (or answer "maybe") meanwhile rather than miss it.
func (f *Cuckoo) replay(r format.WALRecord) error {
	if r.Op != format.WALOpWords {
		return fmt.Errorf("store: %w: cuckoo filter %q got a hash record", ErrCorrupt, f.b.name())
	}
	words := (*f.layers.Load())[r.Layer].Words()
	for _, w := range r.Writes {
		if w.Index >= uint64(len(words)) {
			return fmt.Errorf("store: cuckoo filter %q: replay: word %d of layer %d, which has %d", f.b.name(), w.Index, r.Layer, len(words))
		}
		atomic.StoreUint64(&words[w.Index], w.Value)
		f.b.regions[r.Layer].Touch(w.Index, w.Index+1)
	}
	f.b.dirty.Store(true)
	f.count(r)
	return nil
}

func (f *Cuckoo) count(r format.WALRecord) {
	if layers := *f.layers.Load(); r.Layer < len(layers) {
		layers[r.Layer].SetCount(addDelta(layers[r.Layer].Count(), int64(r.Delta)))
	}
}

// Add inserts key (a second Add of the same key stores a second copy).
// When no slot is found it grows a layer, or fails with ErrFull if the
// filter is NonScaling, already has the most layers a filter can have
// (64) or a layer whose expanded capacity no layer can have, or the key's
// two buckets are full of its own copies (see the package doc).
func (f *Cuckoo) Add(key []byte) error { return f.AddHash(Hash(key)) }

// AddHash is Add for a hashed key.
func (f *Cuckoo) AddHash(h uint64) error {
	_, err := f.add(h, false)
	return err
}

// AddNX inserts key only if it is not (maybe) present already, and reports
// whether it inserted.
func (f *Cuckoo) AddNX(key []byte) (bool, error) { return f.AddNXHash(Hash(key)) }

// AddNXHash is AddNX for a hashed key.
func (f *Cuckoo) AddNXHash(h uint64) (bool, error) { return f.add(h, true) }

func (f *Cuckoo) add(h uint64, nx bool) (bool, error) {
	b := f.base()
	if err := b.lock(); err != nil {
		return false, err
	}
	defer b.end()
	t, held, err := f.planAdd(h, nx)
	if err == nil && held {
		lsn := b.lastLSN
		b.mu.Unlock()
		return false, b.settleNoop(lsn)
	}
	if err != nil {
		b.mu.Unlock()
		return false, err
	}
	lsn, err := b.logWords(t, 1)
	b.mu.Unlock()
	if err != nil {
		return false, err
	}
	return true, b.settle(lsn)
}

// planAdd plans add's insert of h, or, with nx, finds h held (held, no
// transaction), under the fault guard of changes (recoverChange). Called
// with b.mu held.
func (f *Cuckoo) planAdd(h uint64, nx bool) (t *wordTx, held bool, err error) {
	defer f.b.recoverChange(&err, debug.SetPanicOnFault(true))
	if nx && f.hasLocked(h) {
		return nil, true, nil
	}
	t, err = f.insertLocked(h, f.b.tx)
	return t, false, err
}

// AddMany adds every key, in order, as Add would one after another (like
// RedisBloom's CF.INSERT), logging them in one WAL record and waiting once
// for durability. It returns how many keys it added: it stops at the
// first key it cannot add and returns that key's error (ErrFull, or the
// error creating the new layer it needs, such as a full disk), and the
// keys before it are added and durable. A count of 0 with an error wrapping
// ErrFailed, ErrClosed, ErrCorrupt or ErrIncomplete acknowledges nothing.
func (f *Cuckoo) AddMany(keys [][]byte) (int, error) { return f.AddManyHash(hashAll(keys)) }

// AddManyHash is AddMany for hashed keys.
func (f *Cuckoo) AddManyHash(hs []uint64) (int, error) {
	res, err := applyMany(f, batchCuckooAdd, hs)
	return len(res), err
}

// DeleteMany deletes one copy of every key, in order, as Delete would one
// after another, logging the deletes in one WAL record and waiting once
// for durability. results[i] is Delete's answer for key i: whether it
// deleted. It stops at the first key whose delete is refused (an error
// wrapping ErrAmbiguous: see Delete) and returns the results of the keys
// before it, which are durable, with that error: len(results) is the
// refused key's index. If the filter cannot be changed or the store fails
// (ErrFailed), results is nil: nothing is acknowledged.
func (f *Cuckoo) DeleteMany(keys [][]byte) ([]bool, error) { return f.DeleteManyHash(hashAll(keys)) }

// DeleteManyHash is DeleteMany for hashed keys.
func (f *Cuckoo) DeleteManyHash(hs []uint64) ([]bool, error) {
	return applyMany(f, batchCuckooDelete, hs)
}

// insertLocked plans an insert into the newest layer, growing the chain if
// it is full, through the transactions tx starts (b.tx, or a batch's).
// Called with b.mu held.
func (f *Cuckoo) insertLocked(h uint64, tx func(layer int) *wordTx) (*wordTx, error) {
	layers := *f.layers.Load()
	n := len(layers) - 1
	t := tx(n)
	err := layers[n].InsertTo(t, h, f.cfg.MaxIterations)
	if err == nil || !errors.Is(err, ErrFull) {
		return t, err
	}
	// Older layers may have room (deletes free slots).
	for i := n - 1; i >= 0; i-- {
		t = tx(i)
		if layers[i].InsertTo(t, h, f.cfg.MaxIterations) == nil {
			return t, nil
		}
	}
	cf, err := f.grow(err, tx(n), h)
	if err != nil {
		return nil, err
	}
	t = tx(n + 1)
	return t, cf.InsertTo(t, h, f.cfg.MaxIterations)
}

// grow adds an empty layer to the chain, whose newest layer an insert of
// h found full (full is that error), and returns it; or it returns an
// error wrapping ErrFull if the filter may not grow. w reads the newest
// layer's words as the insert saw them (pending writes included). Called
// with b.mu held.
func (f *Cuckoo) grow(full error, w cuckoo.Words, h uint64) (*cuckoo.Filter, error) {
	layers := *f.layers.Load()
	n := len(layers) - 1
	if f.cfg.Expansion == 0 {
		return nil, fmt.Errorf("store: cuckoo filter %q: %w", f.b.name(), full)
	}
	// A layer less than half full whose insert of h failed because h's
	// two buckets hold nothing but copies of h (one key added many times)
	// is not full: growing would not help and would repeat, doubling the
	// file each time. (A layer that fails below half full for another
	// reason, a small MaxIterations, grows.) The count may be wrong,
	// though (a catalog older than the layer file, put back after a Load:
	// the store's doc). So the layer's fill is sampled (4096 buckets
	// spread over it), and if the sample holds half the capacity or more
	// after all, the layer's fingerprints are counted (a scan of the
	// layer, only when the count is that far off) and the count set to
	// them.
	capacity := f.b.meta.Layers[n].Capacity
	if g := layers[n].Geometry(); layers[n].Count() < capacity/2 && usedSlots(w, g, 4096) >= capacity/2 {
		used := usedSlots(w, g, g.Buckets)
		f.b.s.opts.Logger.Warn("cuckoo layer's count differs from the fingerprints it holds (is the catalog older than the layer file?); counted anew",
			"filter", f.b.name(), "layer", n, "count", layers[n].Count(), "fingerprints", used)
		layers[n].SetCount(used)
	}
	if layers[n].Count() < capacity/2 && layers[n].CopiesFill(w, h) {
		return nil, fmt.Errorf("store: cuckoo filter %q: too many copies of one item (its two buckets are full): %w", f.b.name(), ErrFull)
	}
	l, err := cuckooLayer(f.cfg, n+1)
	if err != nil {
		return nil, f.b.unplannable(n+1, err)
	}
	r, err := f.b.addLayer(l)
	if err != nil {
		return nil, err
	}
	cf, err := f.openLayer(r, l)
	if err != nil {
		return nil, err
	}
	grown := append(append([]*cuckoo.Filter(nil), layers...), cf)
	// Lookups through the one-layer front would not see the new layer:
	// every lookup that starts once it is published takes the slow path.
	f.guard.show(f.slow)
	f.layers.Store(&grown)
	return cf, nil
}

// Delete removes one copy of key and reports whether it did: false, nil
// if no layer holds key's fingerprint. Delete only keys that were added:
// deleting a key that was never added may remove another key's
// fingerprint.
//
// After expansion, a key whose fingerprint matches in two or more layers is
// not deleted: Delete returns false and an error wrapping ErrAmbiguous. A
// match in a layer other than the one holding the key's copy may be
// another key's only copy there, and removing it would make that key a
// false negative. The key stays "maybe present", the safe direction for a
// filter. This happens for keys added again after an expansion, and
// otherwise with about the false-positive rate of the newer layers.
func (f *Cuckoo) Delete(key []byte) (bool, error) { return f.DeleteHash(Hash(key)) }

// DeleteHash is Delete for a hashed key.
func (f *Cuckoo) DeleteHash(h uint64) (bool, error) {
	b := f.base()
	if err := b.lock(); err != nil {
		return false, err
	}
	defer b.end()
	t, err := f.planDelete(h)
	if err != nil {
		b.mu.Unlock()
		return false, err
	}
	if t != nil {
		lsn, err := b.logWords(t, -1)
		b.mu.Unlock()
		if err != nil {
			return false, err
		}
		return true, b.settle(lsn)
	}
	lsn := b.lastLSN
	b.mu.Unlock()
	return false, b.settleNoop(lsn)
}

// planDelete is deleteLocked through b.tx under the fault guard of
// changes (recoverChange). Called with b.mu held.
func (f *Cuckoo) planDelete(h uint64) (t *wordTx, err error) {
	defer f.b.recoverChange(&err, debug.SetPanicOnFault(true))
	return f.deleteLocked(h, f.b.tx)
}

// deleteLocked plans the delete of one copy of h, reading and writing
// through the transactions tx starts (b.tx, or a batch's), and returns
// its transaction, or nil if no layer matches. If two or more layers
// match it deletes nothing and returns an error wrapping ErrAmbiguous.
// Called with b.mu held.
func (f *Cuckoo) deleteLocked(h uint64, tx func(layer int) *wordTx) (*wordTx, error) {
	layers := *f.layers.Load()
	match := -1
	for i := len(layers) - 1; i >= 0; i-- {
		if !layers[i].HasHashIn(tx(i), h) {
			continue
		}
		if match >= 0 {
			// The key matches in two layers. Within one layer a matching
			// entry is interchangeable with the key's own copy, but each
			// layer has its own buckets: the match in one of these layers
			// may be another key's only copy. Refuse rather than risk a
			// false negative for that key.
			return nil, fmt.Errorf("store: cuckoo filter %q: key's fingerprint is in layers %d and %d: %w", f.b.name(), i, match, ErrAmbiguous)
		}
		match = i
	}
	if match < 0 {
		return nil, nil
	}
	t := tx(match)
	if !layers[match].DeleteFrom(t, h) {
		return nil, nil
	}
	return t, nil
}

// setFront points front at the only layer's lookup if the filter is
// healthy and has one layer, and either a read-only store froze its
// overlay (the WAL records after the checkpoint) or the store is a
// writer whose Sync is not SyncInterval (whose acknowledged changes may
// wait in the writer's overlay); at slow otherwise. The one-layer front
// asks the read-only overlay, and then checks off, only where the key is
// absent from the live words, as the Bloom filter's does (see
// Bloom.setFront); the overlay is read only where it changed one of the
// key's buckets. Called before the handle is used, by a read-only open
// once it gives the filter an overlay (slow, while the overlay is
// gathered) and once more when it froze it; grow stores slow before it
// publishes a second layer.
func (f *Cuckoo) setFront() {
	b := f.b
	layers := *f.layers.Load()
	switch {
	case len(layers) != 1 || b.broken != nil:
	case b.ro != nil:
		if b.ro.views != nil {
			l, v := layers[0], b.ro.view(0)
			f.guard.show(cuckoo.NewOverlayFront(l, &b.off, func(h, i1, i2 uint64) bool {
				return v.noted(i1, i2) && l.HasHashIn(v, h)
			}))
			return
		}
	case b.s.opts.Sync != SyncInterval:
		f.guard.show(cuckoo.NewFront(layers[0], &b.off))
		return
	}
	f.guard.show(f.slow)
}

// Has reports whether key may be present: false means certainly not. A
// closed, dropped, broken or incomplete filter answers true.
func (f *Cuckoo) Has(key []byte) bool {
	// Inlined into the caller, as Bloom.Has is.
	g := f.front.Load()
	beforeCuckooFrontRead(f.b, g)
	return g.Has(key)
}

// HasHash is Has for a hashed key.
func (f *Cuckoo) HasHash(h uint64) bool {
	g := f.front.Load()
	beforeCuckooFrontRead(f.b, g)
	return g.HasHash(h)
}

// hasSlow is slow's Has.
func (f *Cuckoo) hasSlow(key []byte) bool { return f.hasHashSlow(Hash(key)) }

// hasHashSlow is slow's HasHash: every layer, newest first, through the
// read-only or SyncInterval overlay if there is one.
func (f *Cuckoo) hasHashSlow(h uint64) bool {
	b := f.b
	if b.off.Load() {
		return true
	}
	beforeLookupRead(b)
	if b.ov.size.Load() > 0 && b.s.opts.Sync == SyncInterval {
		if f.hasOverlaid(h) {
			return true
		}
	} else {
		layers := *f.layers.Load()
		for i := len(layers) - 1; i >= 0; i-- {
			if layers[i].HasHash(h) {
				return true
			}
		}
	}
	// A read-only store: then through its view of the records after the
	// checkpoint. (The live words first: they answer a hit at once, where
	// the view costs an index lookup per word read.)
	if b.ro != nil && f.hasRO(h) {
		return true
	}
	// Close or Drop may have replaced the mapping by placeholder pages while
	// this lookup read it: "absent" holds only if the filter is still on.
	return b.off.Load()
}

// hasOverlaid answers Has through the overlay, with b.mu held, released
// by a deferred unlock: a fault's unwinding (Options.GuardLookups) runs
// it.
func (f *Cuckoo) hasOverlaid(h uint64) bool {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	return f.hasLocked(h)
}

// hasLocked answers Has through the overlay. Called with b.mu held.
func (f *Cuckoo) hasLocked(h uint64) bool {
	layers := *f.layers.Load()
	for i := len(layers) - 1; i >= 0; i-- {
		if layers[i].HasHashIn(f.b.view(i), h) {
			return true
		}
	}
	return false
}

// hasRO answers Has through a read-only store's view of the WAL records
// after the checkpoint (see roOverlay), for a key the live words miss,
// reading only the layers where the records changed one of its buckets.
//
// The live words come first, and not only for speed: beside a live
// writer they are the writer's words now, and a fingerprint the writer
// moves after this store opened may have moved into a bucket the view
// holds as it was, where the view alone would miss it. The price: a key
// deleted after the checkpoint whose fingerprint the file still holds
// (a file from before a power loss, or a writer that has not applied
// the durable delete yet) answers "maybe" (a counting filter, whose
// counters do not move, reads the view alone where the records changed
// the key's block: Counting.lookupCount).
func (f *Cuckoo) hasRO(h uint64) bool {
	layers := *f.layers.Load()
	for i := len(layers) - 1; i >= 0; i-- {
		l, v := layers[i], f.b.ro.view(i)
		if i1, _, i2 := l.Geometry().Locate(h); v.noted(i1, i2) && l.HasHashIn(v, h) {
			return true
		}
	}
	return false
}

// HasMany answers Has for every key. It allocates its result;
// HasManyInto reuses one.
func (f *Cuckoo) HasMany(keys [][]byte) []bool { return f.HasManyInto(nil, keys) }

// HasManyInto is HasMany writing into dst, grown only if its capacity is
// below len(keys); it returns dst[:len(keys)] and, with room in dst,
// allocates nothing. Keys are looked up in batches whose buckets are
// prefetched before any is read (cuckoo.Filter.HasManyHash).
func (f *Cuckoo) HasManyInto(dst []bool, keys [][]byte) []bool {
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
func (f *Cuckoo) HasManyHash(hs []uint64) []bool { return f.HasManyHashInto(nil, hs) }

// HasManyHashInto is HasManyInto for hashed keys.
func (f *Cuckoo) HasManyHashInto(dst []bool, hs []uint64) []bool {
	dst = fitBools(dst, len(hs))
	for i := 0; i < len(hs); i += manyChunk {
		n := min(manyChunk, len(hs)-i)
		f.hasManyChunk(hs[i:i+n], dst[i:i+n])
	}
	return dst
}

// hasManyChunk answers up to manyChunk hashed keys into out, as HasHash
// would one by one.
func (f *Cuckoo) hasManyChunk(hs []uint64, out []bool) {
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
	read := func() {
		if layers := *f.layers.Load(); len(layers) == 1 {
			layers[0].HasManyHash(hs, out)
		} else {
			var p pending
			p.start(hs, out)
			for i := len(layers) - 1; i >= 0 && p.n > 0; i-- {
				layers[i].HasManyHash(p.hs[:p.n], p.res[:p.n])
				p.settle(out)
			}
		}
	}
	if !b.guardLookup(read, f.guard.showSlow) || b.off.Load() {
		// Closed or dropped, maybe while reading: no answer is "absent".
		allTrue(out)
	}
}

// Count returns how many copies of key's fingerprint the filter holds
// (an upper bound on how many times key was added and not deleted). A
// closed, dropped, broken or incomplete filter answers math.MaxUint64:
// unknown, never "absent".
func (f *Cuckoo) Count(key []byte) uint64 { return f.CountHash(Hash(key)) }

// CountHash is Count for a hashed key.
func (f *Cuckoo) CountHash(h uint64) uint64 {
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

// lookupCount counts h's copies in every layer (through the overlay
// under SyncInterval, with the mutex held, released by a deferred unlock,
// which a guarded read's fault runs as it unwinds).
func (f *Cuckoo) lookupCount(h uint64) uint64 {
	b := f.b
	if b.ov.size.Load() > 0 && b.s.opts.Sync == SyncInterval {
		b.mu.Lock()
		defer b.mu.Unlock()
		var n uint64
		for i, l := range *f.layers.Load() {
			n = satAdd(n, l.CountHashIn(b.view(i), h))
		}
		return n
	}
	var n, nro uint64
	for i, l := range *f.layers.Load() {
		n = satAdd(n, l.CountHash(h))
		if b.ro != nil {
			nro = satAdd(nro, l.CountHashIn(b.ro.view(i), h))
		}
	}
	return max(n, nro)
}

// satAdd returns a+b, or math.MaxUint64 if that overflows ("unknown"
// counts are math.MaxUint64).
func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

// Items returns the number of items (adds minus deletes); 0 for a nil or
// zero handle.
func (f *Cuckoo) Items() uint64 {
	if f.base().isStandIn() {
		return 0
	}
	return sumCounts(*f.layers.Load())
}

// Info describes the filter; see (*Bloom).Info.
func (f *Cuckoo) Info() (Info, error) { return f.base().info() }

// Fill counts the slots holding a fingerprint by reading every data word;
// see (*Bloom).Fill.
func (f *Cuckoo) Fill() (FillInfo, error) { return f.base().fill() }

// usedSlots returns the number of fingerprints in the buckets of a layer
// of geometry g read through w, counted in at most samples buckets spread
// over the layer and scaled up (exact with samples >= g.Buckets). Nothing
// may change the buckets meanwhile.
func usedSlots(w cuckoo.Words, g cuckoo.Geometry, samples uint64) uint64 {
	samples = min(samples, g.Buckets)
	step := g.Buckets / samples
	var n uint64
	for j := range samples {
		n += uint64(g.UsedSlots(w.Load(j * step)))
	}
	if samples == g.Buckets {
		return n
	}
	// n <= samples*16, so with a few thousand samples and a layer file's
	// at most 2^41 buckets (mmapbits.MaxDataPages) nothing overflows.
	return n * g.Buckets / samples
}
