package main

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
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
ones the live store would give. An incomplete filter (an interrupted bulk
Load) answers "maybe" for every key; so does a broken one (missing or
damaged files), which also makes the exit status 1.

Keys come from the arguments and from --keys FILE (one key per line,
"-" for stdin; empty lines are skipped). Use --hex for binary keys.
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
	Key    string  `json:"key"`
	Answer string  `json:"answer"` // "maybe", "no"; bitmaps "yes", "no"
	Count  *uint64 `json:"count,omitempty"`
	Note   string  `json:"note,omitempty"`
}

type checkOut struct {
	Filter  string        `json:"filter"`
	Kind    string        `json:"kind"`
	State   string        `json:"state"`
	Reason  string        `json:"reason,omitempty"` // why it is broken
	Answers []checkAnswer `json:"answers"`
}

func runCheck(e *env, args []string, o checkOpts) error {
	dir, name, keys := args[0], args[1], args[2:]
	if o.keysFile != "" {
		more, err := readKeys(o)
		if err != nil {
			return err
		}
		keys = append(keys, more...)
	}
	if len(keys) == 0 {
		return usageError("no keys: give keys as arguments or with --keys FILE")
	}
	raw := make([][]byte, len(keys))
	for i, k := range keys {
		raw[i] = []byte(k)
		if o.hex {
			b, err := hex.DecodeString(k)
			if err != nil {
				return usageError("key %d (%s) is not hex: %v", i+1, fmtKey(k), err)
			}
			raw[i] = b
		}
	}
	cat, err := readCatalog(dir)
	if err != nil {
		return err
	}
	fr, err := findFilter(dir, cat, name)
	if err != nil {
		return err
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
	in, ierr := h.info()
	broken := in.State == "broken"
	incomplete := fr.Incomplete || in.State == "incomplete"
	pending := 0
	if pend, err := scanPending(dir, cat, false); err == nil {
		pending = pend.of(fr.ID).records
	}
	out := checkOut{Filter: name, Kind: h.kind, State: filterState(broken, incomplete, pending), Answers: make([]checkAnswer, 0, len(keys))}
	for i, k := range keys {
		a := checkAnswer{Key: k, Answer: "no"}
		switch {
		case h.bitmap != nil:
			off, err := strconv.ParseUint(k, 10, 64)
			if err != nil || o.hex {
				return usageError("bitmap %s takes decimal bit offsets as keys; %s is not one", fmtKey(name), fmtKey(k))
			}
			if off >= fr.Bits {
				a.Note = fmt.Sprintf("beyond the bitmap's %d bits", fr.Bits)
			} else if broken {
				a.Answer = "maybe"
			} else if h.bitmap.Get(off) {
				a.Answer = "yes"
			}
		case broken:
			a.Answer = "maybe"
		default:
			if h.has(raw[i]) {
				a.Answer = "maybe"
			}
			if h.count != nil {
				c := h.count(raw[i])
				a.Count = &c
			}
		}
		out.Answers = append(out.Answers, a)
	}
	if broken {
		// Printed by run as the one line on stderr, with exit status 1.
		out.Reason = oneLine(scrubPath(in.Reason, dir))
		ierr = fmt.Errorf("%w; every answer is maybe", relError(ierr, dir))
	} else if incomplete {
		e.warnf("filter %s is incomplete (an interrupted bulk Load): every answer is maybe", fmtKey(name))
	}
	if e.json {
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
		return ierr
	}
	cols := []string{"KEY", "ANSWER"}
	if h.bitmap != nil {
		cols[0] = ">OFFSET"
	}
	if h.count != nil && !broken {
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
	if err := t.write(e.stdout); err != nil {
		return err
	}
	return ierr
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
