package store

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestSimulatedPowerLossDuringLoad: a power loss in the middle of an
// unlogged bulk Load leaves the filter marked incomplete, never silently
// half-built; the other filters are intact.
func TestSimulatedPowerLossDuringLoad(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	other, _ := s.CreateBloom("other", BloomConfig{Capacity: 1000})
	for i := 0; i < 100; i++ {
		must(t, second(other.Add(key(i))))
	}
	b, _ := s.CreateBloom("bulk", BloomConfig{Capacity: 100_000})
	paused, resume := make(chan struct{}), make(chan struct{})
	loaded := make(chan error, 1)
	go func() {
		loaded <- b.Load(func(yield func([]byte, error) bool) {
			for i := 0; i < 50_000; i++ {
				if i == 20_000 {
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
	bb, _ := s2.Bloom("bulk")
	if in, _ := bb.Info(); in.State != "incomplete" {
		t.Fatalf("seed %d: state %q after a crash during Load, want incomplete", seed, in.State)
	}
	if _, err := bb.Add([]byte("x")); !errors.Is(err, ErrIncomplete) {
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
