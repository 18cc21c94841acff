package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/store"
	"github.com/filterstore/filterstore/wal"
)

var verifyCmd = &command{
	name:    "verify",
	args:    "DIR [NAME]",
	short:   "full scrub: catalog vs files, headers, layouts, every WAL record",
	minArgs: 1, maxArgs: 2,
	long: `Scrub the store in DIR (or only the filter NAME and the WAL) and list every
problem with its file and byte offset:

  catalog vs files  every layer file the catalog lists exists, has the
                    size its header implies, and a header equal to the
                    one the catalog expects (each differing field named,
                    the store id included; a format version 1 header has
                    none, which is a note)
  headers           magic, format version, CRC-32C, sane geometry, zero
                    reserved bytes (the move-sequence word at byte 2048
                    is live state, not checked)
  layouts           data words beyond the geometry are zero; cuckoo
                    buckets have no bits above b*f; bitmap bits beyond
                    the size are zero
  item counts       set bits (bloom: at least the items), used slots
                    (cuckoo), set bits (bitmap) and the counter sum
                    (counting, k per item while nothing saturated) agree
                    with the catalog's counts plus the WAL after the
                    filter's checkpoint; checked only when no writer
                    changed the store meanwhile
  WAL               what recovery checks (wal.Scan): segment headers and
                    their store id, every record's CRC-32C, LSNs up by
                    exactly 1 across segments; and no missing records
                    after any filter's checkpoint, every record decodes
                    and names a known filter, an existing layer and
                    in-range words
  open              a read-only open of the store succeeds and opens no
                    filter broken

Notes are not problems: a torn tail at the end of the last segment (a
writer may be appending; the next writer Open truncates it), WAL records
of dropped filters (replay skips them), orphan or temporary files (the
next writer Open removes them), incomplete filters.

Safe to run beside a live writer. A progress bar is drawn on stderr when
it is a terminal and the scrub takes more than a second.

Exit status: 0 clean, 1 problems found, 2 usage or I/O error.

Examples:

  inspect verify /tmp/fsdemo
  inspect verify /tmp/fsdemo demo --json`,
	setup: func(fs *flag.FlagSet) func(*env, []string) error { return runVerify },
}

type verifyOut struct {
	OK          bool      `json:"ok"`
	Problems    int       `json:"problems"`
	Notes       int       `json:"notes"`
	Filters     int       `json:"filters"`
	LayerFiles  int       `json:"layer_files"`
	DataBytes   int64     `json:"data_bytes"`
	WALSegments int       `json:"wal_segments"`
	WALRecords  int       `json:"wal_records"`
	CountsCheck bool      `json:"item_counts_checked"`
	Findings    []finding `json:"findings"`
}

type layerJob struct {
	f   *store.FilterRecord
	i   int
	l   store.LayerRecord
	rel string
}

// staleRecord is a WAL record naming a filter or layer the catalog read
// at the start did not hold: a writer may have created it since.
type staleRecord struct {
	rel   string
	off   int64
	lsn   uint64
	id    uint64
	layer int
}

type droppedRecords struct {
	n   int
	rel string
	off int64
}

func runVerify(e *env, args []string) error {
	dir, name := args[0], ""
	if len(args) > 1 {
		name = args[1]
	}
	fnd := newFindings(10)
	cat, err := readCatalog(dir)
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			return err
		}
		fnd.addFinding("catalog", problem("catalog.db", offsetIn(err), "%s", scrubPath(err.Error(), dir)))
		cat = nil
	}
	var target *store.FilterRecord
	if name != "" {
		if cat == nil {
			return fmt.Errorf("cannot look up filter %s: %w", fmtKey(name), err)
		}
		if target, err = findFilter(dir, cat, name); err != nil {
			return err
		}
	}
	filtersDir := filepath.Dir(store.LayerPath(dir, 0, 0))

	var jobs []layerJob
	byID := map[uint64]*store.FilterRecord{}
	var storeID uint64
	out := verifyOut{}
	if cat != nil {
		storeID, byID = cat.StoreID, filtersByID(cat)
		for i := range cat.Filters {
			f := &cat.Filters[i]
			if target != nil && f.ID != target.ID {
				continue
			}
			out.Filters++
			for li, l := range f.Layers {
				jobs = append(jobs, layerJob{f: f, i: li, l: l, rel: relPath(dir, l.Path)})
			}
		}
	}
	var total int64
	for _, n := range walSizes(dir) {
		total += n
	}
	for _, j := range jobs {
		total += j.l.Header.FileSize() - mmapbits.HeaderSize
	}
	prog := newProgress(e.stderr, "verify", total)
	defer prog.finish()

	// 1. The WAL: framing, then what each record says.
	pend := &pendingSet{byID: map[uint64]*pendingFilter{}}
	var stale []staleRecord
	var pos []uint16
	visit := func(rel string, at wal.Position, payload []byte) {
		out.WALRecords++
		off, lsn := at.Offset, at.LSN
		r, err := store.DecodeWALRecord(payload)
		if err != nil {
			fnd.addFinding("decode", problem(rel, off, "record LSN %d does not decode: %v", lsn, err))
			return
		}
		if cat == nil || (target != nil && r.FilterID != target.ID) {
			return
		}
		f := byID[r.FilterID]
		if f == nil || r.Layer >= len(f.Layers) {
			stale = append(stale, staleRecord{rel, off, lsn, r.FilterID, r.Layer})
			return
		}
		checkRecord(fnd, rel, off, lsn, f, r)
		if lsn > f.SyncedLSN { // not in the filter's files yet
			pl := pend.add(lsn, r)
			pos = addToOverlay(pl, f.Layers[r.Layer].Header, r, pos)
		}
	}
	res, err := scanWALAll(dir, storeID, prog, fnd, visit)
	if err != nil {
		return err
	}
	walProblems := fnd.count(sevProblem)
	for _, s := range res.Segments {
		if !s.Vanished {
			out.WALSegments++
		}
	}

	// 2. The layer files the catalog lists.
	scans := make([]*layerScan, len(jobs)) // nil: missing, or unreadable
	var missing []layerJob
	for ji, j := range jobs {
		var ov *overlay
		if pl := pend.of(j.f.ID).layers[j.i]; pl != nil {
			ov = pl.ov
		}
		want := j.l.Header
		s, gone, n := verifyLayerFile(j.l.Path, j.rel, &want, ov, prog, fnd)
		if gone {
			missing = append(missing, j)
			continue
		}
		out.LayerFiles++
		out.DataBytes += n
		if s != nil && !s.readErr {
			scans[ji] = s
		}
	}
	// Files the catalog does not list.
	ents, err := os.ReadDir(filtersDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("filters directory: %w", err)
	}
	for _, ent := range ents {
		n := ent.Name()
		rel := relPath(dir, filepath.Join(filtersDir, n))
		if strings.HasSuffix(n, ".tmp") {
			fnd.addFinding("tmp", note(rel, -1, "temporary file: a layer file being created, or a leftover the next writer Open removes"))
			continue
		}
		id, layer, ok := parseLayerName(n)
		if !ok {
			continue
		}
		if cat == nil {
			// No catalog: check each file on its own.
			_, _, n := verifyLayerFile(filepath.Join(filtersDir, n), rel, nil, nil, prog, fnd)
			out.LayerFiles++
			out.DataBytes += n
			continue
		}
		if f := byID[id]; f != nil && layer < len(f.Layers) || (target != nil && id != target.ID) {
			continue
		}
		fnd.addFinding("orphan", note(rel, -1, "orphan file: the catalog does not list it (a layer being created, or a dropped filter's file); the next writer Open removes it"))
	}

	// 3. Read the catalog and the WAL listing again: records and files that
	// disagree with the first read may be a live writer's doing.
	var ref *store.CatalogSnapshot = cat
	quiescent := false
	if cat != nil {
		cat2, err2 := readCatalogGuarded(dir)
		if err2 == nil {
			quiescent = reflect.DeepEqual(cat, cat2) && sameWAL(res, walSizes(dir))
			ref = cat2
		} else {
			// Without a second read, records and files the first read did
			// not know cannot be told from a writer's work: note them only.
			fnd.addFinding("reread", note("catalog.db", -1, "the catalog could not be read a second time (%s): records and files it did not list at first are not reported as problems",
				scrubPath(err2.Error(), dir)))
		}
		refByID := filtersByID(ref)
		dropped := map[uint64]*droppedRecords{}
		for _, st := range stale {
			f := refByID[st.id]
			switch {
			case f != nil && st.layer < len(f.Layers) || err2 != nil:
				// created or grown after the first read, or unknowable
			case f != nil:
				fnd.addFinding("record", problem(st.rel, st.off, "record LSN %d names layer %d of filter %s, which has %d layers",
					st.lsn, st.layer, fmtKey(f.Name), len(f.Layers)))
			case st.id != 0 && st.id < ref.NextID:
				d := dropped[st.id]
				if d == nil {
					d = &droppedRecords{rel: st.rel, off: st.off}
					dropped[st.id] = d
				}
				d.n++
			default:
				fnd.addFinding("record", problem(st.rel, st.off, "record LSN %d names filter id %d, which the catalog never allocated (next id %d)",
					st.lsn, st.id, ref.NextID))
			}
		}
		for _, id := range sortedIDs(dropped) {
			d := dropped[id]
			what := plural(d.n, "WAL record names", "WAL records name")
			fnd.addFinding("dropped", note(d.rel, d.off, "%s filter id %d, which the catalog no longer holds (dropped): replay skips them", what, id))
		}
		for _, j := range missing {
			if f := refByID[j.f.ID]; f != nil && j.i < len(f.Layers) && err2 == nil {
				fnd.addFinding("missing", problem(j.rel, -1, "the catalog lists this layer file of filter %s, but it does not exist", fmtKey(j.f.Name)))
			}
		}
		checkWALStart(dir, fnd, res, ref)

		// 4. Item counts against the data, when nothing moved.
		// A damaged WAL hides changes: counts cannot agree then.
		out.CountsCheck = quiescent && walProblems == 0
		for ji, j := range jobs {
			if j.i == 0 && j.f.Incomplete {
				fnd.addFinding("incomplete", note("catalog.db", -1, "filter %s is incomplete (a bulk Load was interrupted, or is running now): its lookups answer maybe; Drop and re-create it",
					fmtKey(j.f.Name)))
			}
			s := scans[ji]
			if !out.CountsCheck || j.f.Incomplete || s == nil {
				continue
			}
			var delta int64
			if pl := pend.of(j.f.ID).layers[j.i]; pl != nil {
				delta = pl.delta
			}
			checkCounts(fnd, j, s, delta)
		}
		if walProblems > 0 {
			fnd.addFinding("changed", note("", -1, "the WAL has problems: item counts were not cross-checked against the data"))
		} else if !quiescent {
			fnd.addFinding("changed", note("", -1, "the store changed while it was being verified (a writer is active): item counts were not cross-checked against the data"))
		}

		// 5. Whatever else a read-only open of the store rejects.
		if fnd.count(sevProblem) == 0 {
			checkOpen(dir, target, fnd)
		}
	}

	prog.finish()
	all := fnd.all()
	out.Problems, out.Notes = fnd.count(sevProblem), fnd.count(sevNote)
	out.OK = out.Problems == 0
	out.Findings = all
	if out.Findings == nil {
		out.Findings = []finding{}
	}
	if e.json {
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		for _, f := range all {
			fmt.Fprintln(e.stdout, f)
		}
		counts := "item counts cross-checked"
		if !out.CountsCheck {
			counts = "item counts not cross-checked"
		}
		fmt.Fprintf(e.stdout, "verified %s (%s, %s of data) and %s (%s); %s: %s, %s\n",
			plural(out.Filters, "filter", "filters"), plural(out.LayerFiles, "layer file", "layer files"), fmtBytes(out.DataBytes),
			plural(out.WALSegments, "WAL segment", "WAL segments"), plural(out.WALRecords, "record", "records"), counts,
			plural(out.Problems, "problem", "problems"), plural(out.Notes, "note", "notes"))
	}
	if out.Problems > 0 {
		return problemsError(out.Problems, "found", all)
	}
	return nil
}

// verifyLayerFile checks one layer file: reserved header bytes, header
// and size (through the read-only view), the header against want (the
// catalog's expectation, if any), and the layout invariants of its data
// with ov applied. gone reports a file that does not exist.
func verifyLayerFile(path, rel string, want *mmapbits.Header, ov *overlay, prog *progress, fnd *findings) (s *layerScan, gone bool, dataBytes int64) {
	prog.setCurrent(rel)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, true, 0
	}
	if b, err := readHeaderPage(path); err == nil {
		if f, bad := reservedByte(b, rel); bad {
			fnd.addFinding("reserved", f)
		}
	}
	v, err := mmapbits.OS{}.OpenView(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, true, 0
		}
		msg := strings.TrimPrefix(scrubPath(err.Error(), filepath.Dir(filepath.Dir(path))), rel+": ")
		fnd.addFinding("open", problem(rel, offsetIn(err), "%s", msg))
		return nil, false, 0
	}
	defer v.Close()
	h := v.Header()
	dataBytes = int64(v.NumWords()) * 8
	if want != nil && h.Version == 1 && want.StoreID != 0 {
		fnd.addFinding("v1", note(rel, -1, "format version 1 header: it predates store ids, so it cannot be checked against the catalog's"))
	}
	if want != nil {
		for _, d := range headerDiff(h, *want) {
			fnd.addFinding("header", problem(rel, int64(d.off), "header field %s: %s", d.name, d.value))
		}
	}
	g, err := geometryOf(h)
	if err != nil {
		fnd.addFinding("geometry", problem(rel, 12, "the header's geometry is invalid: %v", err))
		prog.add(dataBytes)
		return nil, false, dataBytes
	}
	if need := mmapbits.PagesFor(g.words); h.DataPages > need {
		fnd.addFinding("pages", note(rel, 16, "header says %d data pages, the geometry (%s) needs only %d", h.DataPages, g.sizeDesc(), need))
	}
	return scanLayer(v, g, scanOpts{rel: rel, ov: ov, prog: prog, fs: fnd}), false, dataBytes
}

// checkRecord checks that a WAL record fits the filter layer it names.
func checkRecord(fnd *findings, rel string, off int64, lsn uint64, f *store.FilterRecord, r store.WALRecord) {
	switch {
	case r.Op == store.WALOpHash && f.Kind != mmapbits.KindBloom:
		fnd.addFinding("record", problem(rel, off, "record LSN %d is a Bloom add (a key hash), but filter %s is a %s filter", lsn, fmtKey(f.Name), f.Kind))
		return
	case r.Op == store.WALOpWords && f.Kind == mmapbits.KindBloom:
		fnd.addFinding("record", problem(rel, off, "record LSN %d carries word after-images, but filter %s is a bloom filter (logged as key hashes)", lsn, fmtKey(f.Name)))
		return
	case r.Op != store.WALOpWords:
		return
	}
	h := f.Layers[r.Layer].Header
	g, err := geometryOf(h)
	if err != nil {
		return // the layer file's check reports it
	}
	for _, w := range r.Writes {
		if w.Index >= g.words {
			fnd.addFinding("record", problem(rel, off, "record LSN %d writes word %d of filter %s layer %d, beyond its %d words (%s)",
				lsn, w.Index, fmtKey(f.Name), r.Layer, g.words, g.sizeDesc()))
			continue
		}
		switch h.Kind {
		case mmapbits.KindCuckoo:
			if used := uint(g.b * g.f); used < 64 && w.Value>>used != 0 {
				fnd.addFinding("record", problem(rel, off, "record LSN %d writes %#016x to bucket %d of cuckoo filter %s: bits at and above b*f = %d must be zero",
					lsn, w.Value, w.Index, fmtKey(f.Name), used))
			}
		case mmapbits.KindBitmap:
			if w.Index == g.words-1 && g.size%64 != 0 && w.Value>>(g.size%64) != 0 {
				fnd.addFinding("record", problem(rel, off, "record LSN %d writes %#016x to the last word of bitmap %s: bits at offsets >= its size %d must be zero",
					lsn, w.Value, fmtKey(f.Name), g.size))
			}
		}
	}
}

// checkWALStart reports records missing between the oldest checkpoint a
// filter's files reflect and the first segment: recovery needs them.
func checkWALStart(dir string, fnd *findings, res *wal.ScanResult, cat *store.CatalogSnapshot) {
	need, who := cat.CheckpointLSN, "the checkpoint is at"
	for _, f := range cat.Filters {
		if f.SyncedLSN < need {
			need, who = f.SyncedLSN, fmt.Sprintf("the files of filter %s reflect LSN", fmtKey(f.Name))
		}
	}
	var first *wal.SegmentInfo
	last := cat.CheckpointLSN
	for i := range res.Segments {
		s := &res.Segments[i]
		if s.Vanished {
			continue
		}
		if first == nil {
			first = s
		}
		last = max(last, s.Last)
	}
	if first != nil && last > need && first.FirstLSN > need+1 {
		fnd.addFinding("wal-start", problem(walRel(dir, first.Name), 0, "the WAL starts at LSN %d but %s %d: records %d..%d are missing",
			first.FirstLSN, who, need, need+1, first.FirstLSN-1))
	}
}

// checkOpen opens the store read-only, as a process would, and reports a
// failure, or a filter (target, if not nil) that opens broken: whatever
// the store rejects that the checks above did not find.
func checkOpen(dir string, target *store.FilterRecord, fnd *findings) {
	s, err := openStore(dir)
	if err != nil {
		fnd.addFinding("open", problem("", -1, "a read-only open of the store fails: %s", scrubPath(err.Error(), dir)))
		return
	}
	defer s.Close()
	infos, _ := listStore(s) // fails only once closed
	for _, in := range infos {
		if in.State == "broken" && (target == nil || in.Name == target.Name) {
			fnd.addFinding("open", problem("", -1, "%s", scrubPath(in.Reason, dir)))
		}
	}
}

// checkCounts compares a layer's data with its item count: the catalog's
// at the checkpoint plus the WAL's changes after it.
func checkCounts(fnd *findings, j layerJob, s *layerScan, delta int64) {
	exp := int64(j.l.Items) + delta
	src := fmt.Sprintf("%d at the checkpoint %+d from the WAL", j.l.Items, delta)
	if exp < 0 {
		fnd.addFinding("count", problem(j.rel, -1, "item count is negative: %s", src))
		return
	}
	n := int64(s.set)
	switch s.g.kind {
	case mmapbits.KindBloom:
		if n < exp {
			fnd.addFinding("count", problem(j.rel, -1, "%d bits set, fewer than its %d items (%s): every counted add sets at least one bit", n, exp, src))
		}
	case mmapbits.KindCuckoo:
		if n != exp {
			fnd.addFinding("count", problem(j.rel, -1, "%d slots in use, but it holds %d items (%s)", n, exp, src))
		}
	case mmapbits.KindBitmap:
		if n != exp {
			fnd.addFinding("count", problem(j.rel, -1, "%d bits set, but the count is %d (%s)", n, exp, src))
		}
	case mmapbits.KindCounting:
		if s.saturated == 0 && int64(s.sum) != exp*int64(s.g.k) {
			fnd.addFinding("count", problem(j.rel, -1, "counters sum to %d, but %d items x k=%d is %d (%s; no counter is saturated, so they must agree)",
				s.sum, exp, s.g.k, exp*int64(s.g.k), src))
		}
	}
}

// parseLayerName parses "<id>-<layer>.flt".
func parseLayerName(name string) (id uint64, layer int, ok bool) {
	base, found := strings.CutSuffix(name, ".flt")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(base, "-")
	if !found {
		return 0, 0, false
	}
	id, err1 := strconv.ParseUint(a, 10, 64)
	l, err2 := strconv.Atoi(b)
	return id, l, err1 == nil && err2 == nil && l >= 0
}

var offsetRE = regexp.MustCompile(`offset (\d+)`)

// offsetIn returns the first byte offset an error message names, or -1.
func offsetIn(err error) int64 {
	if m := offsetRE.FindStringSubmatch(err.Error()); m != nil {
		if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			return n
		}
	}
	return -1
}
