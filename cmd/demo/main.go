// Command demo is filterstore's quick-start job: it builds persistent
// filters of a few million keys in a store directory, closes the store,
// reopens it (timing the reopen), queries it, and prints throughput, the
// measured false-positive rate and bits per key.
//
//	go run ./cmd/demo                 # 5M keys in a temporary directory
//	go run ./cmd/demo -dir /tmp/fs -keys 20000000 -keep
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/filterstore/filterstore/store"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, errUsage):
		os.Exit(2) // the flag package has printed the problem and the usage
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// errUsage reports bad flags, already printed with the usage.
var errUsage = errors.New("usage")

const usageHead = `usage: go run ./cmd/demo [flags]

Bulk-loads -keys keys into a persistent Bloom filter in a store directory,
adds -durable more with durable (logged, fsynced) writes, closes the store,
reopens it and times the reopen, queries every present key and -absent
absent ones, and prints throughput, the measured false-positive rate and
bits per key.

flags:
`

type config struct {
	dir     string
	keep    bool
	keys    int
	absent  int
	durable int
	pending int
	rate    float64
}

// run runs the demo with the command-line arguments args. -h prints the
// usage to stdout and returns nil; bad flags print the problem and the
// usage to stderr and return errUsage.
func run(args []string, stdout, stderr io.Writer) error {
	var c config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr) // where Parse reports a bad flag
	fs.Usage = func() {} // printed below, to stdout for -h
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprint(w, usageHead)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.dir, "dir", "", "store directory, created if missing; one given here is never removed (default: a new temporary directory, removed afterwards unless -keep)")
	fs.BoolVar(&c.keep, "keep", false, "keep the store directory")
	fs.IntVar(&c.keys, "keys", 5_000_000, "keys bulk-loaded into the Bloom filter")
	fs.IntVar(&c.absent, "absent", 1_000_000, "absent keys queried to measure the false-positive rate")
	fs.IntVar(&c.durable, "durable", 200_000, "keys added after the bulk load with durable writes, each acknowledged once its WAL record is fsynced: half in AddMany batches of 1000, half as single Adds from 64 goroutines (group commit); 0 skips them")
	fs.Float64Var(&c.rate, "error", 0.01, "configured false-positive rate, in (0, 1)")
	fs.IntVar(&c.pending, "pending", 0, "after the report, add this many keys with one durable AddMany and exit without closing the store, as a crashed writer would: the WAL then holds one batch record of the keys that were new (try cmd/inspect on it: its PENDING column counts them); needs -dir and -keep. The filter is sized for -keys plus -durable, so room is left only by the adds that were false positives (about 1 in 100 at the default rate): more pending keys than that fail with ErrFull")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return nil
		}
		usage(stderr)
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		usage(stderr)
		return errUsage
	}
	switch {
	case c.keys < 1:
		return fmt.Errorf("-keys must be >= 1, got %d", c.keys)
	case c.absent < 1:
		return fmt.Errorf("-absent must be >= 1, got %d", c.absent)
	case c.durable < 0:
		return fmt.Errorf("-durable must be >= 0, got %d", c.durable)
	case c.pending < 0:
		return fmt.Errorf("-pending must be >= 0, got %d", c.pending)
	case c.pending > 0 && (c.dir == "" || !c.keep):
		return fmt.Errorf("-pending needs -dir and -keep: the store is left for inspection")
	case !(c.rate > 0 && c.rate < 1):
		return fmt.Errorf("-error must be in (0, 1), got %v", c.rate)
	}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "filterstore-demo-")
		if err != nil {
			return err
		}
		c.dir = d
		if !c.keep {
			defer os.RemoveAll(d)
		}
	}
	return demo(c, stdout)
}

// key returns the i-th key of a family: "present" keys are added, "absent"
// keys never are.
func key(buf []byte, family byte, i int) []byte {
	buf = append(buf[:0], "filterstore-demo-"...)
	buf = append(buf, family)
	return binary.BigEndian.AppendUint64(buf, uint64(i))
}

func demo(c config, out io.Writer) (err error) {
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	p("store directory: %s", c.dir)

	s, err := store.Open(c.dir, nil)
	if err != nil {
		return err
	}
	// One fixed layer sized for every key the demo adds, so the measured
	// rate is the configured one (a scaling chain starts tighter, at half
	// the rate, to keep its compound rate under the target as it grows).
	b, err := s.CreateBloom("demo", store.BloomConfig{Capacity: uint64(c.keys + c.durable), ErrorRate: c.rate, NonScaling: true})
	if errors.Is(err, store.ErrExists) {
		s.Close()
		return fmt.Errorf("%s already holds a filter named demo: use a fresh -dir", c.dir)
	}
	if err != nil {
		s.Close()
		return err
	}
	start := time.Now()
	err = b.Load(func(yield func([]byte, error) bool) {
		var buf []byte
		for i := 0; i < c.keys; i++ {
			buf = key(buf, 'p', i)
			if !yield(buf, nil) {
				return
			}
		}
	})
	if err != nil {
		s.Close()
		return err
	}
	loadTook := time.Since(start)
	p("bulk Load:        %d keys in %v (%.2f M keys/s, durable at its closing checkpoint)",
		c.keys, loadTook.Round(time.Millisecond), float64(c.keys)/loadTook.Seconds()/1e6)

	if c.durable > 0 {
		if err := durableWrites(s, b, c, p); err != nil {
			s.Close()
			return err
		}
	}
	if err := s.Close(); err != nil {
		return err
	}

	start = time.Now()
	s, err = store.Open(c.dir, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	b, err = s.Bloom("demo")
	if err != nil {
		return err
	}
	b.Has(key(nil, 'p', 0))
	p("reopen:           %v (Open + first lookup; nothing is loaded, pages fault in on demand)", time.Since(start).Round(time.Microsecond))
	if c.pending > 0 {
		defer func() {
			if err != nil {
				return // the report failed: no pending adds, and its error is the exit status
			}
			keys := make([][]byte, c.pending)
			for i := range keys {
				keys[i] = key(nil, 'x', i)
			}
			added, aerr := b.AddMany(keys)
			if aerr != nil {
				err = fmt.Errorf("-pending: the adds failed: %w", aerr)
				return
			}
			logged := 0
			for _, isNew := range added {
				if isNew {
					logged++
				}
			}
			// A key whose bits were all set already (a false positive)
			// is not new: nothing changes, and nothing is logged.
			p("pending:          %d keys added durably, %d of them new and logged in the WAL (%d were already \"maybe present\": no record); exited without closing the store",
				c.pending, logged, c.pending-logged)
			os.Exit(0) // no Close, no checkpoint: what a crash leaves
		}()
	}

	var buf []byte
	start = time.Now()
	for i := 0; i < c.keys; i++ {
		if buf = key(buf, 'p', i); !b.Has(buf) {
			return fmt.Errorf("false negative: present key %d reported absent", i)
		}
	}
	hitTook := time.Since(start)
	const batch = 256
	keys := make([][]byte, batch)
	for i := range keys {
		keys[i] = make([]byte, 0, 32)
	}
	fp := 0
	start = time.Now()
	for i := 0; i < c.absent; i += batch {
		n := min(batch, c.absent-i)
		for j := 0; j < n; j++ {
			keys[j] = key(keys[j], 'a', i+j)
		}
		for _, hit := range b.HasMany(keys[:n]) {
			if hit {
				fp++
			}
		}
	}
	missTook := time.Since(start)
	in, err := b.Info()
	if err != nil {
		return err
	}
	fill, err := b.Fill()
	if err != nil {
		return err
	}
	measured := float64(fp) / float64(c.absent)
	p("Has (present):    %d lookups, no false negative, %.1f ns/lookup", c.keys, float64(hitTook.Nanoseconds())/float64(c.keys))
	p("HasMany (absent): %d lookups, %.1f ns/lookup", c.absent, float64(missTook.Nanoseconds())/float64(c.absent))
	p("")
	p("filter %q: %d items, %d layer(s), %.1f MB on disk", in.Name, in.Items, in.Layers, float64(in.SizeBytes)/1e6)
	p("  bits/key:            %.2f", in.BitsPerKey)
	p("  fill ratio:          %.3f", fill.Ratio)
	p("  configured FPR:      %g", c.rate)
	p("  estimated FPR:       %.5f", in.EstimatedFPR)
	p("  measured FPR:        %.5f (%d of %d absent keys; %.2fx configured)", measured, fp, c.absent, measured/c.rate)
	return nil
}

// durableWrites adds c.durable keys with logged, fsynced writes: half in
// AddMany batches of 1000, half as single Adds from 64 goroutines, whose
// fsyncs group commit shares.
func durableWrites(s *store.Store, b *store.Bloom, c config, p func(string, ...any)) error {
	half := c.durable / 2
	start := time.Now()
	batch := make([][]byte, 0, 1000)
	for i := 0; i < half; i++ {
		batch = append(batch, key(nil, 'd', i))
		if len(batch) == cap(batch) || i == half-1 {
			if _, err := b.AddMany(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	took := time.Since(start)
	p("durable AddMany:  %d keys in batches of 1000, acknowledged after fsync: %v (%.0f keys/s)",
		half, took.Round(time.Millisecond), float64(half)/took.Seconds())

	const writers = 64
	rest := c.durable - half
	errs := make(chan error, writers)
	start = time.Now()
	for w := 0; w < writers; w++ {
		go func(w int) {
			for i := half + w; i < half+rest; i += writers {
				if _, err := b.Add(key(nil, 'd', i)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			return err
		}
	}
	took = time.Since(start)
	p("durable Add:      %d single adds from %d goroutines, each acknowledged after fsync (group commit): %v (%.0f adds/s)",
		rest, writers, took.Round(time.Millisecond), float64(rest)/took.Seconds())
	return nil
}
