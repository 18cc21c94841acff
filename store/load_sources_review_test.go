package store

import (
	"errors"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// checkStoreClean fails t if Check reports problems.
func checkStoreClean(t *testing.T, s *Store, what string) {
	t.Helper()
	rep, err := s.Check()
	must(t, err)
	if len(rep.Problems) > 0 {
		t.Fatalf("%s: Check: %+v", what, rep.Problems)
	}
}

// TestLoadParallelGoexitSource: a source that ends its goroutine with
// runtime.Goexit (as t.FailNow, or any code that exits the goroutine)
// neither fails nor panics: the source simply stops. LoadParallel's doc
// promises every key of every source, or an incomplete filter. A plain
// Load whose source calls Goexit leaves the filter incomplete (bulk's
// defer); LoadParallel returns nil with keys missing.
func TestLoadParallelGoexitSource(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	for _, tg := range sourcesTargets(t, s, 100_000) {
		exiting := func(yield func([]byte, error) bool) {
			for i := 100_000; i < 105_000; i++ {
				if !yield(key(i), nil) {
					return
				}
			}
			runtime.Goexit() // the keys 105000.. never come
		}
		err := tg.load(rangeKeys(0, 20_000), exiting)
		in, ierr := tg.info()
		must(t, ierr)
		missing := 0 // of the 5000 keys the source did yield
		for i := 100_000; i < 105_000; i++ {
			if !tg.has(key(i)) {
				missing++
			}
		}
		t.Logf("%s: LoadParallel: err=%v state=%q items=%d", tg.kind, err, in.State, in.Items)
		if err == nil && in.State != "incomplete" {
			t.Errorf("%s: a source that exited by runtime.Goexit after 5000 keys: LoadParallel returned nil and state %q (not incomplete); even %d of the 5000 keys it did yield answer absent", tg.kind, in.State, missing)
		}
	}
}

// TestLoadParallelBitsEqualLoad: for a non-scaling Bloom filter,
// LoadParallel of many sources (some empty) sets exactly the bits of a
// Load of the same keys, on several CPU counts and batch sizes (partial
// batches, sources of one key).
func TestLoadParallelBitsEqualLoad(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		for _, nsrc := range []int{2, 3, 64, 1000} {
			t.Run(fmt.Sprintf("cpu=%d/src=%d", procs, nsrc), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
				defer s.Close()
				const n = 120_000
				one, err := s.CreateBloom("one", BloomConfig{Capacity: n, NonScaling: true})
				must(t, err)
				par, err := s.CreateBloom("par", BloomConfig{Capacity: n, NonScaling: true})
				must(t, err)
				must(t, one.Load(rangeKeys(0, n)))
				// Uneven ranges: source i gets keys [lo_i, hi_i), some empty.
				srcs := make([]iter.Seq2[[]byte, error], nsrc)
				lo := 0
				for i := range nsrc {
					hi := n * (i + 1) / nsrc
					if i%5 == 3 {
						hi = lo // empty
					}
					if i == nsrc-1 {
						hi = n
					}
					srcs[i] = rangeKeys(lo, hi)
					lo = hi
				}
				must(t, par.LoadParallel(srcs...))
				ow, pw := (*one.layers.Load())[0].Words(), (*par.layers.Load())[0].Words()
				if !slices.Equal(ow, pw) {
					diff := 0
					for i := range ow {
						if ow[i] != pw[i] {
							diff++
						}
					}
					t.Fatalf("Load and LoadParallel(%d sources) differ in %d of %d words", nsrc, diff, len(ow))
				}
				oi, _ := one.Info()
				pi, _ := par.Info()
				if d := int64(oi.Items) - int64(pi.Items); d > 200 || d < -200 { // order-dependent (keys that set a new bit)
					t.Fatalf("items: Load %d, LoadParallel %d", oi.Items, pi.Items)
				}
				checkStoreClean(t, s, "after LoadParallel")
			})
		}
	}
}

// TestLoadParallelEveryKindManySources: 64 sources into each kind,
// scaling, past several layers; every key present, Check clean, items
// sane (cuckoo and counting: exactly the number of keys).
func TestLoadParallelEveryKindManySources(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("cpu=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			dir := t.TempDir()
			s := mustOpen(t, dir, nil)
			const n = 90_000
			const nsrc = 64
			srcs := make([]iter.Seq2[[]byte, error], nsrc)
			for i := range nsrc {
				srcs[i] = rangeKeys(n*i/nsrc, n*(i+1)/nsrc)
			}
			for _, tg := range sourcesTargets(t, s, 10_000) {
				must(t, tg.load(srcs...))
				in, err := tg.info()
				must(t, err)
				if in.State != "ok" {
					t.Fatalf("%s: state %q", tg.kind, in.State)
				}
				if tg.kind != "bloom" && in.Items != n {
					t.Fatalf("%s: %d items after %d distinct keys", tg.kind, in.Items, n)
				}
				if tg.kind == "bloom" && (in.Items > n || in.Items < n*9/10) {
					t.Fatalf("%s: %d items after %d distinct keys", tg.kind, in.Items, n)
				}
				for i := range n {
					if !tg.has(key(i)) {
						t.Fatalf("%s: key %d missing", tg.kind, i)
					}
				}
			}
			checkStoreClean(t, s, "after LoadParallel")
			must(t, s.Close())
			s = mustOpen(t, dir, nil)
			defer s.Close()
			checkStoreClean(t, s, "after reopen")
		})
	}
}

// TestLoadParallelSeveralPanics: several sources panic at once; one
// of their panics comes out, no source is left running, no goroutine
// leaks, the filter is incomplete and checks clean.
func TestLoadParallelSeveralPanics(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	for _, tg := range sourcesTargets(t, s, 100_000) {
		base := runtime.NumGoroutine()
		var running atomic.Int64
		var gate sync.WaitGroup
		gate.Add(4)
		panicking := func(id int) iter.Seq2[[]byte, error] {
			return func(yield func([]byte, error) bool) {
				running.Add(1)
				defer running.Add(-1)
				for i := range 5000 {
					if !yield(key(id*1_000_000+i), nil) {
						return
					}
				}
				gate.Done()
				gate.Wait()
				panic(fmt.Sprintf("p%d", id))
			}
		}
		endless := func(yield func([]byte, error) bool) {
			running.Add(1)
			defer running.Add(-1)
			for i := 0; ; i++ {
				if !yield(key(i), nil) {
					return
				}
			}
		}
		got := func() (v any) {
			defer func() { v = recover() }()
			_ = tg.load(endless, panicking(1), panicking(2), panicking(3), panicking(4), endless)
			return nil
		}()
		if s, ok := got.(string); !ok || len(s) != 2 || s[0] != 'p' {
			t.Fatalf("%s: recovered %v", tg.kind, got)
		}
		if r := running.Load(); r != 0 {
			t.Fatalf("%s: %d sources running after the panic", tg.kind, r)
		}
		in, err := tg.info()
		must(t, err)
		if in.State != "incomplete" {
			t.Fatalf("%s: state %q", tg.kind, in.State)
		}
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if g := runtime.NumGoroutine(); g > base {
			buf := make([]byte, 1<<16)
			t.Fatalf("%s: %d goroutines, %d before:\n%s", tg.kind, g, base, buf[:runtime.Stack(buf, true)])
		}
	}
	checkStoreClean(t, s, "after panics")
}

// TestLoadParallelSourceIgnoresStop: a source that ignores yield's
// false (keeps yielding) after another failed: the runtime panics in
// that source; LoadParallel must still return the first error (not
// panic), and leave the filter incomplete.
func TestLoadParallelSourceIgnoresStop(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	errScan := errors.New("scan failed")
	for _, tg := range sourcesTargets(t, s, 100_000) {
		rude := func(yield func([]byte, error) bool) {
			for i := range 200_000 {
				yield(key(i), nil)
			}
		}
		failing := func(yield func([]byte, error) bool) {
			for i := range 3000 {
				if !yield(key(1_000_000+i), nil) {
					return
				}
			}
			yield(nil, errScan)
		}
		var err error
		got := func() (v any) {
			defer func() { v = recover() }()
			err = tg.load(rude, failing)
			return nil
		}()
		t.Logf("%s: err=%v panic=%v", tg.kind, err, got)
		in, ierr := tg.info()
		must(t, ierr)
		if in.State != "incomplete" {
			t.Fatalf("%s: state %q", tg.kind, in.State)
		}
		if got == nil && !errors.Is(err, ErrIncomplete) {
			t.Fatalf("%s: err %v", tg.kind, err)
		}
	}
}

// TestLoadParallelErrFull: non-scaling filters too small for the keys:
// ErrFull, incomplete, Check clean.
func TestLoadParallelErrFull(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 10_000, NonScaling: true})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 10_000, NonScaling: true})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 10_000, NonScaling: true})
	must(t, err)
	for _, tg := range []sourcesTarget{{"bloom", b.LoadParallel, b.Has, b.Info}, {"cuckoo", c.LoadParallel, c.Has, c.Info}, {"counting", n.LoadParallel, n.Has, n.Info}} {
		err := tg.load(rangeKeys(0, 30_000), rangeKeys(30_000, 60_000), rangeKeys(60_000, 60_000))
		if !errors.Is(err, ErrFull) || !errors.Is(err, ErrIncomplete) {
			t.Fatalf("%s: %v", tg.kind, err)
		}
		in, _ := tg.info()
		if in.State != "incomplete" {
			t.Fatalf("%s: state %q", tg.kind, in.State)
		}
	}
	checkStoreClean(t, s, "after ErrFull")
}

// TestLoadParallelSourcesUseStore: sources call Info, List, another
// filter's Add and Checkpoint while others run; background checkpoints
// and another filter's writers run beside; no deadlock, all keys, Check
// clean.
func TestLoadParallelSourcesUseStore(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	s := mustOpen(t, t.TempDir(), &Options{CheckpointEvery: 5 * time.Millisecond})
	defer s.Close()
	other, err := s.CreateBloom("other", BloomConfig{Capacity: 1_000_000})
	must(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := other.Add(key(5_000_000 + i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, tg := range sourcesTargets(t, s, 20_000) {
			const n = 40_000
			user := func(lo, hi int) iter.Seq2[[]byte, error] {
				return func(yield func([]byte, error) bool) {
					for i := lo; i < hi; i++ {
						switch i % 4096 {
						case 1:
							if _, err := s.List(); err != nil {
								yield(nil, err)
								return
							}
						case 2:
							if _, err := other.Add(key(9_000_000 + i)); err != nil {
								yield(nil, err)
								return
							}
						case 3:
							if err := s.Checkpoint(); err != nil {
								yield(nil, err)
								return
							}
						case 4:
							if _, err := other.Info(); err != nil {
								yield(nil, err)
								return
							}
						}
						if !yield(key(i), nil) {
							return
						}
					}
				}
			}
			if err := tg.load(user(0, n/4), user(n/4, n/2), user(n/2, 3*n/4), user(3*n/4, n)); err != nil {
				t.Errorf("%s: %v", tg.kind, err)
				return
			}
			for i := range n {
				if !tg.has(key(i)) {
					t.Errorf("%s: key %d missing", tg.kind, i)
					return
				}
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("deadlock:\n%s", buf[:runtime.Stack(buf, true)])
	}
	close(stop)
	wg.Wait()
	checkStoreClean(t, s, "after sources using the store")
}

// TestLoadParallelCloseDuring: Close while sources run: LoadParallel
// returns (ErrClosed / incomplete), no source keeps running, and after a
// reopen the filter is incomplete and checks clean.
func TestLoadParallelCloseDuring(t *testing.T) {
	for _, kind := range []string{"bloom", "cuckoo", "counting"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, nil)
			var tg sourcesTarget
			for _, x := range sourcesTargets(t, s, 50_000) {
				if x.kind == kind {
					tg = x
				}
			}
			var running atomic.Int64
			started := make(chan struct{}, 8)
			endless := func(off int) iter.Seq2[[]byte, error] {
				return func(yield func([]byte, error) bool) {
					running.Add(1)
					defer running.Add(-1)
					for i := 0; ; i++ {
						if i == 20_000 {
							started <- struct{}{}
						}
						if !yield(key(off+i), nil) {
							return
						}
					}
				}
			}
			res := make(chan error, 1)
			go func() { res <- tg.load(endless(0), endless(1<<30), endless(2<<30)) }()
			<-started
			cerr := s.Close()
			var err error
			select {
			case err = <-res:
			case <-time.After(30 * time.Second):
				buf := make([]byte, 1<<20)
				t.Fatalf("LoadParallel did not return after Close:\n%s", buf[:runtime.Stack(buf, true)])
			}
			t.Logf("close: %v; load: %v", cerr, err)
			if !errors.Is(err, ErrIncomplete) {
				t.Fatalf("LoadParallel after Close: %v", err)
			}
			if r := running.Load(); r != 0 {
				t.Fatalf("%d sources running", r)
			}
			s = mustOpen(t, dir, nil)
			defer s.Close()
			var in Info
			switch kind {
			case "bloom":
				f, _ := s.Bloom("b")
				in, _ = f.Info()
			case "cuckoo":
				f, _ := s.Cuckoo("c")
				in, _ = f.Info()
			case "counting":
				f, _ := s.Counting("n")
				in, _ = f.Info()
			}
			if in.State != "incomplete" {
				t.Fatalf("state after reopen %q", in.State)
			}
			checkStoreClean(t, s, "after reopen")
		})
	}
}

// TestLoadParallelDropRenameDuring: Drop and Rename (to a new name) of
// the filter while its sources run: no hang, and the result is
// consistent (either the load failed or the filter is complete).
func TestLoadParallelDropRenameDuring(t *testing.T) {
	for _, op := range []string{"drop", "rename"} {
		t.Run(op, func(t *testing.T) {
			s := mustOpen(t, t.TempDir(), nil)
			defer s.Close()
			tgs := sourcesTargets(t, s, 50_000)
			names := map[string]string{"bloom": "b", "cuckoo": "c", "counting": "n"}
			for _, tg := range tgs {
				started := make(chan struct{}, 8)
				src := func(off int) iter.Seq2[[]byte, error] {
					return func(yield func([]byte, error) bool) {
						for i := range 60_000 {
							if i == 20_000 {
								started <- struct{}{}
							}
							if !yield(key(off+i), nil) {
								return
							}
						}
					}
				}
				res := make(chan error, 1)
				go func() { res <- tg.load(src(0), src(1<<30)) }()
				<-started
				var oerr error
				if op == "drop" {
					oerr = s.Drop(names[tg.kind])
				} else {
					oerr = s.Rename(names[tg.kind], names[tg.kind]+"2")
				}
				var err error
				select {
				case err = <-res:
				case <-time.After(30 * time.Second):
					buf := make([]byte, 1<<20)
					t.Fatalf("hang:\n%s", buf[:runtime.Stack(buf, true)])
				}
				t.Logf("%s: %s: %v; load: %v", tg.kind, op, oerr, err)
				if err == nil && op == "rename" {
					for i := range 60_000 {
						if !tg.has(key(i)) || !tg.has(key(1<<30+i)) {
							t.Fatalf("%s: key %d missing after a nil LoadParallel", tg.kind, i)
						}
					}
				}
			}
			checkStoreClean(t, s, "after "+op)
		})
	}
}
