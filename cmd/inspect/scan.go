package main

import (
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/mmapbits"
)

// One pass over a layer file's data words through a read-only view: the
// fill, per-unit histograms and per-page fill that file, stats and verify
// report, and the layout invariants of each kind.

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

// dataWordsScanned counts the data words scanLayer has read, so a test can
// prove that a command (check) reads none.
var dataWordsScanned atomic.Uint64

// scanner is the state of one scanLayer pass.
type scanner struct {
	s     *layerScan
	o     scanOpts
	words uint64 // words the geometry covers (capped at the file's)

	unit             uint64 // current unit's count
	pageNum          uint64 // current page's fill numerator
	cellNum, cellDen float64
	beyond           uint64 // nonzero words beyond the geometry
	firstBeyond      int64
}

// scanLayer reads every data word of v once and checks the layout
// invariants on the words as the file holds them: words beyond the
// geometry are zero, cuckoo buckets have no bits above b*f, bitmap bits
// beyond the size are zero. (They hold at every instant, so a live
// writer's changes cannot break them.) The fill and histograms are of the
// words with the overlay applied.
func scanLayer(v mmapbits.View, g geom, o scanOpts) *layerScan {
	sc := &scanner{s: &layerScan{g: g, dataWords: v.NumWords(), hist: make([]uint64, g.unitMax+1)}, o: o, words: g.words}
	s := sc.s
	if sc.words > s.dataWords {
		sc.bad("geometry", 16, "the header's geometry (%s) needs %d data words, the file has %d", g.sizeDesc(), sc.words, s.dataWords)
		sc.words = s.dataWords
	}
	if pages := mmapbits.PagesFor(sc.words); o.heat && pages > 0 {
		s.perCell = max(1, (pages+uint64(o.cells)-1)/uint64(max(o.cells, 1)))
		s.cells = make([]float64, (pages+s.perCell-1)/s.perCell)
	}
	const step = 4096
	var i uint64
	for ; i < s.dataWords; i++ {
		if o.prog != nil && i%step == step-1 {
			o.prog.add(step * 8)
		}
		raw, ok := v.Word(i)
		if !ok {
			s.readErr = true
			sc.bad("read", wordOffset(i), "data word %d cannot be read", i)
			break
		}
		sc.word(i, raw, o.ov.apply(i, raw))
	}
	dataWordsScanned.Add(i)
	if o.prog != nil {
		o.prog.add(int64(s.dataWords%step) * 8)
	}
	sc.finish()
	return s
}

// wordOffset is the byte offset in the file of data word i.
func wordOffset(i uint64) int64 { return int64(mmapbits.HeaderSize + 8*i) }

// bad counts an invariant violation and reports it, if o.fs is set.
func (sc *scanner) bad(kind string, off int64, format string, args ...any) {
	sc.s.problems++
	if sc.o.fs != nil {
		sc.o.fs.addFinding(kind, problem(sc.o.rel, off, format, args...))
	}
}

// word takes data word i: raw as the file holds it, w with the overlay.
func (sc *scanner) word(i, raw, w uint64) {
	if i >= sc.words {
		if raw != 0 || w != 0 {
			if sc.beyond == 0 {
				sc.firstBeyond = wordOffset(i)
			}
			sc.beyond++
		}
		return
	}
	var n uint64 // this word's contribution to the fill numerator
	switch sc.s.g.kind {
	case mmapbits.KindBloom:
		n = uint64(bits.OnesCount64(w))
		sc.endBlock(i, n, bloom.BlockBits)
	case mmapbits.KindCounting:
		n = sc.countingWord(w)
		sc.endBlock(i, n, bloom.CountersPerBlock)
	case mmapbits.KindCuckoo:
		n = sc.cuckooWord(i, raw, w)
	case mmapbits.KindBitmap:
		n = sc.bitmapWord(i, raw, w)
	}
	sc.s.set += n
	sc.heat(i, n)
}

// endBlock adds n to the current block of a bloom or counting layer
// (units of per counts each) and closes it at its last word: histogram,
// FPR from bits and the items estimate.
func (sc *scanner) endBlock(i, n uint64, per float64) {
	sc.unit += n
	if i%bloom.BlockWords != bloom.BlockWords-1 {
		return
	}
	s, k := sc.s, float64(sc.s.g.k)
	s.hist[sc.unit]++
	// A full block counts as one short of full: log1p(-(per-1)/per) is
	// log(1/per), the estimate's largest finite value.
	c := min(float64(sc.unit), per-1)
	s.fprBits += math.Pow(float64(sc.unit)/per, k)
	s.estItems += math.Log1p(-c/per) / (k * math.Log1p(-1/per))
	sc.unit = 0
}

// countingWord tallies a counting layer's word: counter sum, saturated
// counters, counters by value; it returns the nonzero counters.
func (sc *scanner) countingWord(w uint64) uint64 {
	s := sc.s
	lo := w&0x0F0F0F0F0F0F0F0F + (w>>4)&0x0F0F0F0F0F0F0F0F
	s.sum += (lo * 0x0101010101010101) >> 56
	s.saturated += uint64(bits.OnesCount64(w & (w >> 1) & (w >> 2) & (w >> 3) & 0x1111111111111111))
	for j := 0; j < 16; j++ {
		s.nibbles[w>>(4*j)&15]++
	}
	return uint64(bloom.NonzeroCounters(w))
}

// cuckooWord checks bucket i's unused high bits and returns its used slots.
func (sc *scanner) cuckooWord(i, raw, w uint64) uint64 {
	g := sc.s.g
	if used := uint(g.b * g.f); used < 64 && raw>>used != 0 {
		sc.bad("cuckoo-high-bits", wordOffset(i), "cuckoo bucket %d is %#016x: bits at and above b*f = %d must be zero", i, raw, used)
	}
	n := uint64(g.cg.UsedSlots(w))
	sc.s.hist[n]++
	return n
}

// bitmapWord checks the bits beyond the size in the last word and returns
// the word's set bits; a page is the histogram unit.
func (sc *scanner) bitmapWord(i, raw, w uint64) uint64 {
	g := sc.s.g
	last := i == sc.words-1
	if tail := g.size % 64; last && tail != 0 {
		if raw>>tail != 0 {
			sc.bad("bitmap-tail", wordOffset(i), "bitmap word %d is %#016x: bits at offsets >= the size %d must be zero", i, raw, g.size)
		}
		w &= uint64(1)<<tail - 1
	}
	n := uint64(bits.OnesCount64(w))
	sc.unit += n
	if i%mmapbits.WordsPerPage == mmapbits.WordsPerPage-1 || last {
		sc.s.hist[sc.unit]++
		sc.unit = 0
	}
	return n
}

// heat adds word i's fill numerator n to its page, and closes pages and
// heat-map cells.
func (sc *scanner) heat(i, n uint64) {
	s := sc.s
	if s.cells == nil {
		return
	}
	sc.pageNum += n
	last := i == sc.words-1
	if i%mmapbits.WordsPerPage != mmapbits.WordsPerPage-1 && !last {
		return
	}
	page := i / mmapbits.WordsPerPage
	sc.cellNum += float64(sc.pageNum)
	sc.cellDen += pageUnits(s.g, page, sc.words)
	sc.pageNum = 0
	if (page+1)%s.perCell == 0 || last {
		if sc.cellDen > 0 {
			s.cells[page/s.perCell] = sc.cellNum / sc.cellDen
		}
		sc.cellNum, sc.cellDen = 0, 0
	}
}

// finish reports words beyond the geometry and completes the estimates.
func (sc *scanner) finish() {
	s, g := sc.s, sc.s.g
	if sc.beyond > 0 {
		sc.bad("beyond", sc.firstBeyond, "%d data words beyond the geometry's %d (%s) are not zero (the first at this offset)",
			sc.beyond, sc.words, g.sizeDesc())
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
