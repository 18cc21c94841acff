// Command compare runs filterstore's filters and peer Go filter libraries in
// one process, interleaved round-robin across rounds (the order rotates each
// round, so drift over the run spreads over every library), and prints a
// markdown table of the median and min–max of the rounds.
//
//	go run ./cmd/compare -n 1e6,1e7 -rounds 3 -out results.md
//
// Every library is configured for the same target (-fpr, n keys) where it
// can be; keys are random 16-byte strings from a seeded generator (the seed
// is printed). Only one library's filter is alive at a time.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/filterstore/filterstore/bench"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// errListed ends a run that only listed the libraries.
var errListed = errors.New("listed")

// options are the command's flags.
type options struct {
	ns       []uint64
	rounds   int
	fpr      float64
	seed     uint64
	libs     []bench.Lib
	lookups  uint64
	cold     bool
	coldKeys int
	tmp      string
	out      string

	counters bool // count hardware events (counters.go)

	pairs      bool // the pairs mode (pairs.go) instead of the table
	pairRounds int
	pairChunk  int
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nFlag := fs.String("n", "1e6,1e7", "comma-separated key counts (1e6 notation allowed)")
	rounds := fs.Int("rounds", 3, "rounds; the library order rotates each round")
	fpr := fs.Float64("fpr", 0.01, "target false-positive rate")
	seed := fs.Uint64("seed", 0, "key generator seed; 0 picks one from the clock (printed)")
	libs := fs.String("libs", "", "comma-separated libraries to run (default all; none: only the cold store jobs; see -list)")
	list := fs.Bool("list", false, "list the libraries and exit")
	lookups := fs.String("lookups", "2e6", "lookups timed per pass (hits and misses each): min(n, this)")
	cold := fs.Bool("cold", true, "run the store's load / cold reopen / evicted-lookup jobs")
	coldKeys := fs.Int("coldkeys", 10000, "lookups timed after a cold reopen")
	tmp := fs.String("tmp", os.TempDir(), "directory for the stores' files (a real disk, not tmpfs, for the cold jobs)")
	out := fs.String("out", "", "write the table to this file instead of stdout")
	ctrs := fs.Bool("counters", false, "count hardware events (cycles, instructions, cache and TLB misses) per operation of the timed passes, on the calling thread (Linux perf_event_open; events the kernel does not count are named and left out)")
	pairs := fs.Bool("pairs", false, "instead of the round-robin table: build every -libs library at once, plus a second instance of the first (a control), and compare single lookups pair by pair, ABBA-interleaved (no cold jobs)")
	pairRounds := fs.Int("pairs.rounds", 20, "-pairs: ABBA rounds per pair and kind (hit, miss)")
	pairChunk := fs.Int("pairs.chunk", 300000, "-pairs: lookups per timed chunk (at most a quarter of -lookups)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *list {
		for _, l := range bench.Libs() {
			fmt.Fprintf(stderr, "%-16s %s\n", l.Name, l.Note)
		}
		return nil, errListed
	}
	o := &options{rounds: *rounds, fpr: *fpr, seed: *seed, cold: *cold, coldKeys: *coldKeys, tmp: *tmp, out: *out,
		counters: *ctrs, pairs: *pairs, pairRounds: *pairRounds, pairChunk: *pairChunk}
	var errs []string
	for s := range strings.SplitSeq(*nFlag, ",") {
		n, err := parseCount(s)
		if err != nil || n == 0 {
			errs = append(errs, fmt.Sprintf("-n: bad count %q", s))
			continue
		}
		o.ns = append(o.ns, n)
	}
	l, err := parseCount(*lookups)
	if err != nil || l == 0 {
		errs = append(errs, fmt.Sprintf("-lookups: bad count %q", *lookups))
	}
	o.lookups = l
	if o.rounds < 1 {
		errs = append(errs, "-rounds must be at least 1")
	}
	if !(o.fpr > 0 && o.fpr < 1) {
		errs = append(errs, "-fpr must be in (0, 1)")
	}
	if o.coldKeys < 1 {
		errs = append(errs, "-coldkeys must be at least 1")
	}
	switch *libs {
	case "":
		o.libs = bench.Libs()
	case "none":
	default:
		for name := range strings.SplitSeq(*libs, ",") {
			lib, err := bench.LibByName(strings.TrimSpace(name))
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			o.libs = append(o.libs, lib)
		}
	}
	if o.pairs && (len(o.libs) == 0 || o.pairRounds < 1 || o.pairChunk < 1) {
		errs = append(errs, "-pairs needs libraries in -libs, -pairs.rounds >= 1 and -pairs.chunk >= 1")
	}
	if len(o.libs) == 0 && !o.cold {
		errs = append(errs, "nothing to run: no library and -cold=false")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	return o, nil
}

// parseCount parses "1000000", "1e6" or "1_000_000".
func parseCount(s string) (uint64, error) {
	s = strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1e12 || f != float64(uint64(f)) {
		return 0, fmt.Errorf("bad count %q", s)
	}
	return uint64(f), nil
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, errListed) || errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	cmdline := strings.Join(append([]string{"compare"}, args...), " ")
	mach := machine()
	type done struct {
		n   uint64
		res *sizeResult
	}
	var sizes []done
	if o.pairs {
		r := &report{opts: o, cmdline: cmdline}
		r.header(mach)
		for _, n := range o.ns {
			sec, err := runPairs(o, n, stderr)
			if err != nil {
				return err
			}
			r.b.WriteString(sec)
			if o.out != "" {
				if err := os.WriteFile(o.out, []byte(r.String()), 0o644); err != nil {
					return err
				}
			}
		}
		if o.out != "" {
			return nil
		}
		_, err = io.WriteString(stdout, r.String())
		return err
	}
	render := func(cur *done) string {
		r := &report{opts: o, cmdline: cmdline}
		r.header(mach)
		for _, d := range sizes {
			r.size(d.n, d.res)
		}
		if cur != nil {
			r.b.WriteString("\n(run in progress: the section below holds the jobs finished so far)\n")
			r.size(cur.n, cur.res)
		}
		return r.String()
	}
	for _, n := range o.ns {
		// With -out, the file is rewritten after every job, so that a run
		// cut short leaves what it measured.
		progress := func(res *sizeResult) {
			if o.out != "" {
				os.WriteFile(o.out, []byte(render(&done{n, res})), 0o644)
			}
		}
		res, err := runSize(o, n, stderr, progress)
		if err != nil {
			return err
		}
		sizes = append(sizes, done{n, res})
	}
	if o.out != "" {
		return os.WriteFile(o.out, []byte(render(nil)), 0o644)
	}
	_, err = io.WriteString(stdout, render(nil))
	return err
}
