package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// TestVerifyStaleBloomCount: with a catalog copied before Loads into a
// Bloom and a cuckoo filter put back, verify reports the WAL records the
// catalog needs and Close's checkpoint removed (the load records among
// them: a writer's Open refuses the store), notes that the Bloom
// layer's set bits say many more items than its count, naming the
// cause, and reports the cuckoo layer's count as a problem (its used
// slots must match it exactly). With the current catalog, the same full
// layers draw none of these.
func TestVerifyStaleBloomCount(t *testing.T) {
	dir := t.TempDir()
	open := func() *store.Store {
		s, err := store.Open(dir, &store.Options{CheckpointEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if _, err := s.CreateBloom("b", store.BloomConfig{Capacity: 10000, ErrorRate: 0.01}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 10000}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cat := filepath.Join(dir, "catalog.db")
	old, err := os.ReadFile(cat)
	if err != nil {
		t.Fatal(err)
	}
	s = open()
	b, err := s.Bloom("b")
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, 9500)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}
	if err := b.Load(store.Keys(slices.Values(keys))); err != nil {
		t.Fatal(err)
	}
	c, err := s.Cuckoo("c")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Load(store.Keys(slices.Values(keys))); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	r := mustRun(t, 0, "verify", dir)
	if out := r.stdout + r.stderr; strings.Contains(out, "stale") || strings.Contains(out, "slots in use") || strings.Contains(out, "missing") {
		t.Fatalf("verify with the current catalog notes a stale count:\n%s%s", r.stdout, r.stderr)
	}
	if err := os.WriteFile(cat, old, 0o644); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, 1, "verify", dir)
	if out := r.stdout + r.stderr; !strings.Contains(out, "filters/1-0.flt") || !strings.Contains(out, "the count is stale") ||
		!strings.Contains(out, "not its 0") || !strings.Contains(out, "filters/2-0.flt: 9500 slots in use, but it holds 0 items") ||
		!strings.Contains(out, "records 1..") || !strings.Contains(out, "are missing (catalog.db older than the WAL") {
		t.Fatalf("verify after the older catalog was put back does not report the stale counts:\n%s", out)
	}
	if testing.Verbose() {
		t.Log(r.stdout + r.stderr)
	}
}
