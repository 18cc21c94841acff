package store

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/mmapbits"
)

// Info describes a filter. Computing FillRatio reads every data word.
type Info struct {
	Name string
	Kind string // "bloom", "counting", "cuckoo", "bitmap"
	// State is "ok", "incomplete" (a Load did not finish) or "broken"
	// (its files are missing or damaged; Reason says how).
	State      string
	Reason     string // why the filter is broken; "" otherwise
	Capacity   uint64 // sum over layers (bitmap: bits)
	Items      uint64 // bloom: adds that were new; cuckoo, counting: adds - deletes; bitmap: set bits
	Layers     int
	SizeBytes  int64   // on disk, header pages included
	BitsPerKey float64 // data bits / Items; 0 with no items
	FillRatio  float64 // set bits (bloom, bitmap), non-zero counters (counting) or used slots (cuckoo), over the total
	// EstimatedFPR is the current false-positive probability predicted
	// from the item counts (0 for a bitmap, which is exact).
	EstimatedFPR float64
	ErrorRate    float64 // configured target (0 for cuckoo and bitmap)
	Expansion    uint
	NonScaling   bool
	LayerInfo    []LayerInfo
}

// LayerInfo describes one layer.
type LayerInfo struct {
	Capacity     uint64
	Items        uint64
	ErrorRate    float64
	Size         uint64 // blocks (bloom, counting), buckets (cuckoo), bits (bitmap)
	K            int
	SizeBytes    int64
	FillRatio    float64
	EstimatedFPR float64
}

// info describes the filter. A broken filter gets State "broken" and
// its error; a closed or dropped one ErrClosed.
func (b *filterBase) info() (Info, error) {
	b.mu.Lock()
	m := b.meta
	regions := b.regions
	b.mu.Unlock()
	in := Info{Name: b.name(), Kind: m.Kind.String(), State: "ok", ErrorRate: m.ErrorRate,
		Expansion: uint(m.Expansion), NonScaling: m.NonScaling, Layers: len(m.Layers)}
	if m.Kind == mmapbits.KindCuckoo {
		in.ErrorRate = 0
	}
	if b.broken != nil {
		in.State, in.Reason = "broken", b.broken.Error()
		return in, b.broken
	}
	if b.s.closed.Load() || b.dropped.Load() {
		return in, fmt.Errorf("store: filter %q: %w", b.name(), ErrClosed)
	}
	counts := b.items()
	if b.incomplete.Load() {
		in.State = "incomplete"
	}
	var dataBits, fillSum, fillTotal float64
	pass := 1.0 // probability a key misses every layer
	for i, l := range m.Layers {
		if i >= len(counts) || i >= len(regions) {
			break
		}
		h := regions[i].Header()
		li := LayerInfo{Capacity: l.Capacity, Items: counts[i], ErrorRate: l.ErrorRate, Size: l.Size,
			K: int(l.K), SizeBytes: h.FileSize()}
		var fill, total float64
		switch m.Kind {
		case mmapbits.KindBloom:
			g := bloomGeometry(l)
			fill, total = countWords(regions[i].Words()[:g.Words()], bits.OnesCount64), float64(g.Bits())
			li.EstimatedFPR = bloom.EstimateFPR(g, counts[i])
		case mmapbits.KindCounting:
			g := bloomGeometry(l)
			fill, total = countWords(regions[i].Words()[:g.Words()], bloom.NonzeroCounters), float64(g.Words()*16)
			li.EstimatedFPR = bloom.EstimateCountingFPR(g, counts[i])
		case mmapbits.KindCuckoo:
			slots := l.Size * uint64(m.BucketSize)
			g := cuckoo.Geometry{Buckets: l.Size, BucketSize: int(m.BucketSize), FingerprintBits: int(m.FingerprintBits)}
			fill, total = countWords(regions[i].Words()[:l.Size], g.UsedSlots), float64(slots)
			// A lookup compares 2b fingerprints of f bits, each a false
			// match with probability about 1/(2^f - 1) when occupied.
			load := float64(counts[i]) / float64(slots)
			li.EstimatedFPR = 1 - math.Pow(1-1/(math.Exp2(float64(m.FingerprintBits))-1), 2*float64(m.BucketSize)*load)
		case mmapbits.KindBitmap:
			fill, total = float64(counts[i]), float64(l.Size)
		}
		if total > 0 {
			li.FillRatio = fill / total
		}
		dataBits += float64(h.DataWords() * 64)
		fillSum, fillTotal = fillSum+fill, fillTotal+total
		pass *= 1 - li.EstimatedFPR
		in.Capacity += l.Capacity
		in.Items += counts[i]
		in.SizeBytes += h.FileSize()
		in.LayerInfo = append(in.LayerInfo, li)
	}
	if fillTotal > 0 {
		in.FillRatio = fillSum / fillTotal
	}
	in.EstimatedFPR = 1 - pass
	if in.Items > 0 {
		in.BitsPerKey = dataBits / float64(in.Items)
	}
	return in, nil
}

// countWords sums count over the words, read atomically (the layer
// counts of the filter packages: set bits, nonzero counters, used slots).
func countWords(ws []uint64, count func(uint64) int) float64 {
	n := 0
	for i := range ws {
		n += count(atomic.LoadUint64(&ws[i]))
	}
	return float64(n)
}
