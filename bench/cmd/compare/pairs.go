package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/filterstore/filterstore/bench"
)

// The pairs mode (-pairs) answers a narrower question than the
// round-robin table: is one library's single lookup faster than
// another's? Every -libs library is built once, all at the same time,
// and a second instance of the first one is built beside them as a
// control. Then each pair runs ABBA: in each round A, B, B, A (BAAB in
// odd rounds), each a chunk of lookups on keys no earlier chunk of the
// round used, and the round's ratio is A's time over B's. The table
// gives the median and quartiles of the rounds' ratios. Drift between
// rounds cancels out of each ratio; what remains between two filters is
// their code and where their memory happens to lie, and the control pair
// (two identical filters, the same code on different memory) shows how
// far the second alone moves a ratio.

// pairLib is one built filter of the pairs mode.
type pairLib struct {
	name        string
	f           bench.Filter
	dir         string
	hitT, missT tally // -counters: events over every timed chunk
}

// pairRow is one pair's result.
type pairRow struct {
	a, b                     string
	hit, miss                []float64 // per-round ratios a/b
	aHit, bHit, aMiss, bMiss []float64 // per-round ns per lookup
}

// controlSuffix names the control instance of the first library.
const controlSuffix = "#2"

// runPairs builds o.libs (and the control) at n keys and measures every
// pair; it returns the markdown section.
func runPairs(o *options, n uint64, log io.Writer) (string, error) {
	if len(o.libs) < 1 {
		return "", fmt.Errorf("-pairs needs at least one library in -libs")
	}
	fmt.Fprintf(log, "n=%d: generating keys (seed %d)\n", n, o.seed)
	keys := bench.NewKeys(n, o.seed, 1)
	l := int(min(n, o.lookups))
	hits := keys.Prefix(l)
	misses := bench.NewKeys(uint64(l), o.seed, 2)
	chunk := min(o.pairChunk, l/4)
	if chunk < 1 {
		return "", fmt.Errorf("-pairs: %d lookups per pass leave no chunk", l)
	}

	libs := append(slices.Clone(o.libs), bench.Lib{Name: o.libs[0].Name + controlSuffix, New: o.libs[0].New})
	var built []*pairLib
	defer func() {
		for _, p := range built {
			p.f.Close()
			os.RemoveAll(p.dir)
		}
	}()
	for _, lib := range libs {
		dir, err := os.MkdirTemp(o.tmp, "compare-pairs-")
		if err != nil {
			return "", err
		}
		p := &pairLib{name: lib.Name, dir: dir}
		fmt.Fprintf(log, "n=%d: building %s\n", n, lib.Name)
		if p.f, err = lib.New(bench.Config{N: n, FPR: o.fpr, Dir: filepath.Join(dir, "store")}); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("%s: %w", lib.Name, err)
		}
		built = append(built, p)
		if _, err := bench.Build(p.f, keys); err != nil {
			return "", fmt.Errorf("%s: build: %w", lib.Name, err)
		}
	}

	var ctr *counters
	if o.counters {
		c, done := lockCounters(log, n)
		defer done()
		ctr = c
	}

	var rows []pairRow
	for i := range built {
		for j := i + 1; j < len(built); j++ {
			a, b := built[i], built[j]
			fmt.Fprintf(log, "n=%d: %s against %s\n", n, a.name, b.name)
			r := pairRow{a: a.name, b: b.name}
			r.hit, r.aHit, r.bHit = abba(side{a.f, &a.hitT}, side{b.f, &b.hitT}, hits, chunk, o.pairRounds, ctr)
			r.miss, r.aMiss, r.bMiss = abba(side{a.f, &a.missT}, side{b.f, &b.missT}, misses, chunk, o.pairRounds, ctr)
			rows = append(rows, r)
		}
	}
	var names []string
	dirs := make(map[string]string)
	for _, p := range built {
		names = append(names, p.name)
		if _, ok := p.f.(*bench.StoreFilter); ok {
			dirs[p.name] = p.dir
		}
	}
	out := pairsTable(o, n, l, chunk, rows)
	if ctr != nil {
		var crows []counterRow
		for _, p := range built {
			crows = append(crows, counterRow{p.name, "hit", &p.hitT}, counterRow{p.name, "miss", &p.missT})
		}
		out += countersTable(ctr, crows)
	}
	return out + pageReport(names, dirs) + lineTable(built, rows), nil
}

// side is one filter of a pair and the tally its timed chunks add to.
type side struct {
	f bench.Filter
	t *tally
}

// abba runs rounds ABBA/BAAB rounds of chunk lookups each on ks (chunks
// taken in turn, wrapping) and returns each round's ratio a/b and the
// per-lookup times of a and b. With ctr, each timed chunk's events go to
// its side's tally (read outside the timed span).
func abba(a, b side, ks *bench.Keys, chunk, rounds int, ctr *counters) (ratios, as, bs []float64) {
	off := 0
	next := func() int {
		o := off
		if off += chunk; off+chunk > ks.Len() {
			off = 0
		}
		return o
	}
	timed := func(s side) float64 {
		if ctr == nil {
			return timeChunk(s.f, ks, next(), chunk)
		}
		before := ctr.read()
		ns := timeChunk(s.f, ks, next(), chunk)
		s.t.add(before, ctr.read(), chunk)
		return ns
	}
	// One chunk each first: neither side's first timed chunk pays for
	// a cold start the other does not.
	timeChunk(a.f, ks, next(), chunk)
	timeChunk(b.f, ks, next(), chunk)
	for r := range rounds {
		var ta, tb float64
		if r%2 == 0 {
			ta += timed(a)
			tb += timed(b)
			tb += timed(b)
			ta += timed(a)
		} else {
			tb += timed(b)
			ta += timed(a)
			ta += timed(a)
			tb += timed(b)
		}
		ratios = append(ratios, ta/tb)
		as = append(as, ta/2)
		bs = append(bs, tb/2)
	}
	return ratios, as, bs
}

// timeChunk times Has over keys off..off+n-1 and returns ns per lookup
// (the positive answers are counted, as hasAll does, and dropped).
func timeChunk(f bench.Filter, ks *bench.Keys, off, n int) float64 {
	ns, _ := timeChunkCount(f, ks, off, n)
	return ns
}

// timeChunkCount is timeChunk, also returning the positive answers.
func timeChunkCount(f bench.Filter, ks *bench.Keys, off, n int) (float64, int) {
	pos := 0
	t0 := time.Now()
	for i := off; i < off+n; i++ {
		if f.Has(ks.At(i)) {
			pos++
		}
	}
	return nsPer(time.Since(t0), n), pos
}

// quartiles returns the first quartile, median and third quartile of v.
func quartiles(v []float64) (q1, m, q3 float64) {
	s := slices.Clone(v)
	slices.Sort(s)
	at := func(p float64) float64 { return s[int(p*float64(len(s)-1)+0.5)] }
	return at(0.25), median(s), at(0.75)
}

func pairsTable(o *options, n uint64, l, chunk int, rows []pairRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## n = %s, pairs\n\n", countName(n))
	fmt.Fprintf(&b, "Every library built once, all alive together, plus %s%s, a second instance of %s (the control: the same code and keys, other memory). "+
		"Each pair: %d ABBA/BAAB rounds of %d single lookups per chunk, from %d added keys (hit) and %d absent ones (miss). "+
		"Ratio: A's time over B's in one round (below 1: A faster); cells: median of the rounds (first–third quartile), and each side's median ns per lookup.\n\n",
		o.libs[0].Name, controlSuffix, o.libs[0].Name, o.pairRounds, chunk, l, l)
	b.WriteString("| A | B | hit A/B | miss A/B | hit ns A, B | miss ns A, B |\n|---|---|---:|---:|---:|---:|\n")
	for _, r := range rows {
		h1, hm, h3 := quartiles(r.hit)
		m1, mm, m3 := quartiles(r.miss)
		fmt.Fprintf(&b, "| %s | %s | %.3f (%.3f–%.3f) | %.3f (%.3f–%.3f) | %.1f, %.1f | %.1f, %.1f |\n",
			r.a, r.b, hm, h1, h3, mm, m1, m3, median(r.aHit), median(r.bHit), median(r.aMiss), median(r.bMiss))
	}
	b.WriteString("\n")
	return b.String()
}

// lineRounds and lineReads size lineTable's measurement.
const (
	lineRounds = 5
	lineReads  = 1 << 21
)

// lineTable times reads of random lines of each built filter's memory
// (bench.Memory, bench.LineReads), independent and chained, in
// lineRounds rounds that each read every filter's in turn, and returns a
// markdown table of the medians, with each filter's lookups (the median
// of its median ns over the pairs in rows) in units of its chained read,
// or "" if no filter shows its memory.
func lineTable(built []*pairLib, rows []pairRow) string {
	mems := make([][]byte, len(built))
	shown := false
	for i, p := range built {
		if m, ok := p.f.(bench.Memory); ok {
			mems[i] = m.Memory()
			shown = shown || mems[i] != nil
		}
	}
	if !shown {
		return ""
	}
	free := make([][]float64, len(built))
	chained := make([][]float64, len(built))
	for r := range lineRounds {
		for i, mem := range mems {
			if mem != nil {
				free[i] = append(free[i], bench.LineReads(mem, lineReads, uint64(r+1), false))
				chained[i] = append(chained[i], bench.LineReads(mem, lineReads, uint64(r+1), true))
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nRandom line reads of each filter's memory (bench.LineReads: %d reads of one word of a random 64-byte line; "+
		"independent of each other, as the blocks of single lookups are, or chained, each address depending on the word read before, so that each read waits out its whole latency; "+
		"medians of %d rounds that each read every filter's memory in turn, first–third quartile): "+
		"what a lookup out of the caches costs at least, where that filter's memory lies.\n\n", lineReads, lineRounds)
	b.WriteString("The last two columns divide the filter's single lookups (the median, over its pairs above, of its median ns) by its chained read: " +
		"a lookup's time in units of its own memory's latency, which sets filters side by side whatever memory each got.\n\n")
	b.WriteString("| library | MiB | ns per read, independent | ns per read, chained | hit / chained read | miss / chained read |\n|---|---:|---:|---:|---:|---:|\n")
	for i, p := range built {
		if mems[i] == nil {
			continue
		}
		var hit, miss []float64
		for _, r := range rows {
			switch p.name {
			case r.a:
				hit, miss = append(hit, median(r.aHit)), append(miss, median(r.aMiss))
			case r.b:
				hit, miss = append(hit, median(r.bHit)), append(miss, median(r.bMiss))
			}
		}
		f1, fm, f3 := quartiles(free[i])
		c1, cm, c3 := quartiles(chained[i])
		fmt.Fprintf(&b, "| %s | %d | %.1f (%.1f–%.1f) | %.1f (%.1f–%.1f) | %.2f | %.2f |\n",
			p.name, len(mems[i])>>20, fm, f1, f3, cm, c1, c3, median(hit)/cm, median(miss)/cm)
	}
	return b.String()
}
