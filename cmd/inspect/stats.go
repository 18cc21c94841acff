package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/store"
)

var statsCmd = &command{
	name:    "stats",
	args:    "DIR NAME",
	short:   "fill distribution per block, bucket or page, as text or PNG",
	minArgs: 2, maxArgs: 2,
	long: `Show, for each layer of the filter NAME of the store in DIR, how its fill
is spread, as a text histogram:

  bloom     set bits per 512-bit block (0..512)
  counting  nonzero counters per block of 128 counters (0..128)
  cuckoo    used slots per bucket (0..bucket size)
  bitmap    set bits per 4 KiB page (0..32768)

with mean, standard deviation, minimum and maximum. A well-hashed filter
shows one narrow hump; a long tail or many full units means hot spots.
The data is read through read-only mappings, with the WAL records after
the filter's checkpoint applied, as the live store would see it. The counting
filter also gets its distribution of counter values.
A filter the store opens broken (a layer file that is not the one the
catalog names, or older than its checkpoint or newer than the WAL) has
no fill to show: stats names why and exits with status 1, as check does.

--png FILE writes the same as an image: per layer, the histogram (bars,
left = empty units) above a heat map of the fill of every 4 KiB page in
file order, left to right and top to bottom (pages are grouped into cells
for large files), dark purple = empty to yellow = full, with the color
scale drawn under it. The image goes to a new file beside FILE, renamed
over it when complete: an existing FILE is replaced, never written in
place. FILE must be a regular file or a new name, and must not lie inside
the store directory (through a symlink either): inspect refuses it with
exit status 2 and writes nothing.

Examples:

  inspect stats /tmp/fsdemo demo
  inspect stats /tmp/fsdemo demo --png /tmp/demo.png`,
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		var pngPath string
		fs.StringVar(&pngPath, "png", "", "also write the histograms and a per-page fill heat map to `FILE` (PNG), replacing it by a rename; not a file inside DIR or another store, nor a directory, device or FIFO")
		return func(e *env, args []string) error { return runStats(e, args, pngPath) }
	},
}

type histBin struct {
	From  int    `json:"from"`
	To    int    `json:"to"`
	Count uint64 `json:"count"`
}

type statsLayer struct {
	Layer     int       `json:"layer"`
	File      string    `json:"file"`
	Unit      string    `json:"unit"`
	Measure   string    `json:"measure"`
	Units     uint64    `json:"units"`
	UnitMax   int       `json:"unit_max"`
	Mean      jfloat    `json:"mean"`
	Stddev    jfloat    `json:"stddev"`
	Min       int       `json:"min"`
	Max       int       `json:"max"`
	FillRatio jfloat    `json:"fill_ratio"`
	Pending   int       `json:"pending_wal_records"`
	Histogram []histBin `json:"histogram"`
	Counters  []uint64  `json:"counter_values,omitempty"` // counting: counters by value 0..15
	scan      *layerScan
}

type statsOut struct {
	Filter  string       `json:"filter"`
	Kind    string       `json:"kind"`
	Pending int          `json:"pending_wal_records"`
	Layers  []statsLayer `json:"layers"`
}

func runStats(e *env, args []string, pngPath string) error {
	dir, name := args[0], args[1]
	var target *pngTarget
	if pngPath != "" {
		t, err := checkPNGPath(dir, pngPath)
		if err != nil {
			return err
		}
		target = t
	}
	st, err := collectStats(dir, name, target != nil, e.stderr)
	if err != nil {
		return err
	}
	if target != nil {
		if err := writePNG(target, st.pngInfo(dir), st.out.Layers); err != nil {
			return err
		}
	}
	if e.json {
		if err := writeJSON(e.stdout, st.out); err != nil {
			return err
		}
	} else if err := printStats(e.stdout, st.f, st.out); err != nil {
		return err
	}
	if n := st.fnd.count(sevProblem); n > 0 {
		return problemsError(n, "in the data (run 'inspect verify')", st.fnd.all())
	}
	return nil
}

// statsRun is what stats found about one filter.
type statsRun struct {
	f   *filterRecord
	out statsOut
	fnd *findings // layout problems met on the way
}

func (st *statsRun) pngInfo(dir string) pngInfo {
	return pngInfo{store: filepath.Base(filepath.Clean(dir)), filter: st.f.Name, kind: st.out.Kind, pending: st.out.Pending}
}

// collectStats scans every layer of the filter name in dir, with the WAL
// records after its checkpoint applied; heat collects the per-page fill.
// The progress bar goes to stderr.
func collectStats(dir, name string, heat bool, stderr io.Writer) (*statsRun, error) {
	return settled(dir, name, func(cat *catalogSnapshot) (*statsRun, error) { return statsOf(dir, name, cat, heat, stderr) })
}

// statsOf is collectStats against one catalog read, cat.
func statsOf(dir, name string, cat *catalogSnapshot, heat bool, stderr io.Writer) (*statsRun, error) {
	f, err := findFilter(dir, cat, name)
	if err != nil {
		return nil, err
	}
	if err := brokenError(dir, f); err != nil {
		return nil, err
	}
	marker := readSessionMarker(dir) // before the segments are listed
	pend, err := scanPending(dir, cat, true)
	if err != nil {
		return nil, fmt.Errorf("reading the WAL: %w", err)
	}
	pf := pend.of(f.ID)
	st := &statsRun{f: f, out: statsOut{Filter: f.Name, Kind: f.Kind.String(), Pending: pf.records}, fnd: newFindings(10)}
	// Records the WAL lost are missing from what is shown: a problem, as
	// for Open, which refuses the store.
	checkWALEnds(dir, st.fnd, pend.res, cat, marker)
	prog := newProgress(stderr, "stats", layersBytes(f))
	defer prog.finish()
	for i, l := range f.Layers {
		var ov *overlay
		sl := statsLayer{}
		if pl := pf.layers[i]; pl != nil {
			ov, sl.Pending = pl.ov, pl.records
		}
		s, err := statsScan(dir, l, ov, heat, prog, st.fnd)
		if err != nil {
			return nil, err
		}
		pending := sl.Pending
		sl = summarize(i, relPath(dir, l.Path), s)
		sl.Pending = pending
		st.out.Layers = append(st.out.Layers, sl)
	}
	return st, nil
}

// brokenError is the error for a filter the store's Open finds broken,
// with the reason, as check gives it: a layer file whose header is not
// the catalog's (another kind's file, another store's or filter's, a
// geometry the catalog does not name), or one broken by what the Open
// finds beyond the headers (a stamp older than the catalog's checkpoint,
// or newer than the WAL). Such a file's fill is not the filter's, and
// stats shows none. It is also the error of a store its Open refuses.
// A layer file that cannot be opened is left to statsScan, which names
// why.
func brokenError(dir string, f *filterRecord) error {
	reason, cause := layersBroken(dir, f)
	if cause != nil {
		return nil
	}
	if reason == "" {
		s, err := openStore(dir)
		if err != nil {
			return fmt.Errorf("the store cannot be opened: %w", relError(err, dir))
		}
		defer s.Close()
		h, err := lookupHandle(s, f.Name)
		if err != nil {
			return err
		}
		if in, err := h.info(); err != nil && in.State == stateBroken {
			reason = oneLine(scrubPath(in.Reason, dir))
		}
	}
	if reason == "" {
		return nil
	}
	return fmt.Errorf("%s: %w", reason, store.ErrCorrupt)
}

// statsScan scans one layer file.
func statsScan(dir string, l layerRecord, ov *overlay, heat bool, prog *progress, fnd *findings) (*layerScan, error) {
	rel := relPath(dir, l.Path)
	prog.setCurrent(rel)
	v, err := mmapbits.OS{}.OpenView(l.Path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w: the catalog lists it but it does not exist", rel, store.ErrCorrupt)
		}
		if !errors.Is(err, store.ErrCorrupt) && !unreadable(err) && !outOfResources(err) {
			// Not a regular file, a symlink loop: the filter is
			// broken, as the store's Open finds it (exit status 1, as
			// ls, info and check give).
			err = fmt.Errorf("%w (the filter is broken: %w)", err, store.ErrCorrupt)
		}
		return nil, relError(err, dir)
	}
	defer v.Close()
	g, err := geometryOf(v.Header())
	if err != nil {
		return nil, fmt.Errorf("%s offset %d: %w: the header's geometry is invalid: %v", rel, fieldOffset(geometryField(v.Header())), store.ErrCorrupt, err)
	}
	return scanLayer(v, g, scanOpts{rel: rel, ov: ov, prog: prog, heat: heat, cells: 100 * 100, fs: fnd}), nil
}

func layersBytes(f *filterRecord) int64 {
	var n int64
	for _, l := range f.Layers {
		n += layerDataBytes(l)
	}
	return n
}

// summarize computes a layer's distribution statistics and bins.
func summarize(layer int, rel string, s *layerScan) statsLayer {
	sl := statsLayer{Layer: layer, File: rel, Unit: s.g.unitName, Measure: s.g.measure, UnitMax: s.g.unitMax,
		FillRatio: jfloat(s.fill()), scan: s, Min: -1}
	var n, sum, sq float64
	for c, k := range s.hist {
		if k == 0 {
			continue
		}
		if sl.Min < 0 {
			sl.Min = c
		}
		sl.Max = c
		n += float64(k)
		sum += float64(c) * float64(k)
		sq += float64(c) * float64(c) * float64(k)
	}
	sl.Units = uint64(n)
	if sl.Min < 0 {
		sl.Min = 0
	}
	sl.Mean, sl.Stddev = jfloat(math.NaN()), jfloat(math.NaN())
	if n > 0 {
		mean := sum / n
		sl.Mean = jfloat(mean)
		sl.Stddev = jfloat(math.Sqrt(math.Max(sq/n-mean*mean, 0)))
	}
	lo, hi := sl.Min, sl.Max
	if s.g.kind == mmapbits.KindCuckoo {
		lo, hi = 0, s.g.unitMax // every occupancy, empty bins included
	}
	width := 1
	if span := hi - lo + 1; span > 24 {
		width = (span + 19) / 20
	}
	for from := lo; from <= hi; from += width {
		b := histBin{From: from, To: min(from+width-1, s.g.unitMax)}
		for c := b.From; c <= b.To && c < len(s.hist); c++ {
			b.Count += s.hist[c]
		}
		sl.Histogram = append(sl.Histogram, b)
	}
	if s.g.kind == mmapbits.KindCounting {
		sl.Counters = s.nibbles[:]
	}
	return sl
}

func printStats(w io.Writer, f *filterRecord, out statsOut) error {
	for i, l := range out.Layers {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "filter %s (%s), layer %d: %s, %s\n", fmtKey(f.Name), out.Kind, l.Layer, l.File, plural(int(l.Units), l.Unit, l.Unit+"s"))
		pending := ""
		if l.Pending > 0 {
			pending = fmt.Sprintf("; includes %s after the checkpoint", plural(l.Pending, "WAL record", "WAL records"))
		}
		fmt.Fprintf(w, "%s: mean %.2f, stddev %.2f, min %d, max %d; fill %s%s\n\n",
			l.Measure, float64(l.Mean), float64(l.Stddev), l.Min, l.Max, fmtFill(float64(l.FillRatio)), pending)
		if err := histTable(w, strings.ToUpper(measureShort(l.scan.g)), strings.ToUpper(l.Unit)+"S", l.Histogram); err != nil {
			return err
		}
		if l.Counters != nil {
			fmt.Fprintln(w)
			bins := make([]histBin, 16)
			for v := range bins {
				bins[v] = histBin{From: v, To: v, Count: l.Counters[v]}
			}
			if err := histTable(w, "COUNTER VALUE", "COUNTERS", bins); err != nil {
				return err
			}
		}
	}
	return nil
}

func measureShort(g geom) string {
	switch g.kind {
	case mmapbits.KindCounting:
		return "nonzero"
	case mmapbits.KindCuckoo:
		return "used slots"
	}
	return "set bits"
}

// histTable prints bins as a table with a bar of '#' per bin.
func histTable(w io.Writer, what, units string, bins []histBin) error {
	var top uint64
	var total uint64
	for _, b := range bins {
		top = max(top, b.Count)
		total += b.Count
	}
	t := newTable(">"+what, ">"+units, ">SHARE", "")
	for _, b := range bins {
		label := fmt.Sprint(b.From)
		if b.To != b.From {
			label = fmt.Sprintf("%d-%d", b.From, b.To)
		}
		bar := 0
		if top > 0 {
			bar = int(math.Round(float64(b.Count) / float64(top) * 40))
			if b.Count > 0 && bar == 0 {
				bar = 1
			}
		}
		share := "0%"
		if total > 0 {
			share = fmt.Sprintf("%.1f%%", float64(b.Count)/float64(total)*100)
		}
		t.add(label, fmt.Sprint(b.Count), share, strings.Repeat("#", bar))
	}
	return t.write(w)
}
