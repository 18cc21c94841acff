package store

import (
	"errors"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// loaders are the three kinds' LoadParallel, Has and Info, by name.
type sourcesTarget struct {
	kind string
	load func(...iter.Seq2[[]byte, error]) error
	has  func([]byte) bool
	info func() (Info, error)
}

func sourcesTargets(t *testing.T, s *Store, capacity uint64) []sourcesTarget {
	t.Helper()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: capacity})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: capacity})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: capacity})
	must(t, err)
	return []sourcesTarget{
		{"bloom", b.LoadParallel, b.Has, b.Info},
		{"cuckoo", c.LoadParallel, c.Has, c.Info},
		{"counting", n.LoadParallel, n.Has, n.Info},
	}
}

// TestLoadParallelFindsEveryKey: four sources of disjoint key ranges
// (one empty) load every key into each kind, past the first layer of the
// scalable ones, on 1, 2 and 8 CPUs; the filters are complete, reopen
// with every key, and check clean.
func TestLoadParallelFindsEveryKey(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("cpu=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			dir := t.TempDir()
			s := mustOpen(t, dir, nil)
			const n = 60_000
			srcs := []iter.Seq2[[]byte, error]{rangeKeys(0, 25_000), rangeKeys(25_000, 25_000), rangeKeys(25_000, 50_000), rangeKeys(50_000, n)}
			for _, tg := range sourcesTargets(t, s, 20_000) {
				must(t, tg.load(srcs...))
				in, err := tg.info()
				must(t, err)
				if in.State != "" && in.State != "ok" {
					t.Fatalf("%s: state %q after LoadParallel", tg.kind, in.State)
				}
				if tg.kind != "counting" && in.Layers < 2 { // a counting filter has one layer
					t.Fatalf("%s: %d keys into capacity 20000 made %d layers", tg.kind, n, in.Layers)
				}
				for i := range n {
					if !tg.has(key(i)) {
						t.Fatalf("%s: key %d missing after LoadParallel", tg.kind, i)
					}
				}
			}
			must(t, s.Close())
			s = mustOpen(t, dir, nil)
			defer s.Close()
			b, _ := s.Bloom("b")
			c, _ := s.Cuckoo("c")
			cn, _ := s.Counting("n")
			for i := range n {
				if !b.Has(key(i)) || !c.Has(key(i)) || !cn.Has(key(i)) {
					t.Fatalf("key %d missing after reopening (bloom %v cuckoo %v counting %v)", i, b.Has(key(i)), c.Has(key(i)), cn.Has(key(i)))
				}
			}
			rep, err := s.Check()
			must(t, err)
			if len(rep.Problems) > 0 {
				t.Fatalf("Check after LoadParallel: %+v", rep)
			}
		})
	}
}

// TestLoadParallelSourceFails: a source that fails stops the others at
// their next key; the error names the source and wraps its error and
// ErrIncomplete; the filter is incomplete.
func TestLoadParallelSourceFails(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	errScan := errors.New("scan failed")
	for _, tg := range sourcesTargets(t, s, 100_000) {
		var yielded atomic.Int64
		endless := func(yield func([]byte, error) bool) {
			for i := 0; ; i++ {
				yielded.Add(1)
				if !yield(key(i), nil) {
					return
				}
			}
		}
		failing := func(yield func([]byte, error) bool) {
			for i := range 5000 {
				if !yield(key(1_000_000+i), nil) {
					return
				}
			}
			yield(nil, errScan)
		}
		err := tg.load(endless, failing, endless)
		if !errors.Is(err, errScan) || !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "source 1 failed after 5000 keys") {
			t.Fatalf("%s: LoadParallel with a failing source: %v, want source 1's error and ErrIncomplete", tg.kind, err)
		}
		in, err := tg.info()
		must(t, err)
		if in.State != "incomplete" {
			t.Fatalf("%s: state %q after a failed LoadParallel, want incomplete", tg.kind, in.State)
		}
		if !tg.has(key(1 << 40)) {
			t.Fatalf("%s: an incomplete filter answered absent", tg.kind)
		}
		t.Logf("%s: the endless sources yielded %d keys", tg.kind, yielded.Load())
	}
}

// TestLoadParallelSourcePanics: a source's panic comes out of
// LoadParallel on the calling goroutine once every source has stopped,
// and the filter is incomplete.
func TestLoadParallelSourcePanics(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	for _, tg := range sourcesTargets(t, s, 100_000) {
		var running atomic.Int64
		endless := func(yield func([]byte, error) bool) {
			running.Add(1)
			defer running.Add(-1)
			for i := 0; ; i++ {
				if !yield(key(i), nil) {
					return
				}
			}
		}
		panicking := func(yield func([]byte, error) bool) {
			for i := range 3000 {
				if !yield(key(1_000_000+i), nil) {
					return
				}
			}
			panic("source broke")
		}
		got := func() (v any) {
			defer func() { v = recover() }()
			_ = tg.load(endless, panicking)
			return nil
		}()
		if got != "source broke" {
			t.Fatalf("%s: LoadParallel with a panicking source: recovered %v, want its panic", tg.kind, got)
		}
		if r := running.Load(); r != 0 {
			t.Fatalf("%s: %d sources still running after LoadParallel panicked", tg.kind, r)
		}
		in, err := tg.info()
		must(t, err)
		if in.State != "incomplete" {
			t.Fatalf("%s: state %q after a panicking source, want incomplete", tg.kind, in.State)
		}
	}
}

// TestLoadParallelBadSources: no source, or a nil one, is ErrInvalid and
// changes nothing.
func TestLoadParallelBadSources(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	for _, tg := range sourcesTargets(t, s, 1000) {
		if err := tg.load(); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: LoadParallel(): %v, want ErrInvalid", tg.kind, err)
		}
		if err := tg.load(rangeKeys(0, 10), nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "source 1 is nil") {
			t.Fatalf("%s: LoadParallel with a nil source: %v, want ErrInvalid naming it", tg.kind, err)
		}
		in, err := tg.info()
		must(t, err)
		if in.State != "" && in.State != "ok" {
			t.Fatalf("%s: state %q after refused LoadParallel calls", tg.kind, in.State)
		}
		if tg.has(key(3)) {
			t.Fatalf("%s: a refused LoadParallel added keys", tg.kind)
		}
	}
}

// parallelLoadTargets are loadTargets whose Load is a LoadParallel of the
// crash test's pausing source and a second one.
var parallelLoadTargets = []loadTarget{
	{"bloom-parallel", func(s *Store) (loadFunc, error) {
		f, err := s.CreateBloom("bulk", BloomConfig{Capacity: 100_000})
		if err != nil {
			return nil, err
		}
		return func(keys iter.Seq2[[]byte, error]) error { return f.LoadParallel(keys, rangeKeys(200_000, 230_000)) }, nil
	}, loadTargets[0].open, 0, 0},
	{"cuckoo-parallel", func(s *Store) (loadFunc, error) {
		f, err := s.CreateCuckoo("bulk", CuckooConfig{Capacity: 100_000})
		if err != nil {
			return nil, err
		}
		return func(keys iter.Seq2[[]byte, error]) error { return f.LoadParallel(keys, rangeKeys(200_000, 230_000)) }, nil
	}, loadTargets[1].open, 0, 0},
	{"counting-parallel", func(s *Store) (loadFunc, error) {
		f, err := s.CreateCounting("bulk", BloomConfig{Capacity: 100_000})
		if err != nil {
			return nil, err
		}
		return func(keys iter.Seq2[[]byte, error]) error { return f.LoadParallel(keys, rangeKeys(200_000, 230_000)) }, nil
	}, loadTargets[3].open, 0, 0},
}

// TestSimulatedPowerLossDuringLoadParallel: a power loss while one of a
// LoadParallel's sources pauses leaves the filter incomplete, as for
// Load (powerLossDuringLoad).
func TestSimulatedPowerLossDuringLoadParallel(t *testing.T) {
	for _, tg := range parallelLoadTargets {
		t.Run(tg.kind, func(t *testing.T) { powerLossDuringLoad(t, tg) })
	}
}
