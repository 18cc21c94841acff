package main

import (
	"fmt"

	"github.com/filterstore/filterstore/bitmap"
	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/mmapbits"
)

// A layer's geometry as its header describes it, validated with the filter
// packages' own checks.

// geom is what a header says about the layout of its data.
type geom struct {
	kind      mmapbits.Kind
	words     uint64 // words the geometry occupies (the rest must be zero)
	unitWords uint64 // words per histogram unit
	units     uint64 // histogram units
	unitMax   int    // the most a unit can count
	unitName  string // "block", "bucket", "page"
	measure   string // what a unit counts
	total     uint64 // denominator of the fill ratio
	b, f      int    // cuckoo bucket size and fingerprint bits
	cg        cuckoo.Geometry
	k         uint32 // bloom, counting
	size      uint64 // blocks, buckets or bits
}

// derivationName says how a Bloom or counting layer's blocks and
// positions, or a cuckoo layer's buckets and fingerprints, follow from a
// key's hash ("mul"; "local" for a cuckoo layer from format version 6;
// "mix" for any layer of a file before format version 4 and a cuckoo
// layer of one before version 5); "none" for bitmaps.
func derivationName(h mmapbits.Header) string {
	switch h.Kind {
	case mmapbits.KindBloom, mmapbits.KindCounting:
		return bloom.Derivation(h.Derivation).String()
	case mmapbits.KindCuckoo:
		return cuckoo.Derivation(h.Derivation).String()
	}
	return "none"
}

// geometryOf derives the layout from a header, validating it with the
// filter packages' own checks.
func geometryOf(h mmapbits.Header) (geom, error) {
	g := geom{kind: h.Kind, k: h.K, size: h.Size}
	switch h.Kind {
	case mmapbits.KindBloom, mmapbits.KindCounting:
		bg := bloom.Geometry{Blocks: h.Size, K: h.K, Salt: h.Salt, Derivation: bloom.Derivation(h.Derivation)}
		if err := bg.Validate(); err != nil {
			return g, err
		}
		g.words, g.unitWords, g.units, g.unitName = bg.Words(), bloom.BlockWords, bg.Blocks, "block"
		if h.Kind == mmapbits.KindBloom {
			g.unitMax, g.measure, g.total = bloom.BlockBits, "set bits per 512-bit block", bg.Bits()
		} else {
			g.unitMax, g.measure, g.total = bloom.CountersPerBlock, "nonzero counters per block of 128", bg.Words()*bloom.CountersPerWord
		}
	case mmapbits.KindCuckoo:
		cg := cuckoo.Geometry{Buckets: h.Size, BucketSize: int(h.BucketSize), FingerprintBits: int(h.FingerprintBits), Salt: h.Salt,
			Derivation: cuckoo.Derivation(h.Derivation)}
		if err := cg.Validate(); err != nil {
			return g, err
		}
		g.b, g.f, g.cg = cg.BucketSize, cg.FingerprintBits, cg
		g.words, g.unitWords, g.units, g.unitName = cg.Words(), 1, cg.Buckets, "bucket"
		g.unitMax, g.measure, g.total = cg.BucketSize, fmt.Sprintf("used slots per bucket of %d", cg.BucketSize), cg.Slots()
	case mmapbits.KindBitmap:
		if h.Size == 0 || h.Size > bitmap.MaxBits {
			return g, fmt.Errorf("bitmap size %d outside 1..%d", h.Size, uint64(bitmap.MaxBits))
		}
		g.words = bitmap.Words(h.Size)
		g.unitWords, g.units, g.unitName = mmapbits.WordsPerPage, mmapbits.PagesFor(g.words), "page"
		g.unitMax, g.measure, g.total = mmapbits.PageSize*8, "set bits per 4 KiB page", h.Size
	default:
		return g, fmt.Errorf("unknown kind %d", h.Kind)
	}
	return g, nil
}

// sizeDesc describes the geometry's size in its own unit.
func (g geom) sizeDesc() string {
	switch g.kind {
	case mmapbits.KindBloom:
		return fmt.Sprintf("%d blocks of 512 bits, k=%d", g.size, g.k)
	case mmapbits.KindCounting:
		return fmt.Sprintf("%d blocks of 128 4-bit counters, k=%d", g.size, g.k)
	case mmapbits.KindCuckoo:
		return fmt.Sprintf("%d buckets of %d slots of %d bits", g.size, g.b, g.f)
	case mmapbits.KindBitmap:
		return fmt.Sprintf("%d bits", g.size)
	}
	return "?"
}

// fillName is what the fill ratio counts.
func (g geom) fillName() string {
	switch g.kind {
	case mmapbits.KindCounting:
		return "nonzero counters"
	case mmapbits.KindCuckoo:
		return "used slots"
	}
	return "set bits"
}

// geometryField returns the name of the header field (mmapbits'
// HeaderFields) at fault in h's geometry, for a report's offset: each
// field is checked alone, the others set to values that pass, as the
// kind's package validates them; "Kind" where no one field is at fault
// (a combination, such as a cuckoo bucket too wide for its fingerprints).
func geometryField(h mmapbits.Header) string {
	switch h.Kind {
	case mmapbits.KindBloom, mmapbits.KindCounting:
		ok := bloom.Geometry{Blocks: 1, K: 1}
		for _, c := range []struct {
			name string
			g    bloom.Geometry
		}{
			{"Size", bloom.Geometry{Blocks: h.Size, K: ok.K}},
			{"K", bloom.Geometry{Blocks: ok.Blocks, K: h.K}},
			{"Derivation", bloom.Geometry{Blocks: ok.Blocks, K: ok.K, Derivation: bloom.Derivation(h.Derivation)}},
		} {
			if c.g.Validate() != nil {
				return c.name
			}
		}
	case mmapbits.KindCuckoo:
		ok := cuckoo.Geometry{Buckets: 1, BucketSize: cuckoo.MinBucketSize, FingerprintBits: cuckoo.MinFingerprintBits}
		for _, c := range []struct {
			name string
			g    cuckoo.Geometry
		}{
			{"Size", cuckoo.Geometry{Buckets: h.Size, BucketSize: ok.BucketSize, FingerprintBits: ok.FingerprintBits}},
			{"BucketSize", cuckoo.Geometry{Buckets: ok.Buckets, BucketSize: int(h.BucketSize), FingerprintBits: ok.FingerprintBits}},
			{"FingerprintBits", cuckoo.Geometry{Buckets: ok.Buckets, BucketSize: ok.BucketSize, FingerprintBits: int(h.FingerprintBits)}},
			{"Derivation", cuckoo.Geometry{Buckets: ok.Buckets, BucketSize: ok.BucketSize, FingerprintBits: ok.FingerprintBits, Derivation: cuckoo.Derivation(h.Derivation)}},
		} {
			if c.g.Validate() != nil {
				return c.name
			}
		}
	case mmapbits.KindBitmap:
		return "Size"
	}
	return "Kind"
}
