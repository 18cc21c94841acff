package store

import (
	"errors"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/testseed"
)

// wantRawKeys makes every Load of s fail t unless its batches keep the
// keys for a builder to hash exactly when raw says (loadRawKeys), and
// fails t at its end if no Load ran.
func wantRawKeys(t *testing.T, s *Store, raw bool) {
	t.Helper()
	loads := 0
	s.hooks.bulkRawKeys = func(got bool) {
		loads++
		if got != raw {
			t.Errorf("a Load on %d CPUs kept raw keys %v, want %v", runtime.GOMAXPROCS(0), got, raw)
		}
	}
	t.Cleanup(func() {
		if loads == 0 {
			t.Errorf("no Load ran")
		}
	})
}

// sameBloom fails t unless a and b have the same layers, word for word,
// and the same count in each.
func sameBloom(t *testing.T, what string, a, b *Bloom) {
	t.Helper()
	la, lb := *a.layers.Load(), *b.layers.Load()
	if len(la) != len(lb) {
		t.Fatalf("%s: %d layers, want %d", what, len(la), len(lb))
	}
	for i := range la {
		wa, wb := la[i].Words(), lb[i].Words()
		if !slices.Equal(wa, wb) {
			diff := 0
			for j := range wa {
				if wa[j] != wb[j] {
					diff++
				}
			}
			t.Fatalf("%s: layer %d differs from AddMany's in %d of %d words", what, i, diff, len(wa))
		}
		if ca, cb := la[i].Count(), lb[i].Count(); ca != cb {
			t.Fatalf("%s: layer %d counts %d items, AddMany %d", what, i, ca, cb)
		}
	}
}

// TestBloomLoadBuild: a Bloom Load that builds layers in private memory
// and ORs them into the mapped ones sets exactly the words, and counts
// exactly the items, of AddMany of the same keys, in order: into a fresh
// filter, into one already holding keys (the build ORs onto them and
// counts a key new only if neither has its bits), into a scalable filter
// grown over several layers, and with keys repeated at random (each
// counted once), on 1, 2, 4 and 8 CPUs (8: the builder hashes the keys,
// loadRawKeys; below 5 the source's goroutine does).
func TestBloomLoadBuild(t *testing.T) {
	rng := testseed.New(t)
	const n = 40_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = key(rng.IntN(n * 3 / 4)) // about a third repeated
	}
	seq := func(ks [][]byte) func(func([]byte, error) bool) {
		return func(yield func([]byte, error) bool) {
			for _, k := range ks {
				if !yield(k, nil) {
					return
				}
			}
		}
	}
	for _, procs := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("cpu=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
			defer s.Close()
			wantRawKeys(t, s, procs >= 5)
			for _, c := range []struct {
				name string
				cfg  BloomConfig
				pre  int // keys added with AddMany before the Load
			}{
				{"fresh", BloomConfig{Capacity: n, NonScaling: true}, 0},
				{"holding", BloomConfig{Capacity: n, NonScaling: true}, n / 8},
				{"grown", BloomConfig{Capacity: 3_000}, 0},
				{"grown-holding", BloomConfig{Capacity: 3_000}, 1_000},
			} {
				loaded, err := s.CreateBloom(c.name+"-loaded", c.cfg)
				must(t, err)
				added, err := s.CreateBloom(c.name+"-added", c.cfg)
				must(t, err)
				if c.pre > 0 {
					_, err = loaded.AddMany(keys[:c.pre])
					must(t, err)
				}
				must(t, loaded.Load(seq(keys[c.pre:])))
				_, err = added.AddMany(keys)
				must(t, err)
				sameBloom(t, c.name, loaded, added)
				if in := mustInfo(t, loaded); in.State != "ok" {
					t.Fatalf("%s: state %q after the Load", c.name, in.State)
				}
			}
		})
	}
}

// TestLoadBuildInterrupted: a Load that fails after several batches (the
// source fails, or the store closes under it) while building in private
// memory (a Bloom layer, a counting filter's counters, a cuckoo layer)
// leaves the filter incomplete: every lookup answers "maybe" and changes
// fail with ErrIncomplete.
func TestLoadBuildInterrupted(t *testing.T) {
	const n = 50_000
	boom := errors.New("boom")
	type filter struct {
		load func(iter.Seq2[[]byte, error]) error
		has  func([]byte) bool
		add  func([]byte) error
	}
	kinds := map[string]func(s *Store) (filter, error){
		"bloom": func(s *Store) (filter, error) {
			f, err := s.CreateBloom("f", BloomConfig{Capacity: n, NonScaling: true})
			if err != nil {
				return filter{}, err
			}
			return filter{f.Load, f.Has, func(k []byte) error { _, err := f.Add(k); return err }}, nil
		},
		"counting": func(s *Store) (filter, error) {
			f, err := s.CreateCounting("f", BloomConfig{Capacity: n, NonScaling: true})
			if err != nil {
				return filter{}, err
			}
			return filter{f.Load, f.Has, f.Add}, nil
		},
		"cuckoo": func(s *Store) (filter, error) {
			f, err := s.CreateCuckoo("f", CuckooConfig{Capacity: n})
			if err != nil {
				return filter{}, err
			}
			return filter{f.Load, f.Has, f.Add}, nil
		},
	}
	for _, kind := range []string{"bloom", "counting", "cuckoo"} {
		for _, how := range []string{"source", "close"} {
			t.Run(kind+"/"+how, func(t *testing.T) {
				s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
				defer s.Close()
				f, err := kinds[kind](s)
				must(t, err)
				err = f.load(func(yield func([]byte, error) bool) {
					for i := range n {
						if i == 5*loadBatch+7 {
							if how == "source" {
								yield(nil, boom)
								return
							}
							must(t, s.Close())
						}
						if !yield(key(i), nil) {
							return
						}
					}
				})
				if !errors.Is(err, ErrIncomplete) {
					t.Fatalf("Load interrupted by %s: %v, want ErrIncomplete", how, err)
				}
				for i := range 2 * n {
					if !f.has(key(i)) {
						t.Fatalf("an interrupted Load: Has(%s) answers absent", key(i))
					}
				}
				if how == "source" {
					if !errors.Is(err, boom) {
						t.Fatalf("Load: %v, want the source's error", err)
					}
					if err := f.add(key(0)); !errors.Is(err, ErrIncomplete) {
						t.Fatalf("Add after an interrupted Load: %v, want ErrIncomplete", err)
					}
				}
			})
		}
	}
}

// TestBloomLoadHeldKeys: a Load into an empty layer too large to build
// for its first keys holds them back and adds them when it ends (a small
// Load), or feeds them to the build once enough keys came (a larger one),
// and either way sets the words, and counts the items, of AddMany; every
// key is found after Load returns. Run on 1, 2 and 8 CPUs: on 1 the held
// keys of a small Load are added one by one.
func TestBloomLoadHeldKeys(t *testing.T) {
	const capacity = 4_000_000 // about 600,000 words: 4,700 keys start a build
	// On 8 CPUs the held keys' batches keep the keys (loadRawKeys).
	for _, procs := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("cpu=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
			defer s.Close()
			wantRawKeys(t, s, procs >= 5)
			for _, n := range []int{3_000, 30_000} {
				cfg := BloomConfig{Capacity: capacity, NonScaling: true}
				loaded, err := s.CreateBloom(fmt.Sprintf("loaded-%d", n), cfg)
				must(t, err)
				added, err := s.CreateBloom(fmt.Sprintf("added-%d", n), cfg)
				must(t, err)
				keys := make([][]byte, n)
				for i := range keys {
					keys[i] = key(i % (n - n/10)) // some repeated
				}
				must(t, loaded.Load(func(yield func([]byte, error) bool) {
					for _, k := range keys {
						if !yield(k, nil) {
							return
						}
					}
				}))
				_, err = added.AddMany(keys)
				must(t, err)
				sameBloom(t, fmt.Sprintf("%d keys", n), loaded, added)
				for _, k := range keys {
					if !loaded.Has(k) {
						t.Fatalf("%d keys: Has(%s) = false after Load", n, k)
					}
				}
			}
		})
	}
}

// TestLoadWithoutPrivateMemory: when no private memory can be had for a
// build (anonWords fails, as mmap does past the commit limit), a Load of
// each kind adds its keys in place, the ones it held back first, and ends
// as a Load in place would: every key found, counted, kept across a
// reopen; a Bloom or counting filter word for word as AddMany or Add in a
// loop leaves it. It neither fails nor falls back to the Go heap.
func TestLoadWithoutPrivateMemory(t *testing.T) {
	defer func(a func(uint64, bool) ([]uint64, func() error, error)) { anonWords = a }(anonWords)
	var calls int
	anonWords = func(uint64, bool) ([]uint64, func() error, error) {
		calls++
		return nil, nil, errors.New("cannot allocate memory")
	}
	const n = 40_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = key(i)
	}
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
	defer func() { s.Close() }()
	// Capacities whose first batches are held back (Bloom, counting,
	// cuckoo) before a build is tried, and a cuckoo chain that grows.
	// load fails t if the Load allocated half the filter's data size or
	// more on the Go heap beyond what the same Load into a twin filter
	// allocates with no private build tried at all: a fallback to the
	// heap would die of the same shortage, fatally.
	heap := func(load func(iter.Seq2[[]byte, error]) error) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		must(t, load(rangeKeys(0, n)))
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	load := func(what string, words uint64, load, twin func(iter.Seq2[[]byte, error]) error) {
		t.Helper()
		got := heap(load)
		maxWords := loadBuildMaxWords
		loadBuildMaxWords = 0
		base := heap(twin)
		loadBuildMaxWords = maxWords
		if got > base && got-base >= words*8/2 {
			t.Fatalf("%s: the Load allocated %d bytes on the heap, %d more than in place; the filter's data is %d",
				what, got, got-base, words*8)
		}
	}
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 2_000_000, NonScaling: true})
	must(t, err)
	bt, err := s.CreateBloom("b-twin", BloomConfig{Capacity: 2_000_000, NonScaling: true})
	must(t, err)
	load("Bloom", (*b.layers.Load())[0].Geometry().Words(), b.Load, bt.Load)
	ref, err := s.CreateBloom("ref", BloomConfig{Capacity: 2_000_000, NonScaling: true})
	must(t, err)
	_, err = ref.AddMany(keys)
	must(t, err)
	sameBloom(t, "Bloom Load without private memory", b, ref)

	c, err := s.CreateCounting("c", BloomConfig{Capacity: 2_000_000})
	must(t, err)
	ct, err := s.CreateCounting("c-twin", BloomConfig{Capacity: 2_000_000})
	must(t, err)
	load("counting", c.c.Geometry().Words(), c.Load, ct.Load)
	want, err := bloom.NewCounting(c.c.Geometry(), nil)
	must(t, err)
	for _, k := range keys {
		want.Add(k)
	}
	want.SetItems(n)
	sameCounting(t, "counting Load without private memory", c.c, want)

	for _, capacity := range []uint64{4_000_000, 4_000} {
		name := fmt.Sprintf("k%d", capacity)
		k, err := s.CreateCuckoo(name, CuckooConfig{Capacity: capacity})
		must(t, err)
		if capacity > n {
			twin, err := s.CreateCuckoo(name+"-twin", CuckooConfig{Capacity: capacity})
			must(t, err)
			load("cuckoo", (*k.layers.Load())[0].Geometry().Words(), k.Load, twin.Load)
		} else {
			must(t, k.Load(rangeKeys(0, n)))
		}
		if k.Items() != n {
			t.Fatalf("cuckoo %s: %d items after a Load without private memory, want %d", name, k.Items(), n)
		}
	}
	if calls < 4 {
		t.Fatalf("anonWords was called %d times: the Loads never tried a private build", calls)
	}
	must(t, s.Close())
	s = mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
	for _, name := range []string{"b", "c", "k4000000", "k4000"} {
		for i, k := range keys {
			var has bool
			switch name[0] {
			case 'b':
				f, err := s.Bloom(name)
				must(t, err)
				has = f.Has(k)
			case 'c':
				f, err := s.Counting(name)
				must(t, err)
				has = f.Has(k)
			default:
				f, err := s.Cuckoo(name)
				must(t, err)
				has = f.Has(k)
			}
			if !has {
				t.Fatalf("%s after a reopen: key %d absent", name, i)
			}
		}
	}
}
