package store

import (
	"fmt"
	"math"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/mmapbits"
)

// Info describes a filter. It is computed from what the store keeps in
// memory (the catalog's geometry, the item counts kept up to date by every
// change and restored by recovery), never from the filter's data: its
// cost is O(layers), whatever the filter's size, so a metrics scraper can
// call it as often as it likes. How full the data is takes a read of
// every data word: see Fill.
type Info struct {
	Name string
	Kind string // "bloom", "counting", "cuckoo", "bitmap"
	// State is "ok", "incomplete" (a Load is running or did not finish:
	// the catalog records the filter as loading, and a read-only store
	// or inspect answers "maybe" for it) or "broken" (its files are
	// missing or damaged; Reason says how).
	State     string
	Reason    string // why the filter is broken; "" otherwise
	Capacity  uint64 // sum over layers (bitmap: bits)
	Items     uint64 // bloom: adds that were new; cuckoo, counting: adds - deletes; bitmap: set bits
	Layers    int
	SizeBytes int64 // on disk, header pages included
	// BitsPerKey is the bits of the data pages (whole 4 KiB pages, as
	// the files hold them: a small filter's last page is partly unused)
	// over Items; 0 with no items.
	BitsPerKey float64
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
	EstimatedFPR float64
}

// info describes the filter. A broken filter gets State "broken" and
// its error; a closed or dropped one ErrClosed; the stand-in of nil and
// zero handles no Info and its error.
func (b *filterBase) info() (Info, error) {
	if b.isStandIn() {
		return Info{}, b.broken
	}
	b.mu.Lock()
	m := b.meta
	regions := b.regions
	loading := b.loading != nil && !b.loadDone
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
	if b.incomplete.Load() || loading {
		in.State = "incomplete"
	}
	var dataBits float64
	pass := 1.0 // probability a key misses every layer
	for i, l := range m.Layers {
		if i >= len(counts) || i >= len(regions) {
			break
		}
		h := regions[i].Header()
		li := LayerInfo{Capacity: l.Capacity, Items: counts[i], ErrorRate: l.ErrorRate, Size: l.Size,
			K: int(l.K), SizeBytes: h.FileSize()}
		switch m.Kind {
		case mmapbits.KindBloom:
			li.EstimatedFPR = bloom.EstimateFPR(bloomGeometry(l), counts[i])
		case mmapbits.KindCounting:
			li.EstimatedFPR = bloom.EstimateCountingFPR(bloomGeometry(l), counts[i])
		case mmapbits.KindCuckoo:
			// A lookup compares 2b fingerprints of f bits, each a false
			// match with probability about 1/(2^f - 1) when occupied.
			load := float64(counts[i]) / float64(l.Size*uint64(m.BucketSize))
			li.EstimatedFPR = 1 - math.Pow(1-1/(math.Exp2(float64(m.FingerprintBits))-1), 2*float64(m.BucketSize)*load)
		}
		dataBits += float64(h.DataWords() * 64)
		pass *= 1 - li.EstimatedFPR
		in.Capacity += l.Capacity
		in.Items += counts[i]
		in.SizeBytes += h.FileSize()
		in.LayerInfo = append(in.LayerInfo, li)
	}
	in.EstimatedFPR = 1 - pass
	if in.Items > 0 {
		in.BitsPerKey = dataBits / float64(in.Items)
	}
	return in, nil
}
