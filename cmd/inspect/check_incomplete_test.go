package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// TestCheckIncompleteHasNoCount: check of a cuckoo or counting filter left
// incomplete by a failed Load answers "maybe" with no count, as for a
// broken filter. Before, it printed the store's "unknown" count,
// 18446744073709551615, as the key's count, in the table and the JSON
// (an adversarial review's finding).
func TestCheckIncompleteHasNoCount(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	failing := func(yield func([]byte, error) bool) {
		for i := range 100 {
			if !yield(fmt.Appendf(nil, "k%d", i), nil) {
				return
			}
		}
		yield(nil, errors.New("the source failed"))
	}
	c, err := s.CreateCuckoo("cu", store.CuckooConfig{Capacity: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.CreateCounting("co", store.BloomConfig{Capacity: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if c.Load(failing) == nil || n.Load(failing) == nil {
		t.Fatal("a Load whose source fails succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cu", "co"} {
		r := mustRun(t, 0, "check", dir, name, "k1", "absent")
		if strings.Contains(r.stdout, "18446744073709551615") || strings.Contains(r.stdout, "COUNT") || !strings.Contains(r.stdout, "k1      maybe") {
			t.Errorf("check of incomplete %s:\n%s", name, r)
		}
		var out checkOut
		decode(t, mustRun(t, 0, "--json", "check", dir, name, "k1").stdout, &out)
		if out.State != stateIncomplete || len(out.Answers) != 1 || out.Answers[0].Answer != "maybe" || out.Answers[0].Count != nil {
			t.Errorf("check --json of incomplete %s: %+v", name, out)
		}
	}
}
