package store

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/filterstore/filterstore/bitmap"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// Bitmap is a persistent bit array addressed by offset. Set and Clear are
// logged as after-images of the word they change and reach the file only
// once durable. A nil or zero Bitmap (one no Store call returned) answers
// Get and GetMany true ("maybe set") and Count and Bits 0, and its other
// methods return an error wrapping ErrInvalid that names it.
type Bitmap struct {
	b    *filterBase
	bm   *bitmap.Bitmap // nil if broken
	bits uint64
	// guard is Options.GuardLookups: Get reads under the fault guard.
	guard bool
}

// base returns the handle's filterBase: for a nil or zero handle, the
// stand-in nilBitmap.
func (f *Bitmap) base() *filterBase {
	if f == nil || f.b == nil {
		return nilBitmap
	}
	return f.b
}

// CreateBitmap creates a bitmap of bits bits (1..2^40).
func (s *Store) CreateBitmap(name string, bits uint64) (*Bitmap, error) {
	if bits == 0 || bits > bitmap.MaxBits {
		return nil, fmt.Errorf("store: %w: bitmap bits must be in 1..%d, got %d", ErrInvalid, uint64(bitmap.MaxBits), bits)
	}
	l := format.LayerMeta{Capacity: bits, Size: bits, DataPages: mmapbits.PagesFor(bitmap.Words(bits))}
	m := &format.FilterMeta{Kind: mmapbits.KindBitmap, Capacity: bits, Bits: bits, NonScaling: true, Layers: []format.LayerMeta{l}}
	h, err := s.create(name, m, func(b *filterBase) (handle, error) { return newBitmap(b) })
	if err != nil {
		return nil, err
	}
	return h.(*Bitmap), nil
}

// Bitmap returns the bitmap called name.
func (s *Store) Bitmap(name string) (*Bitmap, error) {
	h, err := s.lookup(name, mmapbits.KindBitmap)
	if err != nil {
		return nil, err
	}
	return h.(*Bitmap), nil
}

func newBitmap(b *filterBase) (*Bitmap, error) {
	if len(b.meta.Layers) != 1 || b.meta.Layers[0].Size != b.meta.Bits {
		return nil, fmt.Errorf("bitmap layers disagree with its size %d", b.meta.Bits)
	}
	bm, err := bitmap.New(b.meta.Bits, b.regions[0].Words())
	if err != nil {
		return nil, err
	}
	bm.SetCount(b.meta.Layers[0].Items)
	f := &Bitmap{b: b, bm: bm, bits: b.meta.Bits, guard: b.s.opts.GuardLookups}
	b.items = func() []uint64 { return []uint64{bm.Count()} }
	b.applyWrites = func(layer int, ws []format.WordWrite) error {
		words := bm.Words()
		for _, w := range ws {
			if layer != 0 || w.Index >= uint64(len(words)) {
				return fmt.Errorf("word %d of layer %d is outside the bitmap (%d words, 1 layer)", w.Index, layer, len(words))
			}
			atomic.StoreUint64(&words[w.Index], w.Value)
		}
		return nil
	}
	return f, nil
}

func (f *Bitmap) replay(r format.WALRecord) error {
	if r.Op != format.WALOpWords {
		return fmt.Errorf("store: %w: bitmap %q got a hash record", ErrCorrupt, f.b.name())
	}
	if err := f.b.replayWrites(r); err != nil {
		return err
	}
	f.count(r)
	return nil
}

func (f *Bitmap) count(r format.WALRecord) {
	if f.bm != nil {
		f.bm.SetCount(addDelta(f.bm.Count(), int64(r.Delta)))
	}
}

// Set sets the bit at off and reports whether it was clear.
func (f *Bitmap) Set(off uint64) (bool, error) { return f.write(off, true) }

// Clear clears the bit at off and reports whether it was set.
func (f *Bitmap) Clear(off uint64) (bool, error) { return f.write(off, false) }

func (f *Bitmap) write(off uint64, set bool) (bool, error) {
	b := f.base()
	if err := b.lock(); err != nil {
		return false, err
	}
	defer b.end()
	if off >= f.bm.Bits() {
		b.mu.Unlock()
		return false, fmt.Errorf("store: bitmap %q: %w: offset %d out of range 0..%d", f.b.name(), ErrInvalid, off, f.bm.Bits()-1)
	}
	t := b.tx(0)
	m := uint64(1) << (off % 64)
	w, err := f.loadWord(t, off/64)
	if err != nil {
		b.mu.Unlock()
		return false, err
	}
	if (w&m != 0) == set {
		lsn := b.lastLSN
		b.mu.Unlock()
		return false, b.settleNoop(lsn)
	}
	delta := int8(1)
	if set {
		t.Store(off/64, w|m)
	} else {
		t.Store(off/64, w&^m)
		delta = -1
	}
	lsn, err := b.logWords(t, delta)
	if err == nil {
		// Counted once logged: a write that fails changes nothing.
		f.bm.SetCount(uint64(int64(f.bm.Count()) + int64(delta)))
	}
	b.mu.Unlock()
	if err != nil {
		return false, err
	}
	return true, b.settle(lsn)
}

// loadWord reads word i through t (its pending value, else the mapped
// word) under the fault guard of changes (recoverChange). Called with
// b.mu held.
func (f *Bitmap) loadWord(t *wordTx, i uint64) (w uint64, err error) {
	defer f.b.recoverChange(&err, debug.SetPanicOnFault(true))
	return t.Load(i), nil
}

// SetMany sets the bit at every offset, in order, as Set would one after
// another (like Redis pipelining SETBIT), logging the changes in one WAL
// record and waiting once for durability. results[i] is Set's answer for
// offs[i]: whether the bit was clear. It stops at the first offset out of
// range (ErrInvalid) and returns the results of the offsets before it,
// which are durable, with that error: len(results) is the bad offset's
// index. If the bitmap cannot be changed or the store fails (ErrFailed),
// results is nil: nothing is acknowledged.
func (f *Bitmap) SetMany(offs []uint64) ([]bool, error) { return applyMany(f, batchBitmapSet, offs) }

// ClearMany clears the bit at every offset, as SetMany sets them;
// results[i] is Clear's answer for offs[i]: whether the bit was set.
func (f *Bitmap) ClearMany(offs []uint64) ([]bool, error) {
	return applyMany(f, batchBitmapClear, offs)
}

// GetMany answers Get for every offset.
func (f *Bitmap) GetMany(offs []uint64) []bool {
	out := make([]bool, len(offs))
	b := f.base()
	if b.off.Load() {
		allTrue(out) // closed or unusable: no bit is "clear"
		return out
	}
	if b.ro != nil || b.ov.size.Load() > 0 && b.s.opts.Sync == SyncInterval {
		// Through an overlay (which locks the bitmap, and releases it by
		// a deferred unlock, which a fault's unwinding runs): one at a
		// time, as Get, under the guard.
		read := func() {
			for i, off := range offs {
				out[i] = f.Get(off)
			}
		}
		if !b.guardLookup(read, func() {}) || b.off.Load() {
			allTrue(out)
		}
		return out
	}
	beforeLookupRead(b)
	n := f.bm.Bits()
	read := func() {
		for i, off := range offs {
			out[i] = off < n && f.bm.Get(off)
		}
	}
	// A fault sets off, which Get checks before it reads.
	if !b.guardLookup(read, func() {}) || b.off.Load() {
		// Closed or dropped, maybe while reading: no answer is "clear".
		allTrue(out)
	}
	return out
}

// Get reports whether the bit at off is set; offsets out of range are
// clear. A closed, dropped, broken or incomplete bitmap answers true:
// unknown, never "clear" for a bit that may be set.
func (f *Bitmap) Get(off uint64) bool {
	b := f.base()
	if b.off.Load() {
		return true
	}
	if f.guard {
		return f.getGuarded(off)
	}
	beforeLookupRead(b)
	if off >= f.bm.Bits() {
		return false
	}
	bit := uint64(1) << (off % 64)
	var set bool
	if b.ro != nil {
		// Bits do not move: the overlay's word as of Open, else the
		// live file (see readonly.go).
		set = b.ro.view(0).Load(off/64)&bit != 0
	} else if b.ov.size.Load() > 0 && b.s.opts.Sync == SyncInterval {
		set = f.overlayBit(off, bit)
	} else {
		set = f.bm.Get(off)
	}
	// Close or Drop may have replaced the mapping while this read it.
	return set || b.off.Load()
}

// overlayBit reads bit of the word holding off through the writer's
// overlay, with the mutex held, released by a deferred unlock: a fault's
// unwinding (Options.GuardLookups) runs it.
func (f *Bitmap) overlayBit(off, bit uint64) bool {
	b := f.b
	b.mu.Lock()
	defer b.mu.Unlock()
	return overlayView{b, 0, f.bm.Words()}.Load(off/64)&bit != 0
}

// getGuarded is Get with Options.GuardLookups: an unguarded copy of the
// handle's Get, with faults turned into panics, which recoverLookup
// recovers: a fault answers true and sets off, which Get checks before it
// reads. (Get keeps the guard out of its own body: with two conditional
// defers in it, or its read in a second function, an unguarded Get took
// 1.5-1.7x its time in BenchmarkLookup.)
func (f *Bitmap) getGuarded(off uint64) (set bool) {
	defer f.b.recoverLookup(&set, func() {}, debug.SetPanicOnFault(true))
	g := *f
	g.guard = false
	return g.Get(off)
}

// Count returns the number of set bits; 0 for a nil or zero handle.
func (f *Bitmap) Count() uint64 {
	if f == nil || f.bm == nil {
		return 0
	}
	return f.bm.Count()
}

// Bits returns the size of the bitmap; 0 for a nil or zero handle.
func (f *Bitmap) Bits() uint64 {
	if f == nil {
		return 0
	}
	return f.bits
}

// Info describes the bitmap; see (*Bloom).Info.
func (f *Bitmap) Info() (Info, error) { return f.base().info() }

// Fill is the share of set bits. A bitmap keeps its count of set bits, so
// unlike the other kinds' Fill this reads no data: Used is Count.
func (f *Bitmap) Fill() (FillInfo, error) { return f.base().fill() }
