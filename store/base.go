package store

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// filterBase is what every filter handle shares: its catalog entry, its
// mapped layers, its writer mutex and its overlay.
type filterBase struct {
	s *Store
	// nm is the filter's name (see name); Rename changes it, with the
	// commit gate held exclusively, so every catalog write of the filter
	// (create, new layer, Load's start, checkpoint: all under the gate)
	// sees the name the catalog has.
	nm   atomic.Pointer[string]
	id   uint64        // catalog id; never changes
	kind mmapbits.Kind // never changes
	// broken says why the filter's files cannot be used (wraps
	// ErrCorrupt and names the file); nil for a healthy filter. Set when
	// the handle is built, never changed. In the stand-in of nil and zero
	// handles (standIn) it is the error naming the handle.
	broken error
	// ro holds, in a read-only store, what the WAL records after the
	// filter's checkpoint say; nil otherwise. Never changed once built.
	ro *roOverlay

	// off makes lookups answer "maybe present": the store is closed, the
	// filter dropped, broken or incomplete. It is set before the mapping
	// goes away, and lookups that answer "absent" check it again after
	// reading, so a lookup racing Close or Drop never reports the zero
	// pages it may have read.
	off atomic.Bool
	// toSlow points the handle's lookup front at its slow path, which
	// checks off before it reads (lookupGuard.showSlow); nil for a
	// bitmap, whose Get checks off itself. Set when the handle is built.
	toSlow func()

	// mu serializes this filter's mutations, guards meta, regions, ov,
	// lastLSN and loading.
	mu      sync.Mutex
	meta    *format.FilterMeta
	regions []mmapbits.Region
	// spare is the layer file that addLayer made but could not record in
	// the catalog without failing the store (a full disk, a catalog lock
	// held by another process): the next addLayer for the same layer
	// takes it, instead of failing on a file that is in the way. nil if
	// none. Guarded by mu.
	spare *spareLayer

	ov         overlay
	dropped    atomic.Bool
	dirty      atomic.Bool // changed since the last checkpoint's msync
	incomplete atomic.Bool // a bulk Load did not finish

	// lastLSN is the LSN of this filter's latest logged change. A call
	// that changes nothing (already present, nothing to delete) answers
	// from state that may include that change, so it waits for it to be
	// durable too.
	lastLSN uint64
	// ordLSN is the LSN of this filter's latest change logged by an
	// ordinary call (not ApplyExternal): Encode makes it durable before
	// it hands out a record that deletes from the filter (see
	// Batch.Encode).
	ordLSN atomic.Uint64

	// loading is non-nil while a Load of the filter runs and is closed
	// when it ends: other mutations of the filter wait for it. loadDone is
	// set once the Load added every key, for its closing checkpoint.
	loading  chan struct{}
	loadDone bool

	// applyWrites stores after-images in a layer's map (kind-specific:
	// cuckoo brackets them for its lookups). Called with mu held.
	applyWrites func(layer int, writes []format.WordWrite) error
	// items returns the current item count of each layer, for checkpoints.
	items func() []uint64
}

func newBase(s *Store, name string, m *format.FilterMeta) *filterBase {
	b := &filterBase{s: s, id: m.ID, kind: m.Kind, meta: m}
	b.nm.Store(&name)
	return b
}

// The stand-ins of nil and zero handles, one per kind: what base returns
// for a nil handle, or a zero one that no Store call made. A stand-in is a
// broken filter of no open store, whose broken error wraps ErrInvalid and
// names the handle, so the checks every handle goes through already answer
// for it: lookups answer "maybe present" (its off is set, as a closed
// filter's is), and every call that returns an error returns that one (the
// mutations' check, Info, Fill). Nothing panics, as a nil *os.File's
// methods return os.ErrInvalid.
var (
	nilBloom    = standIn(mmapbits.KindBloom, "Bloom", "Store.CreateBloom, EnsureBloom or Bloom")
	nilCuckoo   = standIn(mmapbits.KindCuckoo, "Cuckoo", "Store.CreateCuckoo, EnsureCuckoo or Cuckoo")
	nilCounting = standIn(mmapbits.KindCounting, "Counting", "Store.CreateCounting, EnsureCounting or Counting")
	nilBitmap   = standIn(mmapbits.KindBitmap, "Bitmap", "Store.CreateBitmap, EnsureBitmap or Bitmap")
)

// standInStore is the stand-ins' store: a zero Store, neither read-only
// nor closed, so that check gets to their broken error.
var standInStore Store

// standIn returns the stand-in of nil and zero handles of kind, whose Go
// type is typ and which the calls from make.
func standIn(kind mmapbits.Kind, typ, from string) *filterBase {
	b := &filterBase{s: &standInStore, kind: kind, broken: nilHandleError(typ, from)}
	b.off.Store(true)
	name := "nil or zero " + typ + " handle" // for errors that name the filter
	b.nm.Store(&name)
	return b
}

// isStandIn reports whether b is the stand-in of nil and zero handles.
func (b *filterBase) isStandIn() bool { return b.s == &standInStore }

// name returns the filter's current name: the one its catalog entry has,
// while the caller holds the commit gate (shared or exclusive).
func (b *filterBase) name() string { return *b.nm.Load() }

// check returns the error a mutation of this filter gets now, if any.
func (b *filterBase) check() error {
	s := b.s
	switch {
	case s.opts.ReadOnly:
		return fmt.Errorf("store: filter %q: %w", b.name(), ErrReadOnly)
	case s.closed.Load():
		return fmt.Errorf("store: filter %q: %w", b.name(), ErrClosed)
	case b.dropped.Load():
		return fmt.Errorf("store: filter %q was dropped (or replaced by a Rename over it): %w", b.name(), ErrClosed)
	case b.broken != nil:
		return b.broken
	}
	if err := s.failed(); err != nil {
		return err
	}
	return b.unusable()
}

// unusable returns the error of a broken filter or one a Load left
// incomplete (nil for any other): such a filter answers every lookup
// "maybe" and changes none. (A Load still running has left nothing
// incomplete yet.)
func (b *filterBase) unusable() error {
	if b.broken != nil {
		return b.broken
	}
	if b.incomplete.Load() {
		return fmt.Errorf("store: filter %q: %w", b.name(), ErrIncomplete)
	}
	return nil
}

// lock enters a mutation: it takes the store's commit gate (shared), so
// that a checkpoint sees no half-done mutation, and the filter's mutex,
// waiting while a Load of the filter runs. On success the caller holds
// both and releases mu itself and the gate with end.
func (b *filterBase) lock() error {
	for {
		b.s.gate.RLock()
		if err := b.check(); err != nil {
			b.s.gate.RUnlock()
			return err
		}
		b.mu.Lock()
		if b.loading == nil {
			return nil
		}
		done := b.loading
		b.mu.Unlock()
		b.s.gate.RUnlock()
		<-done
	}
}

func (b *filterBase) end() { b.s.gate.RUnlock() }

// logWords appends t's after-images as one record, stages them, and
// returns the record's LSN. Called with b.mu held: a failed append fails
// the store before the mutex is released.
func (b *filterBase) logWords(t *wordTx, delta int8) (uint64, error) {
	rec := format.WALRecord{Op: format.WALOpWords, FilterID: b.id, Layer: t.layer, Delta: delta, Writes: t.writes}
	lsn, err := b.s.log.Append(format.AppendWALRecord(nil, rec))
	if err != nil {
		return 0, b.s.fail(err)
	}
	b.stage(lsn, t)
	b.lastLSN = lsn
	b.ordLSN.Store(lsn)
	return lsn, nil
}

// settleNoop is settle for a call that logged nothing: it waits for the
// filter's latest logged change, which its answer may rest on. Called
// without b.mu; lsn is b.lastLSN read under it.
func (b *filterBase) settleNoop(lsn uint64) error {
	if lsn == 0 {
		return b.s.failedNow()
	}
	return b.settle(lsn)
}

// wait waits until lsn is durable to the mode's promise. An answer is
// acknowledged only if the store has not failed meanwhile: a failure may
// have left state this answer rests on (bits of an add whose record never
// made it) in memory only. Called without b.mu.
func (b *filterBase) wait(lsn uint64) error {
	if err := b.s.log.WaitDurable(lsn); err != nil {
		return b.s.fail(err)
	}
	return b.s.failedNow()
}

// settle waits until lsn is durable and, under SyncAlways, applies every
// pending change through lsn. Called without b.mu.
func (b *filterBase) settle(lsn uint64) error {
	if err := b.wait(lsn); err != nil {
		return err
	}
	if b.s.opts.Sync == SyncAlways {
		b.mu.Lock()
		err := b.applyThrough(lsn)
		b.mu.Unlock()
		if err != nil {
			return b.s.fail(err)
		}
	}
	return nil
}

// replayWrites applies logged after-images during recovery and declares
// the words written: a store of the value a word already holds must still
// dirty its page, which an earlier failed sync may have left clean with
// the value in memory only.
func (b *filterBase) replayWrites(r format.WALRecord) error {
	if err := b.writeWords(r.Layer, r.Writes); err != nil {
		return fmt.Errorf("store: filter %q: replay: %w", b.name(), err)
	}
	b.dirty.Store(true)
	return nil
}

// writeWords stores after-images in a layer's map (applyWrites) and then
// declares the words written (Region.Touch): their pages' checksums are
// stale until the next checkpoint, and the simulated mapper must write
// the pages even where a value did not change. Called with mu held.
func (b *filterBase) writeWords(layer int, writes []format.WordWrite) error {
	err := b.applyWrites(layer, writes)
	if layer < len(b.regions) {
		reg := b.regions[layer]
		for _, w := range writes {
			reg.Touch(w.Index, w.Index+1)
		}
	}
	return err
}

// tx starts a word transaction on a layer. Called with b.mu held.
func (b *filterBase) tx(layer int) *wordTx {
	t := &wordTx{b: b, layer: layer, words: b.regions[layer].Words()}
	t.writes = t.buf[:0]
	return t
}

func (b *filterBase) path(layer int) string { return b.s.layerPath(b.id, layer) }

// addLayer creates the file of layer len(meta.Layers) with geometry l and
// records it in the catalog; the file is made durable first, so a crash in
// between leaves only an orphan file that the next Open removes. Called
// with b.mu held.
func (b *filterBase) addLayer(l format.LayerMeta) (mmapbits.Region, error) {
	m := *b.meta
	m.Layers = append(append([]format.LayerMeta(nil), m.Layers...), l)
	if len(m.Layers) > format.MaxLayers {
		return nil, fmt.Errorf("store: filter %q: %w: already %d layers", b.name(), ErrFull, format.MaxLayers)
	}
	layer := len(m.Layers) - 1
	r, err := b.layerFile(layer, l, m.Header(layer, b.s.id))
	if err != nil {
		return nil, fmt.Errorf("store: filter %q: new layer: %w", b.name(), err)
	}
	// The counts and the synced LSN stay those of the last checkpoint:
	// recovery replays the WAL after it on top of them.
	m.State = b.state()
	if err := b.s.cat.PutFilters(0, map[string]*format.FilterMeta{b.name(): &m}); err != nil {
		// The commit may have reached the disk: the file stays (the next
		// Open keeps it, or removes it as a proven orphan).
		if isNoSpace(err) || catalogUntouched(err) {
			// The store goes on (see the package doc's fault model),
			// and so does the file: the next attempt at this layer
			// takes it.
			b.spare = &spareLayer{layer: layer, meta: l, r: r}
			return nil, fmt.Errorf("store: filter %q: new layer: %w", b.name(), err)
		}
		r.Close()
		return nil, b.s.catalogFailed(err)
	}
	b.meta = &m
	b.regions = append(b.regions, r)
	return r, nil
}

// unplannable is the error of a grow whose next layer, layer, the
// filter's configuration cannot plan (err): each layer tightens the error
// rate or expands the capacity, until one is out of a layer's range
// before the filter has format.MaxLayers layers. The filter is full; err
// is quoted, not wrapped, since the caller's arguments were valid.
func (b *filterBase) unplannable(layer int, err error) error {
	return fmt.Errorf("store: filter %q: %w: its layer %d cannot be made (%v)", b.name(), ErrFull, layer, err)
}

// spareLayer is a layer file made for layer with geometry meta, mapped as
// r, that the catalog does not record (see filterBase.spare). Nothing
// has written its data.
type spareLayer struct {
	layer int
	meta  format.LayerMeta
	r     mmapbits.Region
}

// layerFile makes the file of a new layer with geometry l and header h,
// or takes the spare one made for the same layer and geometry by an
// attempt whose catalog commit failed. A spare made for another layer or
// geometry (the filter changed since) is unmapped and removed first.
// Called with b.mu held.
func (b *filterBase) layerFile(layer int, l format.LayerMeta, h mmapbits.Header) (mmapbits.Region, error) {
	if sp := b.spare; sp != nil {
		b.spare = nil
		if sp.layer == layer && sp.meta == l {
			return sp.r, nil
		}
		sp.r.Close()
		if err := b.s.opts.mapper.Remove(b.path(sp.layer)); err != nil {
			return nil, err
		}
	}
	return b.s.opts.mapper.Create(b.path(layer), h)
}

// snapshotMeta returns the meta with current item counts, as of a
// checkpoint at lsn. Called with b.mu held.
func (b *filterBase) snapshotMeta(lsn uint64) *format.FilterMeta {
	m := *b.meta
	m.Layers = append([]format.LayerMeta(nil), m.Layers...)
	for i, n := range b.items() {
		m.Layers[i].Items = n
	}
	m.State = b.state()
	m.SyncedLSN = lsn
	return &m
}

// state is the catalog state to record. Called with b.mu held.
func (b *filterBase) state() format.FilterState {
	if b.incomplete.Load() || b.loading != nil && !b.loadDone {
		return format.StateLoading
	}
	return format.StateOK
}

func (b *filterBase) closeRegions() {
	for _, r := range b.regions {
		r.Close()
	}
	if b.spare != nil {
		b.spare.r.Close() // its file: an orphan the next Open removes
		b.spare = nil
	}
}

// counted is a filter layer that keeps its item count.
type counted interface{ Count() uint64 }

// layerCounts returns each layer's item count.
func layerCounts[L counted](layers []L) []uint64 {
	out := make([]uint64, len(layers))
	for i, l := range layers {
		out[i] = l.Count()
	}
	return out
}

// sumCounts returns the item count of a chain of layers.
func sumCounts[L counted](layers []L) uint64 {
	var n uint64
	for _, l := range layers {
		n += l.Count()
	}
	return n
}

// addDelta returns n changed by d, never below 0.
func addDelta(n uint64, d int64) uint64 {
	if d < 0 && uint64(-d) > n {
		return 0
	}
	return uint64(int64(n) + d)
}
