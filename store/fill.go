package store

import (
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/mmapbits"
)

// FillInfo is how much of a filter's data is in use: set bits (bloom,
// bitmap), non-zero counters (counting) or slots holding a fingerprint
// (cuckoo), out of all of them. Unlike Info, it is counted from the data
// words themselves (a bitmap's from its kept count of set bits), so it
// costs a read of the whole filter: each handle's Fill says so.
//
// It counts the mapped data as it is. Under SyncInterval, a cuckoo or
// counting filter's latest changes wait in memory until their record is
// synced, and are counted once applied. In a read-only store, the changes
// the WAL records after the filter's checkpoint (which lookups and Info's
// item counts include) are not counted until a checkpoint writes them.
type FillInfo struct {
	Used   uint64      // over all layers
	Total  uint64      // bits, counters or slots over all layers
	Ratio  float64     // Used / Total; 0 when Total is 0
	Layers []LayerFill // one per layer, oldest first
}

// LayerFill is the fill of one layer.
type LayerFill struct {
	Used  uint64
	Total uint64
	Ratio float64 // Used / Total; 0 when Total is 0
}

// fill counts the filter's data. A broken filter returns its error, a
// closed or dropped one ErrClosed.
func (b *filterBase) fill() (FillInfo, error) {
	b.mu.Lock()
	m := b.meta
	regions := b.regions
	b.mu.Unlock()
	if b.broken != nil {
		return FillInfo{}, b.broken
	}
	if b.s.closed.Load() || b.dropped.Load() {
		return FillInfo{}, fmt.Errorf("store: filter %q: %w", b.name(), ErrClosed)
	}
	counts := b.items()
	var out FillInfo
	for i, l := range m.Layers {
		if i >= len(counts) || i >= len(regions) {
			break
		}
		var lf LayerFill
		words := regions[i].Words()
		count := func(n uint64, f func(uint64) int) (used uint64, err error) {
			err = readMapped(b.path(i), regions[i].Header(), words, func() { used = countWords(words[:n], f) })
			if err != nil {
				err = fmt.Errorf("store: filter %q: fill of layer %d: %w", b.name(), i, err)
			}
			return used, err
		}
		var err error
		switch m.Kind {
		case mmapbits.KindBloom:
			g := bloomGeometry(l)
			lf.Used, err = count(g.Words(), bits.OnesCount64)
			lf.Total = g.Bits()
		case mmapbits.KindCounting:
			g := bloomGeometry(l)
			lf.Used, err = count(g.Words(), bloom.NonzeroCounters)
			lf.Total = g.Words() * 16
		case mmapbits.KindCuckoo:
			g := cuckoo.Geometry{Buckets: l.Size, BucketSize: int(m.BucketSize), FingerprintBits: int(m.FingerprintBits),
				Derivation: cuckoo.Derivation(l.Derivation)}
			lf.Used, err = count(l.Size, g.UsedSlots)
			lf.Total = l.Size * uint64(m.BucketSize)
		case mmapbits.KindBitmap:
			lf.Used, lf.Total = counts[i], l.Size
		}
		if err != nil {
			return FillInfo{}, err
		}
		if lf.Total > 0 {
			lf.Ratio = float64(lf.Used) / float64(lf.Total)
		}
		out.Used += lf.Used
		out.Total += lf.Total
		out.Layers = append(out.Layers, lf)
	}
	if b.s.closed.Load() || b.dropped.Load() {
		// Closed or dropped while counting: the words read may be a
		// closed mapping's placeholder or another file's mapping that
		// reuses its addresses (mmapbits).
		return FillInfo{}, fmt.Errorf("store: filter %q: %w", b.name(), ErrClosed)
	}
	if out.Total > 0 {
		out.Ratio = float64(out.Used) / float64(out.Total)
	}
	return out, nil
}

// countWords sums count over the words, read atomically (the layer
// counts of the filter packages: set bits, nonzero counters, used slots).
func countWords(ws []uint64, count func(uint64) int) uint64 {
	var n uint64
	for i := range ws {
		n += uint64(count(atomic.LoadUint64(&ws[i])))
	}
	return n
}
