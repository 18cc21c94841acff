package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/filterstore/filterstore/store"
)

var lsCmd = &command{
	name:    "ls",
	args:    "DIR",
	short:   "list the filters of a store, one row each",
	minArgs: 1, maxArgs: 1,
	long: `List every filter of the store in DIR: name, kind, items, capacity,
layers, size on disk, bits per item, fill ratio, the estimated current
false-positive rate, the WAL records pending for it (PENDING: records
after the filter's checkpoint that name it, which the next writer Open
replays), and its state, the same four values every command shows:

  ok              nothing pending
  needs recovery  WAL records after the filter's checkpoint name it (a
                  running writer's filters usually have some)
  incomplete      a bulk Load is running, or was interrupted (or its WAL
                  record follows an older catalog), or an external op
                  was skipped; once its Load is over, only Drop
                  recovers it
  broken          its files are missing or damaged, or the store cannot
                  be opened at all; the reason, naming the file, is
                  printed under the table. Its lookups answer "maybe"
                  and its numbers are the catalog's.

The numbers include those WAL records: a read-only open of the store
replays them in memory, so they match what the live store would report.
A broken filter makes the exit status 1 (2 if every broken filter is
broken only because a layer file cannot be read, as with permission
denied); the other filters are listed as usual.

Example:

  inspect ls /tmp/fsdemo`,
	setup: func(fs *flag.FlagSet) func(*env, []string) error { return runLs },
}

type lsRow struct {
	Name         string  `json:"name"`
	Kind         string  `json:"kind"`
	Items        uint64  `json:"items"`
	Capacity     uint64  `json:"capacity"`
	Layers       int     `json:"layers"`
	SizeBytes    int64   `json:"size_bytes"`
	BitsPerItem  jfloat  `json:"bits_per_item"`
	FillRatio    jfloat  `json:"fill_ratio"`
	EstimatedFPR jfloat  `json:"estimated_fpr"`
	State        string  `json:"state"` // ok, incomplete, needs recovery, broken
	Reason       string  `json:"reason,omitempty"`
	Pending      int     `json:"pending_wal_records"`
	fill         float64 // NaN when unknown
	unreadable   bool    // broken: a layer file could not be read
}

type lsOut struct {
	CheckpointLSN uint64  `json:"checkpoint_lsn"`
	Pending       int     `json:"pending_wal_records"`
	Filters       []lsRow `json:"filters"`
}

func runLs(e *env, args []string) error {
	dir := args[0]
	cat, err := readCatalog(dir)
	if err != nil {
		return err
	}
	pend, perr := scanPending(dir, cat, false)
	infos, fills, oerr := listFilters(dir, cat)
	if errors.Is(oerr, store.ErrLocked) {
		// A writer checkpointed during each of the read-only opens: the
		// store is busy, not broken. No table of filters "broken" by it.
		return fmt.Errorf("the store cannot be opened: %w", relError(oerr, dir))
	}
	out := lsOut{CheckpointLSN: cat.CheckpointLSN, Filters: []lsRow{}}
	if perr == nil {
		out.Pending = pend.total
	} else {
		pend = nil
	}
	byName := map[string]*filterRecord{}
	for i := range cat.Filters {
		byName[cat.Filters[i].Name] = &cat.Filters[i]
	}
	var broken []lsRow
	for _, in := range infos {
		fill, ok := fills[in.Name]
		if !ok {
			fill = math.NaN()
		}
		row := newLsRow(dir, in, fill, byName[in.Name], pend)
		if row.State == stateBroken {
			broken = append(broken, row)
		}
		out.Filters = append(out.Filters, row)
	}
	if e.json {
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	} else if err := printLs(e.stdout, out, perr != nil, oerr == nil, broken); err != nil {
		return err
	}
	return lsError(dir, oerr, perr, broken)
}

// listFilters is the store's List from a read-only open, and the fill
// ratio of each filter that is not broken (Fill: a read of its data); if
// the store cannot be opened, the catalog's filters, all broken, and the
// error.
func listFilters(dir string, cat *catalogSnapshot) ([]store.Info, map[string]float64, error) {
	s, err := openStore(dir)
	if err == nil {
		var infos []store.Info
		infos, err = s.List()
		fills := map[string]float64{}
		for _, in := range infos {
			if in.State != stateBroken {
				fills[in.Name] = fillOf(s, in.Name)
			}
		}
		s.Close()
		if err == nil {
			return infos, fills, nil
		}
	}
	var infos []store.Info
	for _, f := range cat.Filters {
		infos = append(infos, store.Info{Name: f.Name, Kind: f.Kind.String(), State: stateBroken,
			Reason: "the store cannot be opened: " + err.Error()})
	}
	return infos, nil, err
}

// newLsRow is the row of one filter: the store's numbers (fill: NaN when
// unknown), or for a broken one the catalog's (f, nil if created after the
// catalog read) as of its checkpoint. pend is nil when the WAL cannot be
// read.
func newLsRow(dir string, in store.Info, fill float64, f *filterRecord, pend *pendingSet) lsRow {
	n := 0
	if f != nil && pend != nil {
		n = pend.of(f.ID).records
	}
	row := lsRow{Name: in.Name, Kind: in.Kind, Items: in.Items, Capacity: in.Capacity, Layers: in.Layers,
		SizeBytes: in.SizeBytes, BitsPerItem: jfloat(in.BitsPerKey), FillRatio: jfloat(fill),
		EstimatedFPR: jfloat(in.EstimatedFPR), Pending: n, fill: fill,
		State: filterState(in.State == stateBroken, in.State == stateIncomplete, n)}
	if row.State != stateBroken {
		return row
	}
	row.Reason = oneLine(scrubPath(in.Reason, dir))
	row.unreadable = f != nil && layerUnreadable(f) != nil
	row.BitsPerItem, row.FillRatio, row.EstimatedFPR, row.fill = jfloat(math.NaN()), jfloat(math.NaN()), jfloat(math.NaN()), math.NaN()
	if f != nil {
		row.Layers = len(f.Layers)
		for _, l := range f.Layers {
			row.Items += l.Items
			row.Capacity += l.Header.Capacity
			row.SizeBytes += l.Header.FileSize()
		}
	}
	return row
}

// printLs writes the table; walErr says the WAL could not be read, and
// reasons whether to list the broken filters' reasons under it.
func printLs(w io.Writer, out lsOut, walErr, reasons bool, broken []lsRow) error {
	after := plural(out.Pending, "WAL record", "WAL records") + " after it"
	if walErr {
		after = "the WAL after it cannot be read"
	}
	fmt.Fprintf(w, "checkpoint LSN %d, %s\n\n", out.CheckpointLSN, after)
	t := newTable("NAME", "KIND", ">ITEMS", ">CAPACITY", ">LAYERS", ">SIZE", ">BITS/ITEM", ">FILL", ">EST.FPR", ">PENDING", "STATE")
	for _, r := range out.Filters {
		bpi := "-"
		if r.Items > 0 && !math.IsNaN(float64(r.BitsPerItem)) {
			bpi = fmt.Sprintf("%.2f", float64(r.BitsPerItem))
		}
		t.add(fmtKey(r.Name), r.Kind, fmt.Sprint(r.Items), fmt.Sprint(r.Capacity), fmt.Sprint(r.Layers),
			fmtBytes(r.SizeBytes), bpi, fmtFill(r.fill), fmtRate(float64(r.EstimatedFPR)), fmt.Sprint(r.Pending), r.State)
	}
	if err := t.write(w); err != nil {
		return err
	}
	if len(out.Filters) == 0 {
		fmt.Fprintln(w, "(no filters)")
	}
	if reasons && len(broken) > 0 {
		fmt.Fprintln(w)
		for _, r := range broken {
			fmt.Fprintln(w, r.Reason)
		}
	}
	return nil
}

// lsError is ls's exit: the store could not be opened (2), broken
// filters (1; 2 if every one is broken because a layer file could not be
// read), the WAL could not be read (2).
func lsError(dir string, oerr, perr error, broken []lsRow) error {
	code, first := exitUsage, ""
	for _, r := range broken {
		if !r.unreadable && code == exitUsage {
			code, first = exitProblems, r.Reason // bad data is named first
		}
	}
	if first == "" && len(broken) > 0 {
		first = broken[0].Reason
	}
	switch {
	case oerr != nil:
		return fmt.Errorf("the store cannot be opened, numbers are the catalog's: %w", relError(oerr, dir))
	case len(broken) == 1:
		return &cmdError{code: code, err: errors.New(first)}
	case len(broken) > 1:
		return &cmdError{code: code, err: fmt.Errorf("%d filters are broken; the first: %s", len(broken), first)}
	case perr != nil:
		return fmt.Errorf("reading the WAL: %w", perr)
	}
	return nil
}
