package main

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/filterstore/filterstore/store"
)

var checkCmd = &command{
	name:    "check",
	args:    "DIR NAME [KEY...]",
	short:   "membership answers (maybe / no) without writing anything",
	minArgs: 2, maxArgs: -1,
	long: `Answer, for each KEY, whether the filter NAME of the store in DIR may
hold it ("maybe") or certainly does not ("no"). Cuckoo and counting filters
also print the count (copies of the fingerprint; the smallest counter). A
bitmap takes decimal bit offsets as keys and answers "yes" or "no", which
are exact.

Nothing is written: the store is opened read-only, as a second process
would open it (filter files mapped read-only, the WAL records after each
filter's checkpoint kept in memory beside them), so the answers are the
ones the live store would give. Only the catalog, the layer files' header
pages, the WAL after the checkpoint and the pages the keys' lookups touch
are read: check costs the same on a filter of any size.

The filter's state (ok, incomplete, needs recovery, broken) is in the
JSON output with its pending WAL records. An incomplete filter (an
interrupted bulk Load) answers "maybe" for every key; so does a broken
one (a layer file missing, or its header damaged or not the catalog's),
which also makes the exit status 1 (2 if a layer file cannot be read).

Keys come from the arguments and from --keys FILE (one key per line,
"-" for stdin; empty lines are skipped). Use --hex for binary keys. In
JSON, a key that is not valid UTF-8 comes with its bytes in "key_hex"
too ("key" then holds U+FFFD for each invalid byte).
Put "--" before keys that start with "-".

Examples:

  inspect check /tmp/fsdemo demo alice bob
  inspect check --keys keys.txt /tmp/fsdemo demo
  inspect check --hex /tmp/fsdemo demo 66696c74657273746f72652d64656d6f2d700000000000000000`,
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		var o checkOpts
		fs.StringVar(&o.keysFile, "keys", "", "read keys from `FILE`, one per line (\"-\": stdin)")
		fs.BoolVar(&o.hex, "hex", false, "keys are hex-encoded bytes")
		return func(e *env, args []string) error { return runCheck(e, args, o) }
	},
}

type checkOpts struct {
	keysFile string
	hex      bool
}

type checkAnswer struct {
	Key string `json:"key"`
	// KeyHex is the key's bytes in hex when they are not valid UTF-8,
	// which JSON cannot carry ("key" then holds U+FFFD for each bad byte).
	KeyHex string  `json:"key_hex,omitempty"`
	Answer string  `json:"answer"` // "maybe", "no"; bitmaps "yes", "no"
	Count  *uint64 `json:"count,omitempty"`
	Note   string  `json:"note,omitempty"`
}

type checkOut struct {
	Filter  string        `json:"filter"`
	Kind    string        `json:"kind"`
	State   string        `json:"state"` // ok, incomplete, needs recovery, broken
	Pending int           `json:"pending_wal_records"`
	Reason  string        `json:"reason,omitempty"` // why it is broken
	Answers []checkAnswer `json:"answers"`
}

func runCheck(e *env, args []string, o checkOpts) error {
	dir, name := args[0], args[1]
	keys, raw, err := checkKeys(args[2:], o)
	if err != nil {
		return err
	}
	cat, err := readCatalog(dir)
	if err != nil {
		return err
	}
	fr, err := findFilter(dir, cat, name)
	if err != nil {
		return err
	}
	// The state from the catalog, the header pages and the WAL tail; no
	// data is read but the pages the lookups touch (never the store's
	// Fill, which reads every data word).
	reason, cause := layersBroken(dir, fr)
	pending, loading := 0, false
	if pend, err := scanPending(dir, cat, false); err == nil {
		pf := pend.of(fr.ID)
		pending, loading = pf.records, pf.loadLSN != 0
	}
	s, err := openStore(dir)
	if err != nil {
		return fmt.Errorf("the store cannot be opened: %w", relError(err, dir))
	}
	defer s.Close()
	h, err := lookupHandle(s, name)
	if err != nil {
		return err
	}
	if reason == "" {
		// Broken by what the store's open finds beyond the headers (a
		// layer file newer than the WAL, say): its answers are "maybe",
		// as ls and info report it.
		if in, err := h.info(); err != nil && in.State == stateBroken {
			reason = oneLine(scrubPath(in.Reason, dir))
		}
	}
	out := checkOut{Filter: name, Kind: h.kind, State: filterState(reason != "", fr.Incomplete || loading, pending),
		Pending: pending, Reason: reason}
	if out.Answers, err = checkAnswers(h, fr, keys, raw, o.hex, reason != ""); err != nil {
		return err
	}
	var cerr error
	switch out.State {
	case stateBroken:
		// Printed by run as the one line on stderr, with exit status 1,
		// or 2 if a layer file could not be read.
		cerr = fmt.Errorf("%s: %w; every answer is maybe", reason, store.ErrCorrupt)
		if unreadable(cause) {
			cerr = &cmdError{code: exitUsage, err: fmt.Errorf("%s; every answer is maybe", reason)}
		}
	case stateIncomplete:
		e.warnf("filter %s is incomplete (an interrupted bulk Load, or a skipped external op): every answer is maybe", fmtKey(name))
	}
	if e.json {
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
		return cerr
	}
	if err := printCheck(e.stdout, h, out); err != nil {
		return err
	}
	return cerr
}

// checkKeys gathers the keys from the arguments and --keys, and decodes
// them (--hex) into raw.
func checkKeys(keys []string, o checkOpts) ([]string, [][]byte, error) {
	if o.keysFile != "" {
		more, err := readKeys(o)
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, more...)
	}
	if len(keys) == 0 {
		return nil, nil, usageError("no keys: give keys as arguments or with --keys FILE")
	}
	raw := make([][]byte, len(keys))
	for i, k := range keys {
		raw[i] = []byte(k)
		if o.hex {
			b, err := hex.DecodeString(k)
			if err != nil {
				return nil, nil, usageError("key %d (%s) is not hex: %v", i+1, fmtKey(k), err)
			}
			raw[i] = b
		}
	}
	return keys, raw, nil
}

// layersBroken checks what the store checks when it opens a filter: every
// layer file exists, its header decodes (magic, version, CRC-32C), the
// file has the size the header implies, the header is the one the catalog
// expects and its geometry is valid. It reads only the header pages, and
// returns why the filter is broken, or "", and the error opening the
// layer file, if that is why.
func layersBroken(dir string, f *filterRecord) (string, error) {
	for i, l := range f.Layers {
		rel := relPath(dir, l.Path)
		h, err := readLayerHeader(l.Path)
		if err != nil {
			cause := strings.TrimPrefix(scrubPath(err.Error(), dir), rel+": ")
			return fmt.Sprintf("filter %s is broken: layer %d file %s: %s", fmtKey(f.Name), i, rel, oneLine(cause)), err
		}
		if d := headerDiff(h, l.Header); len(d) > 0 {
			return fmt.Sprintf("filter %s is broken: layer %d file %s: header field %s (offset %d): %s",
				fmtKey(f.Name), i, rel, d[0].name, d[0].off, d[0].value), nil
		}
		if _, err := geometryOf(h); err != nil {
			return fmt.Sprintf("filter %s is broken: layer %d file %s: the header's geometry is invalid: %v", fmtKey(f.Name), i, rel, err), nil
		}
	}
	return "", nil
}

// checkAnswers looks each key up through h: the pages its lookup touches,
// and the store's in-memory WAL overlay. A broken filter answers maybe.
func checkAnswers(h *filterHandle, fr *filterRecord, keys []string, raw [][]byte, isHex, broken bool) ([]checkAnswer, error) {
	out := make([]checkAnswer, 0, len(keys))
	for i, k := range keys {
		a := checkAnswer{Key: k, Answer: "no"}
		if !utf8.ValidString(k) {
			a.KeyHex = hex.EncodeToString([]byte(k))
		}
		switch {
		case h.bitmap != nil:
			off, err := strconv.ParseUint(k, 10, 64)
			if err != nil || isHex {
				return nil, usageError("bitmap %s takes decimal bit offsets as keys; %s is not one", fmtKey(fr.Name), fmtKey(k))
			}
			switch {
			case off >= fr.Bits:
				a.Note = fmt.Sprintf("beyond the bitmap's %d bits", fr.Bits)
			case broken:
				a.Answer = "maybe"
			case h.bitmap.Get(off):
				a.Answer = "yes"
			}
		case broken:
			a.Answer = "maybe"
		default:
			if h.has(raw[i]) {
				a.Answer = "maybe"
			}
			// A count the store does not know (an incomplete filter:
			// math.MaxUint64) is left out, as a broken filter's is.
			if h.count != nil {
				if c := h.count(raw[i]); c != math.MaxUint64 {
					a.Count = &c
				}
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// printCheck writes the answers as a table.
func printCheck(w io.Writer, h *filterHandle, out checkOut) error {
	cols := []string{"KEY", "ANSWER"}
	if h.bitmap != nil {
		cols[0] = ">OFFSET"
	}
	if h.count != nil && out.State != stateBroken && out.State != stateIncomplete {
		cols = append(cols, ">COUNT")
	}
	if h.bitmap != nil {
		cols = append(cols, "NOTE")
	}
	t := newTable(cols...)
	for _, a := range out.Answers {
		row := []string{fmtKey(a.Key), a.Answer}
		if a.Count != nil {
			row = append(row, fmt.Sprint(*a.Count))
		}
		if h.bitmap != nil {
			row = append(row, a.Note)
		}
		t.add(row...)
	}
	return t.write(w)
}

// stdin is where --keys - reads; tests replace it.
var stdin io.Reader = os.Stdin

// readKeys reads one key per line from the --keys file or stdin.
func readKeys(o checkOpts) ([]string, error) {
	var r io.Reader
	if o.keysFile == "-" {
		r = stdin
	} else {
		f, err := os.Open(o.keysFile)
		if err != nil {
			return nil, fmt.Errorf("--keys: %w", err)
		}
		defer f.Close()
		r = f
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var keys []string
	for line := 1; sc.Scan(); line++ {
		k := strings.TrimSuffix(sc.Text(), "\r")
		if k != "" {
			keys = append(keys, k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--keys %s: %w", o.keysFile, err)
	}
	return keys, nil
}
