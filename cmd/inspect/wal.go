package main

import (
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
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
be replayed by the next writer Open.

Segments are read with wal.Scan, the reader recovery and read-only opens
use, so they are checked exactly as recovery checks them; anything wrong
is listed with its file and offset, and the exit status is 1. VERSION is
the segment header's format: 1 (24 bytes) or 2 (32 bytes, with the id of
the store that wrote it, checked against the catalog's).

With --dump, print every record instead, one per line:

  lsn=N seg=FILE off=OFFSET filter=NAME id=ID layer=L op=hash hash=0x... [pending]
  lsn=N seg=FILE off=OFFSET filter=NAME id=ID layer=L op=words delta=+1 writes=2 [IDX]=0xVALUE ... [pending]

"pending" marks records after their filter's checkpoint; filter=- names
an id the catalog no longer holds (a dropped filter). With --json --dump,
one JSON object per line.

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
	LastLSN  uint64 `json:"last_lsn"`
	Records  int    `json:"records"`
	Bytes    int64  `json:"bytes"`
	Tail     string `json:"tail"`
}

type walFilterJSON struct {
	Name            string `json:"name"`
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
	Pending       int             `json:"after_checkpoint"`
	Findings      []finding       `json:"findings"`
}

type walDumpJSON struct {
	LSN     uint64   `json:"lsn"`
	Segment string   `json:"segment"`
	Offset  int64    `json:"offset"`
	Filter  string   `json:"filter"`
	ID      uint64   `json:"id"`
	Layer   int      `json:"layer"`
	Op      string   `json:"op"`
	Hash    *string  `json:"hash,omitempty"`
	Delta   *int     `json:"delta,omitempty"`
	Writes  []string `json:"writes,omitempty"`
	Pending bool     `json:"pending"`
	Error   string   `json:"error,omitempty"`
}

func runWal(e *env, args []string, dump bool) error {
	dir := args[0]
	fnd := newFindings(10)
	cat, err := readCatalog(dir)
	catOK := err == nil
	if err != nil {
		if !errors.Is(err, store.ErrCorrupt) {
			return err
		}
		fnd.addFinding("catalog", problem(format.CatalogName, -1, "%s (filter names and the checkpoint are unknown)", scrubPath(err.Error(), dir)))
		cat = &catalog.Snapshot{}
	}
	byID := filtersByID(cat)
	nameOf := func(id uint64) string {
		if f := byID[id]; f != nil {
			return f.Name
		}
		return "-"
	}
	type key struct {
		id uint64
		op format.WALOp
	}
	counts := map[key]*walFilterJSON{}
	out := walOut{CheckpointLSN: cat.CheckpointLSN, Segments: []walSegJSON{}, Filters: []walFilterJSON{}}
	var werr error
	visit := func(rel string, at wal.Position, payload []byte) {
		off, lsn := at.Offset, at.LSN
		out.Records++
		r, err := format.DecodeWALRecord(payload)
		pending := lsn > cat.CheckpointLSN
		if err == nil {
			pending = lsn > syncedLSN(cat, byID, r.FilterID)
		}
		if pending {
			out.Pending++
		}
		if err != nil {
			fnd.addFinding("decode", problem(rel, off, "record LSN %d does not decode: %v", lsn, err))
		} else {
			c := counts[key{r.FilterID, r.Op}]
			if c == nil {
				c = &walFilterJSON{Name: nameOf(r.FilterID), ID: r.FilterID, Op: r.Op.String()}
				counts[key{r.FilterID, r.Op}] = c
			}
			c.Records++
			c.WordWrites += len(r.Writes)
			if pending {
				c.AfterCheckpoint++
			}
		}
		if !dump || werr != nil {
			return
		}
		if e.json {
			d := walDumpJSON{LSN: lsn, Segment: rel, Offset: off, Pending: pending}
			if err != nil {
				d.Error = oneLine(err.Error())
			} else {
				d.Filter, d.ID, d.Layer, d.Op = nameOf(r.FilterID), r.FilterID, r.Layer, r.Op.String()
				if r.Op == format.WALOpHash {
					h := fmt.Sprintf("%#016x", r.Hash)
					d.Hash = &h
				} else {
					delta := int(r.Delta)
					d.Delta = &delta
					d.Writes = make([]string, 0, len(r.Writes))
					for _, w := range r.Writes {
						d.Writes = append(d.Writes, fmt.Sprintf("[%d]=%#016x", w.Index, w.Value))
					}
				}
			}
			werr = writeJSONLine(e.stdout, d)
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "lsn=%d seg=%s off=%d", lsn, at.Segment, off)
		if err != nil {
			fmt.Fprintf(&b, " error=%q", oneLine(err.Error()))
		} else {
			fmt.Fprintf(&b, " filter=%s id=%d layer=%d op=%s", dumpName(nameOf(r.FilterID)), r.FilterID, r.Layer, r.Op)
			if r.Op == format.WALOpHash {
				fmt.Fprintf(&b, " hash=%#016x", r.Hash)
			} else {
				fmt.Fprintf(&b, " delta=%+d writes=%d", r.Delta, len(r.Writes))
				for _, w := range r.Writes {
					fmt.Fprintf(&b, " [%d]=%#016x", w.Index, w.Value)
				}
			}
		}
		if pending {
			b.WriteString(" pending")
		}
		b.WriteByte('\n')
		_, werr = fmt.Fprint(e.stdout, b.String())
	}
	res, err := scanWALAll(dir, cat.StoreID, nil, fnd, visit)
	if err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	corrupt := map[string]bool{}
	for _, p := range res.Problems {
		corrupt[p.Segment] = true
	}
	all := fnd.all()
	out.Findings = all
	if out.Findings == nil {
		out.Findings = []finding{}
	}
	for _, s := range res.Segments {
		if s.Vanished {
			continue
		}
		tail := "clean"
		switch {
		case corrupt[s.Name]:
			tail = "corrupt"
		case s.Tail != nil:
			tail = fmt.Sprintf("torn at %d", s.Tail.Offset)
		}
		out.Segments = append(out.Segments, walSegJSON{File: walRel(dir, s.Name), Version: s.Header.Version, StoreID: s.Header.StoreID,
			FirstLSN: s.FirstLSN, LastLSN: s.Last, Records: s.Records, Bytes: s.Size, Tail: tail})
	}
	for _, c := range counts {
		out.Filters = append(out.Filters, *c)
	}
	sort.Slice(out.Filters, func(i, j int) bool {
		a, b := out.Filters[i], out.Filters[j]
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.Op < b.Op
	})

	problems := fnd.count(sevProblem)
	switch {
	case dump:
		for _, f := range all {
			fmt.Fprintf(e.stderr, "inspect wal: %s\n", f)
		}
	case e.json:
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	default:
		w := e.stdout
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
			ft.add(fmtKey(c.Name), fmt.Sprint(c.ID), c.Op, fmt.Sprint(c.Records), fmt.Sprint(c.WordWrites), fmt.Sprint(c.AfterCheckpoint))
		}
		ft.write(w)
		fmt.Fprintf(w, "\n%s in %s, %d after the checkpoint\n", plural(out.Records, "record", "records"),
			plural(len(out.Segments), "segment", "segments"), out.Pending)
		for _, f := range all {
			fmt.Fprintln(w, f)
		}
	}
	if problems > 0 {
		if dump {
			return errProblems // each one printed on stderr above
		}
		return problemsError(problems, "in the WAL", all)
	}
	return nil
}

// dumpName makes a filter name safe for a key=value line.
func dumpName(n string) string {
	if strings.ContainsAny(n, " =\"\t\n") {
		return fmt.Sprintf("%q", n)
	}
	return n
}
