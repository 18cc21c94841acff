package store

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// BloomConfig configures a scalable (or, with NonScaling, fixed) blocked
// Bloom filter, and a counting Bloom filter.
type BloomConfig struct {
	// Capacity is the number of items the first layer holds at ErrorRate.
	// Default 100. A Bloom filter counts as an item each add that set a
	// new bit (Add answered true), as RedisBloom counts; a counting
	// filter counts every add. A key that was already a false positive
	// is not counted, so a full Bloom layer holds more distinct keys than
	// Capacity, and a NonScaling Bloom filter at its capacity runs above
	// ErrorRate where that rate is high: an adversarial review measured,
	// at Capacity 50,000, 1.07x ErrorRate at 0.1, 1.14x at 0.2, 1.23x at
	// 0.3 and 1.39x at 0.5, against 0.997x at 0.01 and 0.993x at 0.001.
	// A scalable chain's compound rate stayed under ErrorRate at every
	// rate the review tried (0.0001 to 0.99): its later layers' tighter
	// rates leave the room.
	Capacity uint64
	// ErrorRate is the target false-positive rate, in (0, 1): the whole
	// chain's compound rate stays at or below it. Default 0.01.
	ErrorRate float64
	// Expansion is the capacity factor of each new layer, 1..64. Default
	// 2. Counting filters have one layer and ignore it.
	Expansion uint
	// NonScaling makes a full filter refuse adds with ErrFull instead of
	// growing a layer.
	NonScaling bool
}

func (c BloomConfig) withDefaults() bloom.Config {
	if c.Capacity == 0 {
		c.Capacity = 100
	}
	if c.ErrorRate == 0 {
		c.ErrorRate = 0.01
	}
	if c.Expansion == 0 {
		c.Expansion = bloom.DefaultExpansion
	}
	return bloom.Config{Capacity: c.Capacity, ErrorRate: c.ErrorRate, Expansion: c.Expansion, NonScaling: c.NonScaling}
}

// Bloom is a persistent scalable blocked Bloom filter. Adds are logged as
// key hashes (setting bits is monotonic, so the bits are set at once and
// the caller is answered once the record is durable); lookups take no lock.
// A nil or zero Bloom (one no Store call returned) answers HasMany and its
// variants "maybe present" and Card 0, and its other methods return an
// error wrapping ErrInvalid that names it, except Has and HasHash, which
// panic as a method of a nil pointer does (see the package doc).
type Bloom struct {
	b      *filterBase
	cfg    bloom.Config
	layers atomic.Pointer[[]*bloom.Filter] // immutable snapshots, oldest first
	// front is what Has and HasHash call (see setFront): the only
	// layer's lookup, or slow, the lookup through every layer and the
	// read-only overlay.
	front atomic.Pointer[bloom.Front]
	slow  *bloom.Front
	guard lookupGuard[bloom.Front, *bloom.Front] // the front under Options.GuardLookups
}

// base returns the handle's filterBase: for a nil or zero handle, the
// stand-in nilBloom.
func (f *Bloom) base() *filterBase {
	if f == nil || f.b == nil {
		return nilBloom
	}
	return f.b
}

// CreateBloom creates a Bloom filter. Zero config fields take defaults.
func (s *Store) CreateBloom(name string, cfg BloomConfig) (*Bloom, error) {
	bc := cfg.withDefaults()
	l, err := bloomLayer(bc, 0)
	if err != nil {
		return nil, err
	}
	m := &format.FilterMeta{Kind: mmapbits.KindBloom, Capacity: bc.Capacity, ErrorRate: bc.ErrorRate,
		Expansion: uint32(bc.Expansion), NonScaling: bc.NonScaling, Layers: []format.LayerMeta{l}}
	h, err := s.create(name, m, func(b *filterBase) (handle, error) { return newBloom(b) })
	if err != nil {
		return nil, err
	}
	return h.(*Bloom), nil
}

// Bloom returns the Bloom filter called name.
func (s *Store) Bloom(name string) (*Bloom, error) {
	h, err := s.lookup(name, mmapbits.KindBloom)
	if err != nil {
		return nil, err
	}
	return h.(*Bloom), nil
}

func bloomLayer(cfg bloom.Config, i int) (format.LayerMeta, error) {
	capacity, rate, g, err := bloom.LayerParams(cfg, i)
	if err != nil {
		return format.LayerMeta{}, fmt.Errorf("store: %w", err)
	}
	pages, err := layerPages(g.Words(), i, fmt.Sprintf("capacity %d at error rate %v", capacity, rate))
	if err != nil {
		return format.LayerMeta{}, err
	}
	return format.LayerMeta{Capacity: capacity, ErrorRate: rate, Size: g.Blocks, K: g.K, Salt: g.Salt,
		DataPages: pages, Derivation: uint32(g.Derivation)}, nil
}

// layerPages returns the data pages of a layer of words words, or an
// error wrapping ErrInvalid that names what asked for it (what: its
// capacity) if a layer file cannot hold that many (mmapbits.MaxDataPages,
// below what bloom.Plan and cuckoo.Plan accept). Checked where the layer
// is planned, so that a create names the capacity, and a chain's next
// layer that no file can hold is unplannable (ErrFull), not an invalid
// argument of the add that needs it.
func layerPages(words uint64, layer int, what string) (uint64, error) {
	pages := mmapbits.PagesFor(words)
	if pages > mmapbits.MaxDataPages {
		return 0, fmt.Errorf("store: %w: layer %d: %s needs %d data pages, more than a layer file holds (%d)",
			ErrInvalid, layer, what, pages, uint64(mmapbits.MaxDataPages))
	}
	return pages, nil
}

func bloomGeometry(l format.LayerMeta) bloom.Geometry {
	return bloom.Geometry{Blocks: l.Size, K: l.K, Salt: l.Salt, Derivation: bloom.Derivation(l.Derivation)}
}

func newBloom(b *filterBase) (*Bloom, error) {
	m := b.meta
	f := &Bloom{b: b, cfg: bloom.Config{Capacity: m.Capacity, ErrorRate: m.ErrorRate, Expansion: uint(m.Expansion), NonScaling: m.NonScaling}}
	layers := make([]*bloom.Filter, len(m.Layers))
	for i, l := range m.Layers {
		bf, err := openBloomLayer(b.regions[i], l)
		if err != nil {
			return nil, err
		}
		layers[i] = bf
	}
	f.layers.Store(&layers)
	f.slow = bloom.SlowFront(f.hasSlow, f.hasHashSlow)
	f.guard.init(b, &f.front, f.slow, bloom.SlowFront)
	f.setFront()
	b.items = func() []uint64 { return layerCounts(*f.layers.Load()) }
	return f, nil
}

// setFront points front at the only layer's lookup if the filter has one
// layer and is not broken, and at slow otherwise (through show: with
// Options.GuardLookups, under the fault guard). The one-layer front
// reads the layer and then, only where the key is absent, asks a
// read-only store's frozen overlay (the bits adds logged after the
// checkpoint set) and checks off: a closed or dropped filter's mapping is
// placeholder pages (zeros, or a later file's bytes), which may read
// "absent", and an incomplete filter's file is mapped whole, so that
// check gives both their "maybe". Called before the handle is used, by a
// read-only open once it gives the filter an overlay (slow, while the
// overlay is gathered) and once more when it froze it; grow stores slow
// before it publishes a second layer.
func (f *Bloom) setFront() {
	b := f.b
	layers := *f.layers.Load()
	switch {
	case len(layers) != 1 || b.broken != nil:
	case b.ro == nil:
		f.guard.show(bloom.NewFront(layers[0], &b.off))
		return
	case b.ro.blocks != nil:
		l, x := layers[0], &b.ro.blocks[0]
		f.guard.show(bloom.NewOverlayFront(l, &b.off, func(h uint64) bool { return x.has(l, h) }))
		return
	}
	f.guard.show(f.slow)
}

func openBloomLayer(r mmapbits.Region, l format.LayerMeta) (*bloom.Filter, error) {
	g := bloomGeometry(l)
	w := r.Words()
	if uint64(len(w)) < g.Words() {
		return nil, fmt.Errorf("layer has %d words, geometry needs %d", len(w), g.Words())
	}
	bf, err := bloom.New(g, w[:g.Words()])
	if err != nil {
		return nil, err
	}
	bf.SetCount(l.Items)
	return bf, nil
}

// replay re-sets the bits of a logged add, writing its block's words even
// where the bits are set (see replayWrites). The record stands for one new
// item even if its bits already reached the file before the crash.
func (f *Bloom) replay(r format.WALRecord) error {
	if r.Op != format.WALOpHash {
		return fmt.Errorf("store: %w: bloom filter %q got a words record", ErrCorrupt, f.b.name())
	}
	l := (*f.layers.Load())[r.Layer]
	block := l.SetHash(r.Hash)
	f.b.regions[r.Layer].Touch(block*bloom.BlockWords, (block+1)*bloom.BlockWords)
	f.count(r)
	f.b.dirty.Store(true)
	return nil
}

func (f *Bloom) count(r format.WALRecord) {
	if layers := *f.layers.Load(); r.Layer < len(layers) {
		layers[r.Layer].SetCount(layers[r.Layer].Count() + 1)
	}
}

// Add adds key and reports whether it was new (no layer held it), like
// RedisBloom's BF.ADD. It returns once the add is durable as Options.Sync
// promises.
func (f *Bloom) Add(key []byte) (bool, error) { return f.AddHash(Hash(key)) }

// AddHash is Add for a key already hashed with Hash.
func (f *Bloom) AddHash(h uint64) (bool, error) {
	b := f.base()
	if err := b.lock(); err != nil {
		return false, err
	}
	defer b.end()
	added, layer, err := f.addGuarded(h)
	if err != nil || !added {
		lsn := b.lastLSN
		b.mu.Unlock()
		if serr := b.settleNoop(lsn); serr != nil {
			return false, serr
		}
		return false, err
	}
	// The WAL copies the record: it is encoded on the stack.
	var rec [hashRecordSize]byte
	p := format.AppendWALRecord(rec[:0], format.WALRecord{Op: format.WALOpHash, FilterID: b.id, Layer: layer, Hash: h})
	if err := f.logAdds(p); err != nil {
		return false, err
	}
	return true, nil
}

// hashRecordSize is the size of a hash record, a Bloom add's.
const hashRecordSize = 1 + 8 + 1 + 8

// AddMany adds every key, in order, as Add would one after another (like
// RedisBloom's BF.MADD), with one WAL write and one sync (more only past
// the WAL's 16 MiB record limit, about 900,000 new keys a record).
// results[i] is
// Add's answer for key i: whether it was new. It stops at the first key it
// cannot add (ErrFull: a NonScaling filter at capacity, or the chain at
// its most layers, 64, or at a layer whose tightened error rate or
// expanded capacity no layer can have, which can come first; or the
// error creating the new layer it needs, such as
// a full disk) and returns the results of the keys before it, which
// are added and durable, with that error: len(results) is the failing
// key's index. If the filter cannot be changed (closed, dropped, broken,
// incomplete) or the store fails (ErrFailed), results is nil: nothing is
// acknowledged, though some keys' bits may be set.
//
// The keys' blocks are prefetched a batch ahead (see
// bloom.Filter.AddNewHashes), so that their cache misses overlap.
func (f *Bloom) AddMany(keys [][]byte) ([]bool, error) { return f.addMany(hashAll(keys)) }

// AddManyHash is AddMany for hashed keys.
func (f *Bloom) AddManyHash(hs []uint64) ([]bool, error) { return f.addMany(hs) }

func (f *Bloom) addMany(hs []uint64) ([]bool, error) {
	b := f.base()
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.end()
	out := make([]bool, len(hs))
	r := records{buf: make([]byte, 0, len(batchHeader)+hashRecordSize*len(hs))}
	// Keys already set must still be logged when a later one fails:
	// their bits are in the map and later adds of them will answer "not
	// new". The keys from the failing one on are not added: answer for
	// those before.
	var n int
	var addErr error
	if err := b.guardChange(func() error {
		n, addErr = f.addManyLocked(hs, out, &r)
		return nil
	}); err != nil {
		b.mu.Unlock()
		return nil, err
	}
	out = out[:n]
	// One record (a batch record of hash parts, or a single add's),
	// more only past the WAL's record size limit.
	payloads := r.done()
	if len(payloads) == 0 {
		lsn := b.lastLSN
		b.mu.Unlock()
		if err := b.settleNoop(lsn); err != nil {
			return nil, err
		}
		return out, addErr
	}
	if err := f.logAdds(payloads...); err != nil {
		return nil, err
	}
	return out, addErr
}

// logAdds logs the records of adds whose bits are set and waits until
// they are durable. Called with b.mu held, which it releases.
func (f *Bloom) logAdds(payloads ...[]byte) error {
	b := f.b
	b.dirty.Store(true)
	if hook := b.s.hooks.afterBits; hook != nil {
		hook()
	}
	lsn, err := b.s.log.Append(payloads...)
	if err != nil {
		// The bits are set and no record will follow: fail the store
		// while the mutex is held, so that an add finding these bits
		// later (and answering "not new") sees the failure.
		err = b.s.fail(err)
		b.mu.Unlock()
		return err
	}
	b.lastLSN = lsn
	b.mu.Unlock()
	return b.wait(lsn)
}

// addManyLocked answers hs into out[:len(hs)] as addLocked would one key
// after another, and encodes the hash records of the keys added into r.
// It goes a chunk of keys at a time: an older layer's answers come from
// its batched lookup (older layers do not change here), the newest
// layer's from AddNewHashes, which stops where the layer is full and a key
// must grow the chain; the chain grows, and the keys from there on start
// over against it. It returns how many keys it answered: len(hs), or, with
// the error, the index of the key it could not add. Called with b.mu held.
func (f *Bloom) addManyLocked(hs []uint64, out []bool, r *records) (int, error) {
	var held [manyChunk]bool
	var blocks [manyChunk]uint64
	for i := 0; i < len(hs); {
		layers := *f.layers.Load()
		n := len(layers) - 1
		c := min(manyChunk, len(hs)-i)
		chunk, res := hs[i:i+c], out[i:i+c]
		var skip []bool
		if n > 0 {
			skip = held[:c]
			heldBy(layers[:n], chunk, skip)
		}
		done := layers[n].AddNewHashes(chunk, skip, res, blocks[:c], f.b.meta.Layers[n].Capacity)
		for j, added := range res[:done] {
			if added {
				// Its block's words changed: the page's checksum is stale.
				f.b.regions[n].Touch(blocks[j]*bloom.BlockWords, (blocks[j]+1)*bloom.BlockWords)
				r.add(format.WALRecord{Op: format.WALOpHash, FilterID: f.b.id, Layer: n, Hash: chunk[j]})
			}
		}
		i += done
		if done < c {
			if _, err := f.grow(layers); err != nil {
				return i, err
			}
		}
	}
	return len(hs), nil
}

// heldBy answers into out whether some filter of layers holds each of hs,
// len(hs) <= manyChunk, newest layer first.
func heldBy(layers []*bloom.Filter, hs []uint64, out []bool) {
	var p pending
	p.start(hs, out)
	for i := len(layers) - 1; i >= 0 && p.n > 0; i-- {
		layers[i].HasManyHash(p.hs[:p.n], p.res[:p.n])
		p.settle(out)
	}
}

// addGuarded is addLocked under the fault guard of changes
// (recoverChange). Called with b.mu held.
func (f *Bloom) addGuarded(h uint64) (added bool, layer int, err error) {
	defer f.b.recoverChange(&err, debug.SetPanicOnFault(true))
	return f.addLocked(h)
}

// addLocked sets h's bits in the newest layer unless some layer has them,
// growing the chain when the newest layer is at capacity. Called with
// b.mu held.
func (f *Bloom) addLocked(h uint64) (added bool, layer int, err error) {
	layers := *f.layers.Load()
	for i := len(layers) - 1; i >= 0; i-- {
		if layers[i].HasHash(h) {
			return false, 0, nil
		}
	}
	n := len(layers) - 1
	if last := layers[n]; last.Count() >= f.b.meta.Layers[n].Capacity {
		if layers, err = f.grow(layers); err != nil {
			return false, 0, err
		}
		n++
	}
	added, block := layers[n].AddHashBlock(h)
	if added {
		// Its block's words changed: the page's checksum is stale.
		f.b.regions[n].Touch(block*bloom.BlockWords, (block+1)*bloom.BlockWords)
	}
	return added, n, nil
}

// grow adds a layer to the chain layers, the filter's current one, and
// returns the new chain; a NonScaling filter refuses with ErrFull. The
// new layer's file and catalog entry are durable when it returns (see
// addLayer). Called with b.mu held.
func (f *Bloom) grow(layers []*bloom.Filter) ([]*bloom.Filter, error) {
	if f.cfg.NonScaling {
		return nil, fmt.Errorf("store: bloom filter %q holds its capacity of %d: %w", f.b.name(), f.cfg.Capacity, ErrFull)
	}
	l, err := bloomLayer(f.cfg, len(layers))
	if err != nil {
		return nil, f.b.unplannable(len(layers), err)
	}
	r, err := f.b.addLayer(l)
	if err != nil {
		return nil, err
	}
	bf, err := openBloomLayer(r, l)
	if err != nil {
		return nil, err
	}
	grown := append(append([]*bloom.Filter(nil), layers...), bf)
	// Lookups through the one-layer front would not see the new layer:
	// every lookup that starts once it is published takes the slow path.
	f.guard.show(f.slow)
	f.layers.Store(&grown)
	return grown, nil
}

// Has reports whether key may have been added: false means certainly not.
// A closed, dropped, broken or incomplete filter answers true.
func (f *Bloom) Has(key []byte) bool {
	// Small enough to be inlined: the caller calls the front itself, and
	// a one-layer filter's lookup runs one call deep, as bloom.Filter.Has
	// does. As a method that checked off, then called the layer's lookup
	// and checked off again, misses with each key hashed in the loop took
	// about 1.3x the layer's own Has (a throwaway comparison on a 1e7-key
	// store filter, 20 interleaved rounds).
	g := f.front.Load()
	beforeFrontRead(f.b, g)
	return g.Has(key)
}

// HasHash is Has for a hashed key.
func (f *Bloom) HasHash(h uint64) bool {
	g := f.front.Load()
	beforeFrontRead(f.b, g)
	return g.HasHash(h)
}

// hasSlow is slow's Has.
func (f *Bloom) hasSlow(key []byte) bool { return f.hasHashSlow(Hash(key)) }

// hasHashSlow is slow's HasHash: every layer, newest first, then the
// read-only overlay.
func (f *Bloom) hasHashSlow(h uint64) bool {
	b := f.b
	if b.off.Load() {
		return true
	}
	beforeLookupRead(b)
	layers := *f.layers.Load()
	for i := len(layers) - 1; i >= 0; i-- {
		if layers[i].HasHash(h) {
			return true
		}
	}
	// A read-only store: then each layer's live words with the bits
	// logged adds set ORed in. (Live words first: a hit reads one block;
	// the overlay's bits are another cache miss, for a block it noted.)
	if ro := b.ro; ro != nil && ro.bloomHas(layers, h) {
		return true
	}
	// Close or Drop may have replaced the mapping by placeholder pages while
	// this lookup read it: "absent" holds only if the filter is still on.
	return b.off.Load()
}

// HasMany answers Has for every key, in one pass per layer that keeps
// several cache misses in flight. It allocates its result; HasManyInto
// reuses one.
func (f *Bloom) HasMany(keys [][]byte) []bool { return f.HasManyInto(nil, keys) }

// HasManyHash is HasMany for hashed keys.
func (f *Bloom) HasManyHash(hs []uint64) []bool { return f.HasManyHashInto(nil, hs) }

// HasManyInto is HasMany writing into dst, grown only if its capacity is
// below len(keys); it returns dst[:len(keys)]. With room in dst it
// allocates nothing: keys are hashed in chunks on the stack.
func (f *Bloom) HasManyInto(dst []bool, keys [][]byte) []bool {
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

// HasManyHashInto is HasManyInto for hashed keys.
func (f *Bloom) HasManyHashInto(dst []bool, hs []uint64) []bool {
	dst = fitBools(dst, len(hs))
	for i := 0; i < len(hs); i += manyChunk {
		n := min(manyChunk, len(hs)-i)
		f.hasManyChunk(hs[i:i+n], dst[i:i+n])
	}
	return dst
}

// hasManyChunk answers up to manyChunk hashed keys into out.
func (f *Bloom) hasManyChunk(hs []uint64, out []bool) {
	b := f.base()
	if b.off.Load() {
		allTrue(out)
		return
	}
	beforeLookupRead(b)
	layers := *f.layers.Load()
	read := func() {
		if len(layers) == 1 {
			layers[0].HasManyHash(hs, out)
		} else {
			heldBy(layers, hs, out)
		}
		if ro := b.ro; ro != nil {
			for j, h := range hs {
				out[j] = out[j] || ro.bloomHas(layers, h)
			}
		}
	}
	if !b.guardLookup(read, f.guard.showSlow) || b.off.Load() {
		// Closed or dropped, maybe while reading: no answer is "absent".
		allTrue(out)
	}
}

// Card returns the number of items added (adds that reported new); 0 for
// a nil or zero handle.
func (f *Bloom) Card() uint64 {
	if f.base().isStandIn() {
		return 0
	}
	return sumCounts(*f.layers.Load())
}

// Info describes the filter from the counts the store keeps in memory:
// O(layers), no data read (see the Info type; Fill reads the data). A
// broken filter's Info has State "broken" and comes with an error
// wrapping ErrCorrupt that names the file.
func (f *Bloom) Info() (Info, error) { return f.base().info() }

// Fill counts the filter's set bits by reading every data word: its cost
// grows with the filter's size (milliseconds per 10 MB), unlike Info's. A
// broken filter returns the error Info does.
func (f *Bloom) Fill() (FillInfo, error) { return f.base().fill() }
