package mmapbits

import (
	"fmt"
	"sync/atomic"
)

// memRegion is a region with no file behind it.
type memRegion struct {
	seq    uint64 // first: 8-byte aligned on every platform
	stamp  atomic.Uint64
	h      Header
	words  []uint64
	closed atomic.Bool
}

// NewMem returns a region of h.DataPages zeroed pages held only in memory.
// Sync and Touch do nothing; Seq is the region's own word. It is what
// in-memory filters and tests use.
func NewMem(h Header) (Region, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	h.Version = FormatVersion
	return &memRegion{h: h, words: make([]uint64, h.DataWords())}, nil
}

func (r *memRegion) Header() Header   { return r.h }
func (r *memRegion) NumWords() uint64 { return uint64(len(r.words)) }
func (r *memRegion) Words() []uint64  { return r.words }
func (r *memRegion) Seq() *uint64     { return &r.seq }

// Stamp returns what SetStamp stored last (0 at first).
func (r *memRegion) Stamp() uint64 { return r.stamp.Load() }

// SetStamp stores v, in memory only.
func (r *memRegion) SetStamp(v uint64) { r.stamp.Store(v) }

// Touch does nothing: a memory region has nothing to write back and no
// checksums.
func (r *memRegion) Touch(from, to uint64) {}

// UpdateSums computes nothing: a memory region has no checksums.
func (r *memRegion) UpdateSums(bool) (int, error) { return 0, nil }

// InvalidateSums does nothing.
func (r *memRegion) InvalidateSums() {}

// CheckPage reports no checksum.
func (r *memRegion) CheckPage(uint64) PageCheck { return PageCheck{} }

func (r *memRegion) Word(i uint64) (uint64, bool) {
	if r.closed.Load() || i >= uint64(len(r.words)) {
		return 0, false
	}
	return atomic.LoadUint64(&r.words[i]), true
}

func (r *memRegion) Sync() error {
	if r.closed.Load() {
		return fmt.Errorf("mmapbits: sync: %w", ErrClosed)
	}
	return nil
}

func (r *memRegion) Close() error {
	if r.closed.Swap(true) {
		return fmt.Errorf("mmapbits: close: %w", ErrClosed)
	}
	return nil
}
