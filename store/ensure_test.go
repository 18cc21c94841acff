package store

import (
	"errors"
	"sync"
	"testing"
)

// TestEnsure: each Ensure creates a missing filter, returns an existing one
// of its kind (the handle every lookup gives, its configuration kept and
// the one passed ignored), and refuses one of another kind with
// ErrWrongKind; a read-only store ensures only what exists.
func TestEnsure(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	b, err := s.EnsureBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	must(t, second(b.Add([]byte("x"))))
	c, err := s.EnsureCuckoo("c", CuckooConfig{Capacity: 1000})
	must(t, err)
	n, err := s.EnsureCounting("n", BloomConfig{Capacity: 1000})
	must(t, err)
	m, err := s.EnsureBitmap("m", 64)
	must(t, err)

	b2, err := s.EnsureBloom("b", BloomConfig{Capacity: 5, ErrorRate: 0.5})
	must(t, err)
	if b2 != b || mustInfo(t, b2).Capacity != 1000 || !b2.Has([]byte("x")) {
		t.Fatalf("EnsureBloom of an existing filter: another handle or configuration (%+v)", mustInfo(t, b2))
	}
	if c2, err := s.EnsureCuckoo("c", CuckooConfig{Capacity: 5}); err != nil || c2 != c {
		t.Fatalf("EnsureCuckoo of an existing filter: %v", err)
	}
	if n2, err := s.EnsureCounting("n", BloomConfig{Capacity: 5}); err != nil || n2 != n {
		t.Fatalf("EnsureCounting of an existing filter: %v", err)
	}
	if m2, err := s.EnsureBitmap("m", 128); err != nil || m2 != m || m2.Bits() != 64 {
		t.Fatalf("EnsureBitmap of an existing bitmap: %v", err)
	}
	for what, err := range map[string]error{
		"bloom over a cuckoo":   second(s.EnsureBloom("c", BloomConfig{})),
		"cuckoo over a bloom":   second(s.EnsureCuckoo("b", CuckooConfig{})),
		"counting over a bloom": second(s.EnsureCounting("b", BloomConfig{})),
		"bitmap over a bloom":   second(s.EnsureBitmap("b", 64)),
	} {
		if !errors.Is(err, ErrWrongKind) {
			t.Errorf("Ensure of a %s: %v, want ErrWrongKind", what, err)
		}
	}
	if err := second(s.EnsureBloom("bad/name", BloomConfig{})); !errors.Is(err, ErrInvalid) {
		t.Errorf("EnsureBloom of a bad name: %v, want ErrInvalid", err)
	}
	if err := second(s.EnsureBloom("z", BloomConfig{ErrorRate: 2})); !errors.Is(err, ErrInvalid) {
		t.Errorf("EnsureBloom creating with a bad config: %v, want ErrInvalid", err)
	}
	must(t, s.Close())
	if err := second(s.EnsureBloom("b", BloomConfig{})); !errors.Is(err, ErrClosed) {
		t.Errorf("EnsureBloom on a closed store: %v, want ErrClosed", err)
	}

	r := mustOpen(t, dir, &Options{ReadOnly: true})
	defer r.Close()
	if b, err := r.EnsureBloom("b", BloomConfig{}); err != nil || !b.Has([]byte("x")) {
		t.Fatalf("EnsureBloom of an existing filter in a read-only store: %v", err)
	}
	if err := second(r.EnsureBloom("new", BloomConfig{})); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("EnsureBloom of a missing filter in a read-only store: %v, want ErrReadOnly", err)
	}
}

// TestEnsureConcurrent: callers ensuring one name at once all get the
// same filter, created once.
func TestEnsureConcurrent(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	const n = 8
	got := make([]*Cuckoo, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.EnsureCuckoo("c", CuckooConfig{Capacity: 100})
			if err != nil {
				t.Error(err)
			}
			got[i] = c
		}()
	}
	wg.Wait()
	for _, c := range got {
		if c != got[0] {
			t.Fatal("concurrent Ensures returned different handles")
		}
	}
	if l, err := s.List(); err != nil || len(l) != 1 {
		t.Fatalf("List after concurrent Ensures: %v, %v", l, err)
	}
}
