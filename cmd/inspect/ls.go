package main

import (
	"flag"
	"fmt"
	"math"
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
  incomplete          a bulk Load was interrupted; only Drop recovers it
  needs recovery (N)  N WAL records after the checkpoint name the filter;
                      the next writer Open replays them (a running writer
                      always has some)

The numbers include those WAL records: they are replayed into a private
copy-on-write snapshot, so they match what the live store would report.

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
	Pending      int     `json:"pending_wal_records"`
	Error        string  `json:"error,omitempty"`
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
	ids := map[string]uint64{}
	for _, f := range cat.Filters {
		ids[f.Name] = f.ID
	}

	s, oerr := openSnapshot(dir)
	if oerr == nil {
		defer s.Close()
		infos, err := s.List()
		if err != nil {
			return err
		}
		for _, in := range infos {
			n := 0
			if id, ok := ids[in.Name]; ok && perr == nil {
				n = pend.of(id).records
			}
			out.Filters = append(out.Filters, lsRow{Name: in.Name, Kind: in.Kind, Items: in.Items, Capacity: in.Capacity,
				Layers: in.Layers, SizeBytes: in.SizeBytes, BitsPerItem: jfloat(in.BitsPerKey), FillRatio: jfloat(in.FillRatio),
				EstimatedFPR: jfloat(in.EstimatedFPR), State: filterState(in.State == "incomplete", n), Pending: n, fill: in.FillRatio})
		}
	} else {
		// The snapshot failed (a bad file or WAL): show what the catalog
		// alone says, marked unreadable, and report the error.
		for _, f := range cat.Filters {
			row := lsRow{Name: f.Name, Kind: f.Kind.String(), Layers: len(f.Layers), State: "unreadable",
				BitsPerItem: jfloat(math.NaN()), FillRatio: jfloat(math.NaN()), EstimatedFPR: jfloat(math.NaN()),
				fill: math.NaN(), Error: oneLine(oerr.Error())}
			for _, l := range f.Layers {
				row.Items += l.Items
				row.Capacity += l.Header.Capacity
				row.SizeBytes += l.Header.FileSize()
			}
			out.Filters = append(out.Filters, row)
		}
	}

	if e.json {
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "checkpoint LSN %d, %s after it\n\n", cat.CheckpointLSN, plural(out.Pending, "WAL record", "WAL records"))
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
	}
	switch {
	case oerr != nil:
		return fmt.Errorf("the store cannot be opened, numbers are the catalog's: %w", oerr)
	case perr != nil:
		return fmt.Errorf("reading the WAL: %w", perr)
	}
	return nil
}
