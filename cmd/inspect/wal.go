package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/filterstore/filterstore/store"
	"github.com/filterstore/filterstore/wal"
)

var walCmd = &command{
	name:    "wal",
	args:    "DIR",
	short:   "WAL segments, LSN ranges, record counts per filter and op",
	minArgs: 1, maxArgs: 1,
	long: `Summarize the write-ahead log of the store in DIR: each segment with its
LSN range, record count, size and tail (clean, or torn: the incomplete
record a crash or a writer still appending leaves), then the records per
filter and op (hash: a Bloom add; words: after-images of cuckoo, counting
or bitmap words), with how many come after the checkpoint of their
filter (the catalog's, or the older one a broken filter keeps) and would
be replayed by the next writer Open. A batch record (store.Batch: ops on
several filters, committed and replayed all or none) counts once among
the records, and each of its parts in the row of its filter and op.

Segments are read with wal.Scan, the reader recovery and read-only opens
use, so they are checked exactly as recovery checks them, and so are
their ends: records the catalog's checkpoint needs that no segment holds,
and a newest segment the SESSION marker names (a writer running, or
dead) that is gone, or no segment at all beside it. Anything wrong is
listed with its file and offset, and the exit status is 1. VERSION is
the segment header's format: 1 (24 bytes) or 2 (32 bytes, with the id of
the store that wrote it, checked against the catalog's).

With --dump, print every record instead, one per line:

  lsn=N seg=FILE off=OFFSET filter=NAME id=ID layer=L op=hash hash=0x... [pending]
  lsn=N seg=FILE off=OFFSET filter=NAME id=ID layer=L op=words delta=+1 writes=2 [IDX]=0xVALUE ... [pending]
  lsn=N seg=FILE off=OFFSET op=batch parts=2 | filter=NAME ... op=hash ... | filter=NAME ... op=words ... [pending]
  lsn=N seg=FILE off=OFFSET op=external seq=S parts=1 | filter=NAME ... op=hash ... [pending]
  lsn=N seg=FILE off=OFFSET filter=NAME id=ID op=load [pending]

"pending" marks records the next writer Open replays: after their
filter's checkpoint and its last load record. filter=- names an id the
catalog no longer holds (a dropped filter: its records are skipped, never
pending). An external record is a batch applied in external-log mode,
with its sequence number in the engine's log. A load record says a Load
of the filter began, or an external op on it was skipped: pending, it
makes the next writer Open bring the filter back incomplete, skipping
the filter's records before it. With --json --dump, one JSON object per
line.

Examples:

  inspect wal /tmp/fsdemo
  inspect wal --dump /tmp/fsdemo | grep pending`,
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		var dump bool
		fs.BoolVar(&dump, "dump", false, "print every record, one per line")
		return func(e *env, args []string) error { return runWal(e, args, dump) }
	},
}

type walSegJSON struct {
	File     string `json:"file"`
	Version  uint32 `json:"header_version"` // 0: the header does not decode
	StoreID  uint64 `json:"store_id"`
	FirstLSN uint64 `json:"first_lsn"`
	// LastLSN is 0 for a segment that holds no record (records 0; the
	// text table prints "-"): no record has LSN 0.
	LastLSN uint64 `json:"last_lsn"`
	Records int    `json:"records"`
	Bytes   int64  `json:"bytes"`
	Tail    string `json:"tail"`
}

type walFilterJSON struct {
	Name string `json:"name"` // "-" for an id the catalog does not hold (or an unreadable catalog)
	// Dropped marks an id a catalog that was read no longer holds, which
	// a live filter named "-" is not; with the catalog unreadable, no id
	// is marked.
	Dropped         bool   `json:"dropped,omitempty"`
	ID              uint64 `json:"id"`
	Op              string `json:"op"`
	Records         int    `json:"records"`
	WordWrites      int    `json:"word_writes"`
	AfterCheckpoint int    `json:"after_checkpoint"`
}

type walOut struct {
	CheckpointLSN uint64          `json:"checkpoint_lsn"`
	Segments      []walSegJSON    `json:"segments"`
	Filters       []walFilterJSON `json:"filters"`
	Records       int             `json:"records"`
	Batches       int             `json:"batches"` // batch records among them
	Pending       int             `json:"after_checkpoint"`
	Findings      []finding       `json:"findings"`
}

type walDumpJSON struct {
	LSN     uint64   `json:"lsn"`
	Segment string   `json:"segment"`
	Offset  int64    `json:"offset"`
	Filter  string   `json:"filter"`
	ID      uint64   `json:"id"`
	Layer   *int     `json:"layer,omitempty"` // hash and words records
	Op      string   `json:"op"`
	Seq     *uint64  `json:"seq,omitempty"` // external records
	Hash    *string  `json:"hash,omitempty"`
	Delta   *int     `json:"delta,omitempty"`
	Writes  []string `json:"writes,omitempty"`
	Pending bool     `json:"pending"`
	Error   string   `json:"error,omitempty"`
	// Parts are a batch record's ops, each as a lone record's line
	// without its position.
	Parts []walDumpJSON `json:"parts,omitempty"`
}

// walRun is the state of one wal command.
type walRun struct {
	e      *env
	dir    string
	dump   bool
	cat    *catalogSnapshot // empty if it cannot be read
	catOK  bool             // the catalog was read: an id it lacks was dropped
	byID   map[uint64]*filterRecord
	loads  map[uint64]uint64 // see lastLoads
	counts map[walKey]*walFilterJSON
	out    walOut
	werr   error // the first error writing the dump
}

type walKey struct {
	id uint64
	op walOp
}

func runWal(e *env, args []string, dump bool) error {
	w := &walRun{e: e, dir: args[0], dump: dump, counts: map[walKey]*walFilterJSON{}}
	fnd := newFindings(10)
	cat, err := readCatalog(w.dir)
	catOK := err == nil
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			return err
		}
		fnd.addFinding("catalog", problem("catalog.db", offsetIn(err), "%s (filter names and the checkpoint are unknown)", scrubPath(err.Error(), w.dir)))
		cat = &catalogSnapshot{}
	}
	w.cat, w.catOK, w.byID = cat, catOK, filtersByID(cat)
	w.loads = lastLoads(w.dir, cat, w.byID)
	w.out = walOut{CheckpointLSN: cat.CheckpointLSN, Segments: []walSegJSON{}, Filters: []walFilterJSON{}}
	marker := readSessionMarker(w.dir) // before the segments are listed
	res, err := scanWALAll(w.dir, cat.StoreID, nil, fnd, w.record)
	if err != nil {
		return err
	}
	if catOK {
		checkWALEnds(w.dir, fnd, res, cat, marker)
	}
	if w.werr != nil {
		return w.werr
	}
	all := fnd.all()
	w.out.Findings = all
	if w.out.Findings == nil {
		w.out.Findings = []finding{}
	}
	w.out.Segments = walSegments(w.dir, res)
	w.out.Filters = sortedWALFilters(w.counts)
	problems := fnd.count(sevProblem)
	switch {
	case dump:
		for _, f := range all {
			fmt.Fprintf(e.stderr, "inspect wal: %s\n", f)
		}
		if problems > 0 {
			return errProblems // each one printed on stderr above
		}
		return nil
	case e.json:
		if err := writeJSON(e.stdout, w.out); err != nil {
			return err
		}
	default:
		printWal(e.stdout, &w.out, catOK, all)
	}
	if problems > 0 {
		return problemsError(problems, "in the WAL", all)
	}
	return nil
}

func (w *walRun) nameOf(id uint64) string {
	if f := w.byID[id]; f != nil {
		return f.Name
	}
	return "-"
}

// dumpNameOf is the filter=... value of a dump line for filter id: its
// name made safe (dumpName), or a bare - for an id the catalog no longer
// holds.
func (w *walRun) dumpNameOf(id uint64) string {
	if f := w.byID[id]; f != nil {
		return dumpName(f.Name)
	}
	return "-"
}

// record counts one valid WAL record per filter and op, and dumps it.
func (w *walRun) record(rel string, at wal.Position, payload []byte) {
	w.out.Records++
	r, err := decodeWALRecord(payload)
	pending := at.LSN > w.cat.CheckpointLSN
	if err == nil {
		// A batch record counts as one record, pending if a part is; its
		// parts count in the rows of their filters and ops.
		pending = false
		if r.Op == walOpBatch {
			w.out.Batches++
		}
		for op := range r.Ops() {
			// Replay skips a filter's records before its last load
			// record: they are not pending.
			after := at.LSN > syncedLSN(w.cat, w.byID, op.FilterID) && at.LSN >= w.loads[op.FilterID]
			pending = pending || after
			k := walKey{op.FilterID, op.Op}
			c := w.counts[k]
			if c == nil {
				c = &walFilterJSON{Name: w.nameOf(op.FilterID), Dropped: w.catOK && w.byID[op.FilterID] == nil, ID: op.FilterID, Op: op.Op.String()}
				w.counts[k] = c
			}
			c.Records++
			c.WordWrites += len(op.Writes)
			if after {
				c.AfterCheckpoint++
			}
		}
	}
	if pending {
		w.out.Pending++
	}
	if !w.dump || w.werr != nil {
		return
	}
	if w.e.json {
		w.werr = writeJSONLine(w.e.stdout, w.dumpJSON(rel, at, r, err, pending))
		return
	}
	_, w.werr = fmt.Fprint(w.e.stdout, w.dumpLine(at, r, err, pending))
}

// dumpJSON is one --dump --json line.
func (w *walRun) dumpJSON(rel string, at wal.Position, r walRecord, err error, pending bool) walDumpJSON {
	d := walDumpJSON{LSN: at.LSN, Segment: rel, Offset: at.Offset, Pending: pending}
	if err != nil {
		d.Error = oneLine(err.Error())
		return d
	}
	if r.Op == walOpBatch || r.Op == walOpExt {
		d.Op = r.Op.String()
		if r.Op == walOpExt {
			seq := r.Seq
			d.Seq = &seq
		}
		for _, p := range r.Parts {
			d.Parts = append(d.Parts, w.dumpPartJSON(p))
		}
		return d
	}
	pd := w.dumpPartJSON(r)
	pd.LSN, pd.Segment, pd.Offset, pd.Pending = d.LSN, d.Segment, d.Offset, d.Pending
	return pd
}

// dumpPartJSON is the JSON of a hash, words or load record (a lone one,
// or a batch record's part), without its position.
func (w *walRun) dumpPartJSON(r walRecord) walDumpJSON {
	var d walDumpJSON
	d.Filter, d.ID, d.Op = w.nameOf(r.FilterID), r.FilterID, r.Op.String()
	if r.Op == walOpLoad {
		return d
	}
	layer := r.Layer
	d.Layer = &layer
	if r.Op == walOpHash {
		h := fmt.Sprintf("%#016x", r.Hash)
		d.Hash = &h
		return d
	}
	delta := int(r.Delta)
	d.Delta = &delta
	d.Writes = make([]string, 0, len(r.Writes))
	for _, ww := range r.Writes {
		d.Writes = append(d.Writes, fmt.Sprintf("[%d]=%#016x", ww.Index, ww.Value))
	}
	return d
}

// dumpLine is one --dump line.
func (w *walRun) dumpLine(at wal.Position, r walRecord, err error, pending bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lsn=%d seg=%s off=%d", at.LSN, at.Segment, at.Offset)
	switch {
	case err != nil:
		fmt.Fprintf(&b, " error=%q", oneLine(err.Error()))
	case r.Op == walOpBatch || r.Op == walOpExt:
		fmt.Fprintf(&b, " op=%s", r.Op)
		if r.Op == walOpExt {
			fmt.Fprintf(&b, " seq=%d", r.Seq)
		}
		fmt.Fprintf(&b, " parts=%d", len(r.Parts))
		for _, p := range r.Parts {
			b.WriteString(" |")
			w.dumpPart(&b, p)
		}
	default:
		w.dumpPart(&b, r)
	}
	if pending {
		b.WriteString(" pending")
	}
	b.WriteByte('\n')
	return b.String()
}

// dumpPart writes the fields of a hash, words or load record (a lone one,
// or a batch record's part) to b, each after a space.
func (w *walRun) dumpPart(b *strings.Builder, r walRecord) {
	if r.Op == walOpLoad {
		fmt.Fprintf(b, " filter=%s id=%d op=%s", w.dumpNameOf(r.FilterID), r.FilterID, r.Op)
		return
	}
	if r.Op == walOpHash {
		fmt.Fprintf(b, " filter=%s id=%d layer=%d op=%s hash=%#016x", w.dumpNameOf(r.FilterID), r.FilterID, r.Layer, r.Op, r.Hash)
		return
	}
	fmt.Fprintf(b, " filter=%s id=%d layer=%d op=%s delta=%+d writes=%d", w.dumpNameOf(r.FilterID), r.FilterID, r.Layer, r.Op, r.Delta, len(r.Writes))
	for _, ww := range r.Writes {
		fmt.Fprintf(b, " [%d]=%#016x", ww.Index, ww.Value)
	}
}

// walSegments describes the segments a scan read.
func walSegments(dir string, res *wal.ScanResult) []walSegJSON {
	corrupt := map[string]bool{}
	for _, p := range res.Problems {
		corrupt[p.Segment] = true
	}
	out := []walSegJSON{}
	for _, s := range res.Segments {
		if s.Vanished {
			continue
		}
		tail, size := "clean", s.Size
		switch {
		case corrupt[s.Name]:
			tail = "corrupt"
		case s.Tail != nil && s.Tail.Zero:
			// Space the writer reserved past its last record: the
			// segment's records end there.
			size = s.Tail.Offset
		case s.Tail != nil:
			tail = fmt.Sprintf("torn at %d", s.Tail.Offset)
		}
		out = append(out, walSegJSON{File: walRel(dir, s.Name), Version: s.Header.Version, StoreID: s.Header.StoreID,
			FirstLSN: s.FirstLSN, LastLSN: s.Last, Records: s.Records, Bytes: size, Tail: tail})
	}
	return out
}

// sortedWALFilters lists the per filter and op counts by id, then op.
func sortedWALFilters(counts map[walKey]*walFilterJSON) []walFilterJSON {
	out := []walFilterJSON{}
	for _, c := range counts {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.Op < b.Op
	})
	return out
}

// printWal writes the segment and per-filter tables and the findings.
func printWal(w io.Writer, out *walOut, catOK bool, all []finding) {
	if catOK {
		fmt.Fprintf(w, "checkpoint LSN %d (from the catalog)\n\n", out.CheckpointLSN)
	} else {
		fmt.Fprintf(w, "checkpoint LSN unknown (the catalog cannot be read)\n\n")
	}
	t := newTable("SEGMENT", ">VERSION", ">FIRST LSN", ">LAST LSN", ">RECORDS", ">SIZE", "TAIL")
	for _, s := range out.Segments {
		last, version := "-", "-"
		if s.Records > 0 {
			last = fmt.Sprint(s.LastLSN)
		}
		if s.Version > 0 {
			version = fmt.Sprint(s.Version)
		}
		t.add(s.File, version, fmt.Sprint(s.FirstLSN), last, fmt.Sprint(s.Records), fmtBytes(s.Bytes), s.Tail)
	}
	t.write(w)
	if len(out.Segments) == 0 {
		fmt.Fprintln(w, "(no segments)")
	}
	fmt.Fprintln(w)
	ft := newTable("FILTER", ">ID", "OP", ">RECORDS", ">WORD WRITES", ">AFTER CHECKPOINT")
	for _, c := range out.Filters {
		name := "-" // dropped, or the catalog unreadable
		if !c.Dropped && catOK {
			name = dumpName(c.Name)
		}
		ft.add(name, fmt.Sprint(c.ID), c.Op, fmt.Sprint(c.Records), fmt.Sprint(c.WordWrites), fmt.Sprint(c.AfterCheckpoint))
	}
	ft.write(w)
	batches := ""
	if out.Batches > 0 {
		batches = fmt.Sprintf(" (%s)", plural(out.Batches, "batch", "batches"))
	}
	fmt.Fprintf(w, "\n%s%s in %s, %d after the checkpoint\n", plural(out.Records, "record", "records"), batches,
		plural(len(out.Segments), "segment", "segments"), out.Pending)
	for _, f := range all {
		fmt.Fprintln(w, f)
	}
}

// dumpName makes a filter name safe for a key=value line and a terminal:
// quoted if it holds "=", a space, a quote or a character that is not
// printable (an escape sequence), or is "-", which stands for a dropped
// filter.
func dumpName(n string) string {
	if n == "-" || strings.ContainsRune(n, '=') {
		return strconv.Quote(n)
	}
	return fmtKey(n) // quotes control characters: a name cannot drive the terminal
}
