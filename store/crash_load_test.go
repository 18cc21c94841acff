package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// loadTarget is one kind of filter for the Load crash test: create makes
// the filter and returns its Load; open looks it up after a reopen. The
// Load's source yields keys keys and pauses for the crash once it has
// yielded pause of them (0: 50,000 and 20,000).
type loadTarget struct {
	kind        string
	create      func(s *Store) (loadFunc, error)
	open        func(s *Store) (loadedFilter, error)
	keys, pause int
}

// loadedFilter is what the crash test asks of a reopened filter of any
// kind.
type loadedFilter interface {
	Info() (Info, error)
	Has(key []byte) bool
	add(key []byte) error
}

type loadedBloom struct{ *Bloom }
type loadedCuckoo struct{ *Cuckoo }
type loadedCounting struct{ *Counting }

func (f loadedBloom) add(key []byte) error    { return second(f.Add(key)) }
func (f loadedCuckoo) add(key []byte) error   { return f.Add(key) }
func (f loadedCounting) add(key []byte) error { return f.Add(key) }

var loadTargets = []loadTarget{
	{"bloom", func(s *Store) (loadFunc, error) {
		f, err := s.CreateBloom("bulk", BloomConfig{Capacity: 100_000})
		if err != nil {
			return nil, err
		}
		return f.Load, nil
	}, func(s *Store) (loadedFilter, error) {
		f, err := s.Bloom("bulk")
		return loadedBloom{f}, err
	}, 0, 0},
	{"cuckoo", func(s *Store) (loadFunc, error) {
		f, err := s.CreateCuckoo("bulk", CuckooConfig{Capacity: 100_000})
		if err != nil {
			return nil, err
		}
		return f.Load, nil
	}, func(s *Store) (loadedFilter, error) {
		f, err := s.Cuckoo("bulk")
		return loadedCuckoo{f}, err
	}, 0, 0},
	// A cuckoo layer of several DeriveLocal blocks, built by blocks
	// (cuckoo.Filter.Build): the crash comes once two batches have gone
	// to the private build.
	{"cuckoo-blocks", func(s *Store) (loadFunc, error) {
		f, err := s.CreateCuckoo("bulk", CuckooConfig{Capacity: 3*cuckooLoadBatch + 1000})
		if err != nil {
			return nil, err
		}
		if g := (*f.layers.Load())[0].Geometry(); g.Split() == 0 {
			return nil, fmt.Errorf("layer 0 is %+v, want two DeriveLocal blocks or more", g)
		}
		return f.Load, nil
	}, func(s *Store) (loadedFilter, error) {
		f, err := s.Cuckoo("bulk")
		return loadedCuckoo{f}, err
	}, 3 * cuckooLoadBatch, 2*cuckooLoadBatch + 10},
	{"counting", func(s *Store) (loadFunc, error) {
		f, err := s.CreateCounting("bulk", BloomConfig{Capacity: 100_000})
		if err != nil {
			return nil, err
		}
		return f.Load, nil
	}, func(s *Store) (loadedFilter, error) {
		f, err := s.Counting("bulk")
		return loadedCounting{f}, err
	}, 0, 0},
}

// TestSimulatedPowerLossDuringLoad: a power loss in the middle of an
// unlogged bulk Load of a filter of each kind (each with its private
// build under way: a Bloom layer, the counting counters, a fresh cuckoo
// layer, one of several blocks built by blocks) leaves the filter marked
// incomplete, never silently half-built; the other filters are intact.
func TestSimulatedPowerLossDuringLoad(t *testing.T) {
	for _, tg := range loadTargets {
		t.Run(tg.kind, func(t *testing.T) { powerLossDuringLoad(t, tg) })
	}
}

func powerLossDuringLoad(t *testing.T, tg loadTarget) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	other, _ := s.CreateBloom("other", BloomConfig{Capacity: 1000})
	for i := 0; i < 100; i++ {
		must(t, second(other.Add(key(i))))
	}
	load, err := tg.create(s)
	must(t, err)
	keys, pause := 50_000, 20_000
	if tg.keys > 0 {
		keys, pause = tg.keys, tg.pause
	}
	paused, resume := make(chan struct{}), make(chan struct{})
	loaded := make(chan error, 1)
	go func() {
		loaded <- load(func(yield func([]byte, error) bool) {
			for i := 0; i < keys; i++ {
				if i == pause {
					close(paused)
					<-resume
				}
				if !yield(key(i), nil) {
					return
				}
			}
		})
	}()
	<-paused
	// Power loss while the Load is in its middle (it holds no lock
	// between batches; it is paused in its iterator).
	w.crash(s, rng)
	s2, err := w.open(t)
	if err != nil {
		t.Fatalf("seed %d: reopen after a crash during Load: %v", seed, err)
	}
	defer s2.Close()
	close(resume)
	if err := <-loaded; !errors.Is(err, ErrClosed) {
		t.Fatalf("the interrupted Load returned %v, want ErrClosed", err)
	}
	bb, err := tg.open(s2)
	must(t, err)
	if in, _ := bb.Info(); in.State != "incomplete" {
		t.Fatalf("seed %d: state %q after a crash during Load, want incomplete", seed, in.State)
	}
	if err := bb.add([]byte("x")); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("add to an incomplete filter: %v", err)
	}
	if !bb.Has([]byte("never added")) {
		t.Fatal("an incomplete filter answered 'absent'")
	}
	o, _ := s2.Bloom("other")
	for i := 0; i < 100; i++ {
		if !o.Has(key(i)) {
			t.Fatalf("seed %d: the other filter lost %d", seed, i)
		}
	}
	must(t, s2.Drop("bulk"))
	if _, err := s2.CreateBloom("bulk", BloomConfig{}); err != nil {
		t.Fatalf("re-create after dropping the incomplete filter: %v", err)
	}
}
