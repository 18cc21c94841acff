package main

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"

	"github.com/filterstore/filterstore/bitmap"
	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/mmapbits"
)

// This file reads one layer file through a read-only view and computes
// what file, stats, info and verify report: fill, per-unit histograms,
// per-page fill, and the layout invariants of each kind.

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
	k         uint32 // bloom, counting
	size      uint64 // blocks, buckets or bits
}

// geometryOf derives the layout from a header, validating it with the
// filter packages' own checks.
func geometryOf(h mmapbits.Header) (geom, error) {
	g := geom{kind: h.Kind, k: h.K, size: h.Size}
	switch h.Kind {
	case mmapbits.KindBloom, mmapbits.KindCounting:
		bg := bloom.Geometry{Blocks: h.Size, K: h.K, Salt: h.Salt}
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
		cg := cuckoo.Geometry{Buckets: h.Size, BucketSize: int(h.BucketSize), FingerprintBits: int(h.FingerprintBits), Salt: h.Salt}
		if err := cg.Validate(); err != nil {
			return g, err
		}
		g.b, g.f = cg.BucketSize, cg.FingerprintBits
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

// overlay is changes not yet in a file: the after-images of WAL records
// after the checkpoint, and the bits of logged Bloom adds.
type overlay struct {
	set map[uint64]uint64 // word index -> absolute value
	or  map[uint64]uint64 // word index -> bits to set
}

func (o *overlay) apply(i, w uint64) uint64 {
	if o == nil {
		return w
	}
	if v, ok := o.set[i]; ok {
		w = v
	}
	return w | o.or[i]
}

// scanOpts says what scanLayer collects.
type scanOpts struct {
	rel   string    // the file, for findings
	ov    *overlay  // applied over the file's words
	prog  *progress // advanced per word read
	heat  bool      // collect per-page fill
	cells int       // at most this many heat-map cells (pages are grouped)
	fs    *findings // where invariant violations go (nil: dropped)
}

// layerScan is what one pass over a layer's words found.
type layerScan struct {
	g         geom
	dataWords uint64
	set       uint64     // fill numerator: set bits, nonzero counters, used slots
	sum       uint64     // counting: sum of all counters
	saturated uint64     // counting: counters at 15
	nibbles   [16]uint64 // counting: counters by value
	hist      []uint64   // hist[c]: units whose count is c
	fprBits   float64    // bloom, counting: mean over blocks of fill^k
	estItems  float64    // items estimated from the data alone
	cells     []float64  // heat map: fill per cell
	perCell   uint64     // pages per cell
	problems  int
	readErr   bool // a word could not be read
}

func (s *layerScan) fill() float64 {
	if s.g.total == 0 {
		return math.NaN()
	}
	return float64(s.set) / float64(s.g.total)
}

// scanLayer reads every data word of v once and checks the layout
// invariants on the words as the file holds them: words beyond the
// geometry are zero, cuckoo buckets have no bits above b*f, bitmap bits
// beyond the size are zero. (They hold at every instant, so a live
// writer's changes cannot break them.) The fill and histograms are of the
// words with the overlay applied.
func scanLayer(v mmapbits.View, g geom, o scanOpts) *layerScan {
	s := &layerScan{g: g, dataWords: v.NumWords(), hist: make([]uint64, g.unitMax+1)}
	bad := func(kind string, off int64, format string, args ...any) {
		s.problems++
		if o.fs != nil {
			o.fs.addFinding(kind, problem(o.rel, off, format, args...))
		}
	}
	words := g.words
	if words > s.dataWords {
		bad("geometry", fieldOffset("DataPages"), "the header's geometry (%s) needs %d data words, the file has %d", g.sizeDesc(), words, s.dataWords)
		words = s.dataWords
	}
	pages := mmapbits.PagesFor(words)
	if o.heat && pages > 0 {
		s.perCell = max(1, (pages+uint64(o.cells)-1)/uint64(max(o.cells, 1)))
		s.cells = make([]float64, (pages+s.perCell-1)/s.perCell)
	}
	var cellNum, cellDen float64

	var unit uint64    // current unit's count
	var pageNum uint64 // current page's fill numerator
	var beyond uint64  // nonzero words beyond the geometry
	var firstBeyond int64
	slotMask := uint64(0)
	if g.kind == mmapbits.KindCuckoo {
		slotMask = uint64(1)<<g.f - 1
	}
	k := float64(g.k)
	lnBlock := math.Log1p(-1.0 / bloom.BlockBits)
	lnCounters := math.Log1p(-1.0 / bloom.CountersPerBlock)
	const step = 4096
	for i := uint64(0); i < s.dataWords; i++ {
		if o.prog != nil && i%step == step-1 {
			o.prog.add(step * 8)
		}
		w, ok := v.Word(i)
		if !ok {
			s.readErr = true
			bad("read", int64(mmapbits.HeaderSize+8*i), "data word %d cannot be read", i)
			break
		}
		raw := w
		w = o.ov.apply(i, w)
		if i >= words {
			if raw != 0 || w != 0 {
				if beyond == 0 {
					firstBeyond = int64(mmapbits.HeaderSize + 8*i)
				}
				beyond++
			}
			continue
		}
		var n uint64 // this word's contribution to the fill numerator
		switch g.kind {
		case mmapbits.KindBloom:
			n = uint64(bits.OnesCount64(w))
			unit += n
			if i%bloom.BlockWords == bloom.BlockWords-1 {
				s.hist[unit]++
				c := float64(unit)
				s.fprBits += math.Pow(c/bloom.BlockBits, k)
				if unit < bloom.BlockBits {
					s.estItems += math.Log1p(-c/bloom.BlockBits) / (k * lnBlock)
				} else {
					s.estItems += math.Log(1.0/bloom.BlockBits) / (k * lnBlock)
				}
				unit = 0
			}
		case mmapbits.KindCounting:
			f := w | w>>2
			f |= f >> 1
			n = uint64(bits.OnesCount64(f & 0x1111111111111111))
			lo := w&0x0F0F0F0F0F0F0F0F + (w>>4)&0x0F0F0F0F0F0F0F0F
			s.sum += (lo * 0x0101010101010101) >> 56
			s.saturated += uint64(bits.OnesCount64(w & (w >> 1) & (w >> 2) & (w >> 3) & 0x1111111111111111))
			for j := 0; j < 16; j++ {
				s.nibbles[w>>(4*j)&15]++
			}
			unit += n
			if i%bloom.BlockWords == bloom.BlockWords-1 {
				s.hist[unit]++
				c := float64(unit)
				s.fprBits += math.Pow(c/bloom.CountersPerBlock, k)
				if unit < bloom.CountersPerBlock {
					s.estItems += math.Log1p(-c/bloom.CountersPerBlock) / (k * lnCounters)
				} else {
					s.estItems += math.Log(1.0/bloom.CountersPerBlock) / (k * lnCounters)
				}
				unit = 0
			}
		case mmapbits.KindCuckoo:
			if used := uint(g.b * g.f); used < 64 && raw>>used != 0 {
				bad("cuckoo-high-bits", int64(mmapbits.HeaderSize+8*i),
					"cuckoo bucket %d is %#016x: bits at and above b*f = %d must be zero", i, raw, used)
			}
			for j := 0; j < g.b; j++ {
				if w>>(uint(j*g.f))&slotMask != 0 {
					n++
				}
			}
			s.hist[n]++
		case mmapbits.KindBitmap:
			if i == words-1 && g.size%64 != 0 && raw>>(g.size%64) != 0 {
				bad("bitmap-tail", int64(mmapbits.HeaderSize+8*i),
					"bitmap word %d is %#016x: bits at offsets >= the size %d must be zero", i, raw, g.size)
			}
			if i == words-1 && g.size%64 != 0 {
				w &= uint64(1)<<(g.size%64) - 1
			}
			n = uint64(bits.OnesCount64(w))
			unit += n
			if i%mmapbits.WordsPerPage == mmapbits.WordsPerPage-1 || i == words-1 {
				s.hist[unit]++
				unit = 0
			}
		}
		s.set += n
		if s.cells != nil {
			pageNum += n
			if i%mmapbits.WordsPerPage == mmapbits.WordsPerPage-1 || i == words-1 {
				page := i / mmapbits.WordsPerPage
				cellNum += float64(pageNum)
				cellDen += pageUnits(g, page, words)
				pageNum = 0
				if (page+1)%s.perCell == 0 || i == words-1 {
					if cellDen > 0 {
						s.cells[page/s.perCell] = cellNum / cellDen
					}
					cellNum, cellDen = 0, 0
				}
			}
		}
	}
	if o.prog != nil {
		o.prog.add(int64(s.dataWords%step) * 8)
	}
	if beyond > 0 {
		bad("beyond", firstBeyond, "%d data words beyond the geometry's %d (%s) are not zero (the first at this offset)",
			beyond, words, g.sizeDesc())
	}
	switch g.kind {
	case mmapbits.KindBloom, mmapbits.KindCounting:
		if g.units > 0 {
			s.fprBits /= float64(g.units)
		}
		if g.kind == mmapbits.KindCounting && s.saturated == 0 && g.k > 0 {
			s.estItems = float64(s.sum) / float64(g.k)
		}
	default:
		s.estItems = float64(s.set)
	}
	return s
}

// pageUnits is the fill denominator of one data page.
func pageUnits(g geom, page, words uint64) float64 {
	first := page * mmapbits.WordsPerPage
	n := min(words-first, mmapbits.WordsPerPage)
	switch g.kind {
	case mmapbits.KindBloom:
		return float64(n * 64)
	case mmapbits.KindCounting:
		return float64(n * 16)
	case mmapbits.KindCuckoo:
		return float64(n * uint64(g.b))
	}
	return float64(min(g.size-first*64, n*64))
}

// headerField is one field of the header page, for display and diffs.
type headerField struct {
	off   int
	name  string
	value string
}

// headerLabels names and formats the fields mmapbits.HeaderFields lists;
// their offsets come from that table, the encoder's own.
var headerLabels = map[string]struct {
	name  string
	value func(h mmapbits.Header) string
}{
	"Magic":           {"magic", func(mmapbits.Header) string { return fmt.Sprintf("%q", mmapbits.Magic) }},
	"Version":         {"version", func(h mmapbits.Header) string { return fmt.Sprint(h.Version) }},
	"Kind":            {"kind", func(h mmapbits.Header) string { return fmt.Sprintf("%d (%s)", uint32(h.Kind), h.Kind) }},
	"DataPages":       {"data pages", func(h mmapbits.Header) string { return fmt.Sprint(h.DataPages) }},
	"FilterID":        {"filter id", func(h mmapbits.Header) string { return fmt.Sprint(h.FilterID) }},
	"Layer":           {"layer", func(h mmapbits.Header) string { return fmt.Sprint(h.Layer) }},
	"K":               {"k", func(h mmapbits.Header) string { return fmt.Sprint(h.K) }},
	"Salt":            {"salt", func(h mmapbits.Header) string { return fmt.Sprintf("%#016x", h.Salt) }},
	"Size":            {"size", func(h mmapbits.Header) string { return fmt.Sprint(h.Size) }},
	"BucketSize":      {"bucket size", func(h mmapbits.Header) string { return fmt.Sprint(h.BucketSize) }},
	"FingerprintBits": {"fingerprint bits", func(h mmapbits.Header) string { return fmt.Sprint(h.FingerprintBits) }},
	"Capacity":        {"capacity", func(h mmapbits.Header) string { return fmt.Sprint(h.Capacity) }},
	"ErrorRate":       {"error rate", func(h mmapbits.Header) string { return fmt.Sprint(h.ErrorRate) }},
	"StoreID":         {"store id", func(h mmapbits.Header) string { return fmt.Sprintf("%#016x", h.StoreID) }},
	"CRC":             {"crc-32c", func(mmapbits.Header) string { return "ok" }}, // h was decoded
}

// headerFields lists the fields of a decoded header at the offsets of its
// format version.
func headerFields(h mmapbits.Header) []headerField {
	var out []headerField
	for _, f := range mmapbits.HeaderFields(h.Version) {
		hf := headerField{off: f.Offset, name: f.Name, value: "?"}
		if l, ok := headerLabels[f.Name]; ok {
			hf.name, hf.value = l.name, l.value(h)
		}
		out = append(out, hf)
	}
	return out
}

// fieldOffset returns the byte offset mmapbits gives the header field
// name in the current format version (the numeric fields keep their
// offsets across versions), or -1.
func fieldOffset(name string) int64 {
	for _, f := range mmapbits.HeaderFields(mmapbits.FormatVersion) {
		if f.Name == name {
			return int64(f.Offset)
		}
	}
	return -1
}

// headerDiff lists the fields where a file's header differs from what the
// catalog expects, at the file's offsets. As the store does, it matches a
// version 1 file (which predates store identities), or any file of a
// store without an identity, without version and store id.
func headerDiff(file, want mmapbits.Header) []headerField {
	if file.Version == 1 || want.StoreID == 0 {
		want.Version, want.StoreID = file.Version, file.StoreID
	}
	var out []headerField
	got, exp := headerFields(file), headerFields(want)
	for i := range got {
		if i < len(exp) && got[i].value != exp[i].value {
			out = append(out, headerField{got[i].off, got[i].name, fmt.Sprintf("file has %s, catalog expects %s", got[i].value, exp[i].value)})
		}
	}
	return out
}

// readHeaderPage reads a filter file's header page (less if the file is
// shorter) with a plain read.
func readHeaderPage(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, mmapbits.HeaderSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return b[:n], nil
}

// reservedByte reports the first nonzero byte of header page b that no
// field of its format version covers. The move-sequence word at
// mmapbits.SeqOffset is live state, legitimately nonzero, and skipped. A
// header that does not decode is left to the decoder's own report.
func reservedByte(b []byte, rel string) (finding, bool) {
	h, _, err := mmapbits.DecodeHeader(b)
	if err != nil {
		return finding{}, false
	}
	used := make([]bool, len(b))
	for _, f := range mmapbits.HeaderFields(h.Version) {
		for i := f.Offset; i < f.Offset+f.Size; i++ {
			used[i] = true
		}
	}
	for i := mmapbits.SeqOffset; i < mmapbits.SeqOffset+8; i++ {
		used[i] = true
	}
	for i, c := range b {
		if c != 0 && !used[i] {
			return problem(rel, int64(i), "reserved header byte is %#02x, must be zero", c), true
		}
	}
	return finding{}, false
}
