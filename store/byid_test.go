package store

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// checkByID fails unless s.byID holds exactly s.filters' handles, by id:
// ApplyExternal finds its filters there.
func checkByID(t *testing.T, s *Store, what string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) != len(s.filters) {
		t.Fatalf("%s: byID holds %d filters, filters %d", what, len(s.byID), len(s.filters))
	}
	for name, h := range s.filters {
		if s.byID[h.base().id] != h {
			t.Fatalf("%s: byID[%d] is not filter %q's handle", what, h.base().id, name)
		}
	}
}

// TestByIDFollowsFilters: the id index external applies use follows every
// way a filter appears or goes: Create, Drop, Rename (over another
// filter, too), Import and reopening, in a random sequence.
func TestByIDFollowsFilters(t *testing.T) {
	r := testseed.New(t)
	dir := t.TempDir()
	s, err := Open(dir, nil)
	must(t, err)
	defer func() { s.Close() }()
	names := []string{"a", "b", "c", "d"}
	for step := range 200 {
		name, other := names[r.IntN(len(names))], names[r.IntN(len(names))]
		var err error
		switch op := r.IntN(5); op {
		case 0:
			_, err = s.CreateCuckoo(name, CuckooConfig{Capacity: 64})
		case 1:
			err = s.Drop(name)
		case 2:
			err = s.Rename(name, other)
		case 3:
			var buf bytes.Buffer
			if f, ferr := s.Cuckoo(other); ferr == nil {
				if _, err = f.WriteTo(&buf); err == nil {
					err = s.Import(name, &buf)
				}
			}
		case 4:
			must(t, s.Close())
			s, err = Open(dir, nil)
			must(t, err)
		}
		_ = err // ErrNotFound, ErrExists: expected in a random sequence
		checkByID(t, s, fmt.Sprintf("step %d", step))
	}
}
