package store

// Issue #9 B: a bulk Load composes with every other mutation of the same
// filter, and a Load whose key source fails leaves the filter incomplete.

import (
	"errors"
	"fmt"
	"iter"
	"sync"
	"testing"
)

// rangeKeys yields keys lo..hi-1 for Load.
func rangeKeys(lo, hi int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for i := lo; i < hi; i++ {
			if !yield(key(i), nil) {
				return
			}
		}
	}
}

// TestLoadInterleavedWithMutations: logged adds and deletes of a cuckoo or
// counting filter that run while a Load of the same filter is in progress
// lose no loaded key and no acknowledged add. (Before, a logged change
// planned between two Load batches was applied after later batches as a
// stale after-image over loaded words.)
func TestLoadInterleavedWithMutations(t *testing.T) {
	const loaded, extra = 30_000, 2_000
	for _, kind := range []string{"cuckoo", "counting"} {
		for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
			t.Run(fmt.Sprintf("%s/%v", kind, mode), func(t *testing.T) {
				s := mustOpen(t, t.TempDir(), &Options{Sync: mode, SyncEvery: 2e6, CheckpointEvery: -1})
				defer s.Close()
				var (
					load func(iter.Seq2[[]byte, error]) error
					add  func([]byte) error
					del  func([]byte) (bool, error)
					has  func([]byte) bool
				)
				if kind == "cuckoo" {
					c, err := s.CreateCuckoo("f", CuckooConfig{Capacity: 2 * (loaded + extra)})
					must(t, err)
					load, add, del, has = c.Load, c.Add, c.Delete, c.Has
				} else {
					c, err := s.CreateCounting("f", BloomConfig{Capacity: loaded + extra, ErrorRate: 0.001})
					must(t, err)
					load, add, del, has = c.Load, c.Add, c.Delete, c.Has
				}
				// Keys the concurrent writer deletes again, added first.
				for i := 0; i < extra; i++ {
					must(t, add(key(1_000_000+i)))
				}
				var wg sync.WaitGroup
				wg.Add(1)
				var werr error
				go func() {
					defer wg.Done()
					for i := 0; i < extra && werr == nil; i++ {
						if werr = add(key(2_000_000 + i)); werr != nil {
							break
						}
						_, werr = del(key(1_000_000 + i))
					}
				}()
				must(t, load(rangeKeys(0, loaded)))
				wg.Wait()
				must(t, werr)
				must(t, s.Checkpoint())
				lost := 0
				for i := 0; i < loaded; i++ {
					if !has(key(i)) {
						lost++
					}
				}
				for i := 0; i < extra; i++ {
					if !has(key(2_000_000 + i)) {
						lost++
					}
				}
				if lost > 0 {
					t.Fatalf("%d keys (loaded or acknowledged) lost", lost)
				}
			})
		}
	}
}

// TestLoadSourceErrorLeavesIncomplete: a Load whose key source fails
// returns the source's error and leaves the filter incomplete (lookups
// "maybe", changes ErrIncomplete), then and after a reopen.
func TestLoadSourceErrorLeavesIncomplete(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	must(t, second(s.CreateBloom("b", BloomConfig{Capacity: 1000})))
	must(t, second(s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})))
	must(t, second(s.CreateCounting("n", BloomConfig{Capacity: 1000})))
	errScan := errors.New("scan failed")
	failing := func(yield func([]byte, error) bool) {
		for i := 0; i < 1000; i++ {
			if i == 10 {
				yield(nil, errScan)
				return
			}
			if !yield(key(i), nil) {
				return
			}
		}
	}
	type filter struct {
		name string
		load func(iter.Seq2[[]byte, error]) error
		has  func([]byte) bool
		add  func([]byte) error
	}
	filters := func(s *Store) []filter {
		b, _ := s.Bloom("b")
		c, _ := s.Cuckoo("c")
		n, _ := s.Counting("n")
		return []filter{
			{"bloom", b.Load, b.Has, func(k []byte) error { return second(b.Add(k)) }},
			{"cuckoo", c.Load, c.Has, c.Add},
			{"counting", n.Load, n.Has, n.Add},
		}
	}
	for _, f := range filters(s) {
		err := f.load(failing)
		if !errors.Is(err, errScan) || !errors.Is(err, ErrIncomplete) {
			t.Fatalf("%s: Load with a failing source returned %v, want the source error and ErrIncomplete", f.name, err)
		}
	}
	check := func(when string, s *Store) {
		t.Helper()
		for _, f := range filters(s) {
			if !f.has(key(500)) {
				t.Fatalf("%s %s: a key the failed Load never reached reads absent", f.name, when)
			}
			if err := f.add(key(2000)); !errors.Is(err, ErrIncomplete) {
				t.Fatalf("%s %s: add to the incomplete filter: %v, want ErrIncomplete", f.name, when, err)
			}
		}
		in, err := s.List()
		must(t, err)
		for _, i := range in {
			if i.State != "incomplete" {
				t.Fatalf("%s %s: state %q, want incomplete", i.Name, when, i.State)
			}
		}
	}
	check("after the failed Load", s)
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	defer s.Close()
	check("after reopening", s)
	// Drop recovers it.
	must(t, s.Drop("b"))
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	must(t, b.Load(rangeKeys(0, 100)))
	if b.Has(key(500)) && b.Has(key(501)) && b.Has(key(502)) {
		t.Fatal("the re-created filter still answers maybe for everything")
	}
}

// TestLoadOfFullFilterLeavesIncomplete: a Load that cannot add every key
// (a non-scaling filter at capacity) leaves the filter incomplete too.
func TestLoadOfFullFilterLeavesIncomplete(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100, NonScaling: true})
	must(t, err)
	err = b.Load(rangeKeys(0, 1000))
	if !errors.Is(err, ErrFull) || !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Load past capacity: %v, want ErrFull and ErrIncomplete", err)
	}
	if !b.Has(key(999)) {
		t.Fatal("a key the Load could not add reads absent")
	}
}
