package main

import (
	"errors"
	"flag"
	"fmt"
	"math"

	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/store"
)

var lsCmd = &command{
	name:    "ls",
	args:    "DIR",
	short:   "list the filters of a store, one row each",
	minArgs: 1, maxArgs: 1,
	long: `List every filter of the store in DIR: name, kind, items, capacity,
layers, size on disk, bits per item, fill ratio, the estimated current
false-positive rate, and its state:

  ok                  nothing pending
  needs recovery (N)  N WAL records after the filter's checkpoint name it;
                      the next writer Open replays them (a running writer
                      always has some)
  incomplete          a bulk Load was interrupted; only Drop recovers it
  broken              its files are missing or damaged, or the store
                      cannot be opened at all; the reason, naming the file,
                      is printed under the table. Its lookups answer
                      "maybe" and its numbers are the catalog's.

The numbers include those WAL records: a read-only open of the store
replays them in memory, so they match what the live store would report.
A broken filter makes the exit status 1; the other filters are listed as
usual.

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
	State        string  `json:"state"`
	Reason       string  `json:"reason,omitempty"`
	Pending      int     `json:"pending_wal_records"`
	fill         float64 // NaN when unknown
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
	out := lsOut{CheckpointLSN: cat.CheckpointLSN, Filters: []lsRow{}}
	if perr == nil {
		out.Pending = pend.total
	}
	byName := map[string]*catalog.Filter{}
	for i := range cat.Filters {
		byName[cat.Filters[i].Name] = &cat.Filters[i]
	}
	var infos []store.Info
	s, oerr := openStore(dir)
	if oerr == nil {
		infos, oerr = s.List()
		s.Close()
	}
	if oerr != nil {
		// No filter can be read: list the catalog's, all broken.
		infos = nil
		for _, f := range cat.Filters {
			infos = append(infos, store.Info{Name: f.Name, Kind: f.Kind.String(), State: "broken",
				Reason: "the store cannot be opened: " + oerr.Error()})
		}
	}
	var broken []lsRow
	for _, in := range infos {
		f := byName[in.Name] // nil if created after the catalog read
		n := 0
		if f != nil && perr == nil {
			n = pend.of(f.ID).records
		}
		row := lsRow{Name: in.Name, Kind: in.Kind, Items: in.Items, Capacity: in.Capacity, Layers: in.Layers,
			SizeBytes: in.SizeBytes, BitsPerItem: jfloat(in.BitsPerKey), FillRatio: jfloat(in.FillRatio),
			EstimatedFPR: jfloat(in.EstimatedFPR), Pending: n, fill: in.FillRatio,
			State: filterState(in.State == "broken", in.State == "incomplete", n)}
		if in.State == "broken" {
			row.Reason = oneLine(scrubPath(in.Reason, dir))
			row.BitsPerItem, row.FillRatio, row.EstimatedFPR, row.fill = jfloat(math.NaN()), jfloat(math.NaN()), jfloat(math.NaN()), math.NaN()
			if f != nil { // the catalog's numbers, as of the filter's checkpoint
				row.Layers = len(f.Layers)
				for _, l := range f.Layers {
					row.Items += l.Items
					row.Capacity += l.Header.Capacity
					row.SizeBytes += l.Header.FileSize()
				}
			}
			broken = append(broken, row)
		}
		out.Filters = append(out.Filters, row)
	}

	if e.json {
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		after := plural(out.Pending, "WAL record", "WAL records") + " after it"
		if perr != nil {
			after = "the WAL after it cannot be read"
		}
		fmt.Fprintf(e.stdout, "checkpoint LSN %d, %s\n\n", cat.CheckpointLSN, after)
		t := newTable("NAME", "KIND", ">ITEMS", ">CAPACITY", ">LAYERS", ">SIZE", ">BITS/ITEM", ">FILL", ">EST.FPR", "STATE")
		for _, r := range out.Filters {
			bpi := "-"
			if r.Items > 0 && !math.IsNaN(float64(r.BitsPerItem)) {
				bpi = fmt.Sprintf("%.2f", float64(r.BitsPerItem))
			}
			t.add(fmtKey(r.Name), r.Kind, fmt.Sprint(r.Items), fmt.Sprint(r.Capacity), fmt.Sprint(r.Layers),
				fmtBytes(r.SizeBytes), bpi, fmtFill(r.fill), fmtRate(float64(r.EstimatedFPR)), r.State)
		}
		if err := t.write(e.stdout); err != nil {
			return err
		}
		if len(out.Filters) == 0 {
			fmt.Fprintln(e.stdout, "(no filters)")
		}
		if oerr == nil && len(broken) > 0 {
			fmt.Fprintln(e.stdout)
			for _, r := range broken {
				fmt.Fprintln(e.stdout, r.Reason)
			}
		}
	}
	switch {
	case oerr != nil:
		return fmt.Errorf("the store cannot be opened, numbers are the catalog's: %w", relError(oerr, dir))
	case len(broken) == 1:
		return &cmdError{code: exitProblems, err: errors.New(broken[0].Reason)}
	case len(broken) > 1:
		return &cmdError{code: exitProblems, err: fmt.Errorf("%d filters are broken; the first: %s", len(broken), broken[0].Reason)}
	case perr != nil:
		return fmt.Errorf("reading the WAL: %w", perr)
	}
	return nil
}
