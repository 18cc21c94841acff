package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

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
  unlisted files    a file of this store, with data, of a filter or
                    layer the catalog does not name (a catalog older
                    than the files): the next writer Open refuses it

Notes are not problems: a torn tail at the end of the last segment (a
writer may be appending; the next writer Open truncates it), WAL records
of dropped filters (replay skips them), orphan or temporary files (each
note says whether the next writer Open removes it or leaves it alone:
it leaves a file whose header is not this store's alone), incomplete
filters.

Safe to run beside a live writer. A progress bar is drawn on stderr when
it is a terminal and the scrub takes more than a second.

Exit status: 0 clean, 1 problems found, 2 usage or I/O error, or the
only problems are files that could not be read (permission denied, an
I/O error), each listed.

Examples:

  inspect verify /tmp/fsdemo
  inspect verify /tmp/fsdemo demo --json`,
	setup: func(fs *flag.FlagSet) func(*env, []string) error { return runVerify },
}

type verifyOut struct {
	OK          bool  `json:"ok"`
	Problems    int   `json:"problems"`
	Notes       int   `json:"notes"`
	Filters     int   `json:"filters"`
	LayerFiles  int   `json:"layer_files"`
	DataBytes   int64 `json:"data_bytes"`
	WALSegments int   `json:"wal_segments"`
	WALRecords  int   `json:"wal_records"`
	CountsCheck bool  `json:"item_counts_checked"`
	// SumsChecked says the data pages were checked against their
	// checksums: PagesVerified matched, PagesChanged were changed after
	// the checkpoint (by WAL records, or a writer that died) and not
	// checked.
	SumsChecked   bool      `json:"data_checksums_checked"`
	PagesVerified uint64    `json:"data_pages_verified"`
	PagesChanged  uint64    `json:"data_pages_changed"`
	Findings      []finding `json:"findings"`
}

// verifyPhase is one step of the scrub. Phases run in order, each adding
// its findings to the verifier; an error ends the scrub (exit status 2).
type verifyPhase struct {
	name string
	run  func(v *verifier) error
}

// verifyPhases is the scrub, in order. The WAL comes first: its records
// after each filter's checkpoint are the overlay the layer files are read
// with.
var verifyPhases = []verifyPhase{
	{"WAL", (*verifier).phaseWAL},                                  // verify_wal.go
	{"catalog vs files", (*verifier).phaseLayerFiles},              // verify_files.go, with headers and layouts
	{"files the catalog does not list", (*verifier).phaseUnlisted}, // verify_files.go
	{"second catalog read", (*verifier).phaseReread},               // verify_reread.go
	{"item counts", (*verifier).phaseCounts},                       // verify_counts.go
	{"data checksums", (*verifier).phaseSums},                      // verify_sums.go
	{"open", (*verifier).phaseOpen},                                // verify_counts.go
}

// verifier is the state of one scrub, shared by its phases.
type verifier struct {
	dir    string
	target *filterRecord            // nil: every filter
	cat    *catalogSnapshot         // nil: the catalog cannot be read
	byID   map[uint64]*filterRecord // cat's filters
	jobs   []layerJob               // the layer files cat lists
	fnd    *findings
	prog   *progress
	out    verifyOut

	// Set by phaseWAL.
	res         *wal.ScanResult
	pend        *pendingSet   // records after each filter's checkpoint
	stale       []staleRecord // records naming filters or layers cat does not hold
	walProblems int

	// Set by phaseLayerFiles.
	scans   []*layerScan // per job; nil: missing or unreadable
	stamps  []uint64     // per job: the file's stamp, read before the second WAL read
	missing []layerJob

	// Set by phaseUnlisted: files with data that cat does not name, each
	// a problem unless the second read names it (a writer made it).
	unnamed []unnamedFile
	// runEnd is the first id from cat's next id on with no layer-0 file
	// of this store's in the filters directory: the files below it that
	// the catalog does not name are failed creates' (store/orphans.go).
	runEnd uint64

	// Set by phaseReread.
	quiescent bool // the catalog and WAL did not change during the scrub
}

type layerJob struct {
	f   *filterRecord
	i   int
	l   layerRecord
	rel string
}

func runVerify(e *env, args []string) error {
	v, err := newVerifier(e, args)
	if err != nil {
		return err
	}
	defer v.prog.finish()
	for _, p := range verifyPhases {
		if err := p.run(v); err != nil {
			return err
		}
	}
	v.prog.finish()
	return v.report(e.stdout, e.json)
}

// newVerifier reads the catalog (a corrupt one is a finding, and the scrub
// goes on with the files alone), finds the target filter, lists the layer
// files to read and starts the progress bar.
func newVerifier(e *env, args []string) (*verifier, error) {
	v := &verifier{dir: args[0], fnd: newFindings(10), pend: &pendingSet{byID: map[uint64]*pendingFilter{}}}
	cat, err := readCatalog(v.dir)
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			return nil, err
		}
		v.fnd.addFinding("catalog", problem("catalog.db", offsetIn(err), "%s", scrubPath(err.Error(), v.dir)))
	} else {
		v.cat, v.byID = cat, filtersByID(cat)
	}
	if len(args) > 1 {
		if v.cat == nil {
			return nil, fmt.Errorf("cannot look up filter %s: %w", fmtKey(args[1]), err)
		}
		if v.target, err = findFilter(v.dir, v.cat, args[1]); err != nil {
			return nil, err
		}
	}
	if v.cat != nil {
		for i := range v.cat.Filters {
			f := &v.cat.Filters[i]
			if v.target != nil && f.ID != v.target.ID {
				continue
			}
			v.out.Filters++
			for li, l := range f.Layers {
				v.jobs = append(v.jobs, layerJob{f: f, i: li, l: l, rel: relPath(v.dir, l.Path)})
			}
		}
	}
	var total int64
	for _, n := range walSizes(v.dir) {
		total += n
	}
	for _, j := range v.jobs {
		total += layerDataBytes(j.l)
	}
	v.prog = newProgress(e.stderr, "verify", total)
	return v, nil
}

// report writes the findings and the summary line.
func (v *verifier) report(w io.Writer, asJSON bool) error {
	out := &v.out
	all := v.fnd.all()
	out.Problems, out.Notes = v.fnd.count(sevProblem), v.fnd.count(sevNote)
	out.OK = out.Problems == 0
	out.Findings = all
	if out.Findings == nil {
		out.Findings = []finding{}
	}
	if asJSON {
		if err := writeJSON(w, out); err != nil {
			return err
		}
	} else {
		for _, f := range all {
			fmt.Fprintln(w, f)
		}
		counts := "item counts cross-checked"
		if !out.CountsCheck {
			counts = "item counts not cross-checked"
		}
		sums := "data checksums not checked"
		if out.SumsChecked {
			sums = fmt.Sprintf("%s matched their checksums", plural(int(out.PagesVerified), "data page", "data pages"))
			if out.PagesChanged > 0 {
				sums += fmt.Sprintf(" (%d changed after the checkpoint, not checked)", out.PagesChanged)
			}
		}
		fmt.Fprintf(w, "verified %s (%s, %s of data) and %s (%s); %s; %s: %s, %s\n",
			plural(out.Filters, "filter", "filters"), plural(out.LayerFiles, "layer file", "layer files"), fmtBytes(out.DataBytes),
			plural(out.WALSegments, "WAL segment", "WAL segments"), plural(out.WALRecords, "record", "records"), counts, sums,
			plural(out.Problems, "problem", "problems"), plural(out.Notes, "note", "notes"))
	}
	if out.Problems > 0 && out.Problems == v.fnd.unreadable {
		return unreadableError(out.Problems, all)
	}
	if out.Problems > 0 {
		return problemsError(out.Problems, "found", all)
	}
	return nil
}

// offsetIn returns the byte offset of the field a header or size error
// names, or -1.
func offsetIn(err error) int64 {
	var fe *mmapbits.FieldError
	if errors.As(err, &fe) {
		return fe.Offset
	}
	return -1
}
