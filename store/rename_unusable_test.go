package store

import (
	"errors"
	"iter"
	"os"
	"slices"
	"testing"
)

// failingKeys yields keys 0..n-1, then fails.
func failingKeys(n int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for i := 0; i < n; i++ {
			if !yield(key(i), nil) {
				return
			}
		}
		yield(nil, errors.New("the source broke"))
	}
}

// listStates returns "name:state" for every filter of s.
func listStates(t *testing.T, s *Store) []string {
	t.Helper()
	l, err := s.List()
	must(t, err)
	var out []string
	for _, in := range l {
		out = append(out, in.Name+":"+in.State)
	}
	return out
}

// TestRenameUnusableOverFilterRefused: the README's rebuild recipe whose
// Load failed (or a broken filter) must not replace the working filter:
// Rename over it fails with the filter's error and changes nothing; a
// Rename to a free name moves it aside; a working filter may replace it.
// Before, the Rename replaced "users" by a filter answering every lookup
// "maybe" (an adversarial review's finding).
func TestRenameUnusableOverFilterRefused(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	users, err := s.CreateBloom("users", BloomConfig{Capacity: 1000, NonScaling: true})
	must(t, err)
	must(t, users.Load(rangeKeys(0, 500)))
	next, err := s.CreateBloom("users.next", BloomConfig{Capacity: 1000, NonScaling: true})
	must(t, err)
	if err := next.Load(failingKeys(100)); err == nil {
		t.Fatal("a Load whose source failed returned nil")
	}
	if err := s.Rename("users.next", "users"); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Rename of an incomplete filter over a working one: %v, want ErrIncomplete", err)
	}
	absent := 0
	for i := 1000; i < 2000; i++ {
		if !users.Has(key(i)) {
			absent++
		}
	}
	if absent < 900 {
		t.Fatalf("users answers %d of 1000 never-added keys absent: it is no longer the working filter", absent)
	}
	if h, err := s.Bloom("users"); err != nil || h != users {
		t.Fatalf("users after the refused Rename: %v, %v", h, err)
	}

	// Broken: its layer file gone at the next Open.
	c, err := s.CreateCuckoo("seen", CuckooConfig{Capacity: 1000})
	must(t, err)
	must(t, c.Add(key(1)))
	must(t, s.Checkpoint())
	file := s.layerPath(c.b.id, 0)
	must(t, s.Close())
	must(t, os.Remove(file))
	s = mustOpen(t, dir, &Options{CheckpointEvery: -1})
	defer s.Close()
	if got, want := listStates(t, s), []string{"seen:broken", "users:ok", "users.next:incomplete"}; !slices.Equal(got, want) {
		t.Fatalf("after reopening: %v, want %v", got, want)
	}
	if err := s.Rename("seen", "users"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Rename of a broken filter over a working one: %v, want ErrCorrupt", err)
	}
	if err := s.Rename("users.next", "users"); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("after reopening, Rename of the incomplete filter over a working one: %v, want ErrIncomplete", err)
	}
	if got, want := listStates(t, s), []string{"seen:broken", "users:ok", "users.next:incomplete"}; !slices.Equal(got, want) {
		t.Fatalf("after the refused renames: %v, want %v", got, want)
	}

	// Moved aside, then a working filter replaces one of them.
	must(t, s.Rename("users.next", "users.failed"))
	must(t, s.Rename("seen", "seen.broken"))
	fresh, err := s.CreateBloom("fresh", BloomConfig{Capacity: 1000})
	must(t, err)
	must(t, second(fresh.Add(key(7))))
	must(t, s.Rename("fresh", "users.failed"))
	if got, want := listStates(t, s), []string{"seen.broken:broken", "users:ok", "users.failed:ok"}; !slices.Equal(got, want) {
		t.Fatalf("after moving aside and replacing: %v, want %v", got, want)
	}
	users, err = s.Bloom("users")
	must(t, err)
	for i := 0; i < 500; i++ {
		if !users.Has(key(i)) {
			t.Fatalf("users lost key %d", i)
		}
	}
}
