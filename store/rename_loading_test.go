package store

import (
	"errors"
	"iter"
	"testing"
	"time"
)

// gatedKeys yields keys 0..n-1, then waits for end and yields what it
// sends: an error fails the Load, nil ends the keys. started is closed
// once every key was yielded.
func gatedKeys(n int, started chan<- struct{}, end <-chan error) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for i := 0; i < n; i++ {
			if !yield(key(i), nil) {
				return
			}
		}
		close(started)
		if err := <-end; err != nil {
			yield(nil, err)
		}
	}
}

// TestRenameOverWaitsForLoad: the README's rebuild recipe run with the
// Rename issued while the rebuild's Load still runs. The Rename must wait
// for the Load and replace the working filter only if it completed.
// Before, it replaced "users" at once, and when the Load then failed the
// name answered every lookup "maybe".
func TestRenameOverWaitsForLoad(t *testing.T) {
	for _, fail := range []bool{true, false} {
		name := map[bool]string{true: "load fails", false: "load completes"}[fail]
		t.Run(name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir(), &Options{CheckpointEvery: -1})
			defer s.Close()
			users, err := s.CreateBloom("users", BloomConfig{Capacity: 10_000, NonScaling: true})
			must(t, err)
			must(t, users.Load(rangeKeys(5000, 6000)))
			next, err := s.CreateBloom("users.next", BloomConfig{Capacity: 10_000, NonScaling: true})
			must(t, err)

			started, end := make(chan struct{}), make(chan error, 1)
			loaded := make(chan error, 1)
			go func() { loaded <- next.Load(gatedKeys(3000, started, end)) }()
			<-started
			renamed := make(chan error, 1)
			go func() { renamed <- s.Rename("users.next", "users") }()
			select {
			case err := <-renamed:
				t.Fatalf("Rename over users returned %v while the Load of users.next ran", err)
			case <-time.After(100 * time.Millisecond):
			}
			if fail {
				end <- errors.New("the source broke")
			} else {
				end <- nil
			}
			lerr := <-loaded
			rerr := <-renamed
			if fail {
				if lerr == nil {
					t.Fatal("a Load whose source failed returned nil")
				}
				if !errors.Is(rerr, ErrIncomplete) {
					t.Fatalf("Rename over users after the Load failed: %v, want ErrIncomplete", rerr)
				}
				h, err := s.Bloom("users")
				if err != nil || h != users {
					t.Fatalf("users after the refused Rename: %v, %v: want the working filter", h, err)
				}
				absent := 0
				for i := 20_000; i < 21_000; i++ {
					if !h.Has(key(i)) {
						absent++
					}
				}
				if absent < 900 {
					t.Fatalf("users answers %d of 1000 never-added keys absent: it is no longer the working filter", absent)
				}
				return
			}
			must(t, lerr)
			must(t, rerr)
			h, err := s.Bloom("users")
			if err != nil || h != next {
				t.Fatalf("users after the Rename: %v, %v: want the loaded filter", h, err)
			}
			for i := 0; i < 3000; i++ {
				if !h.Has(key(i)) {
					t.Fatalf("loaded key %d absent after the Rename", i)
				}
			}
		})
	}
}

// TestRenameLoadingToFreeName: moving a filter whose Load runs to a free
// name does not wait for the Load, which goes on under the new name.
func TestRenameLoadingToFreeName(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{CheckpointEvery: -1})
	defer s.Close()
	f, err := s.CreateBloom("a", BloomConfig{Capacity: 10_000, NonScaling: true})
	must(t, err)
	started, end := make(chan struct{}), make(chan error, 1)
	loaded := make(chan error, 1)
	go func() { loaded <- f.Load(gatedKeys(2000, started, end)) }()
	<-started
	must(t, s.Rename("a", "b")) // returns while the Load waits on end
	end <- nil
	must(t, <-loaded)
	h, err := s.Bloom("b")
	if err != nil || h != f {
		t.Fatalf("b: %v, %v", h, err)
	}
	for i := 0; i < 2000; i++ {
		if !h.Has(key(i)) {
			t.Fatalf("loaded key %d absent under the new name", i)
		}
	}
}
