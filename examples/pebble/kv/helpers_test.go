package kv

import (
	"fmt"
	"testing"
)

// open opens a Service in dir with small filters, failing the test on an
// error, and closes it when the test ends unless the test closed it.
func open(t *testing.T, dir string, mode Mode) *Service {
	t.Helper()
	s, err := Open(dir, mode, &Options{Capacity: 10_000})
	if err != nil {
		t.Fatalf("Open(%v): %v", mode, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// reopen closes s and opens its directory again in the same mode.
func reopen(t *testing.T, s *Service) *Service {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return open(t, s.dir, s.mode)
}

func key(i int) []byte   { return fmt.Appendf(nil, "key-%06d", i) }
func value(i int) []byte { return fmt.Appendf(nil, "value-%d", i) }

// pebbleKeys returns every user key pebble holds (not the filter log's),
// read directly.
func pebbleKeys(t *testing.T, s *Service) [][]byte {
	t.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	for it.First(); it.Valid(); it.Next() {
		if !reserved(it.Key()) {
			keys = append(keys, append([]byte(nil), it.Key()...))
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// checkInvariant fails the test if a key pebble holds is absent from
// either filter, or if the cuckoo filter holds fewer copies than pebble
// holds keys.
func checkInvariant(t *testing.T, s *Service) {
	t.Helper()
	if !s.mode.filtered() {
		return
	}
	keys := pebbleKeys(t, s)
	for _, k := range keys {
		if !s.seen.Has(k) || !s.live.Has(k) {
			t.Errorf("pebble holds %q; seen.Has %v, live.Has %v", k, s.seen.Has(k), s.live.Has(k))
		}
	}
	if n := s.live.Items(); n < uint64(len(keys)) {
		t.Errorf("cuckoo filter holds %d items, pebble %d keys", n, len(keys))
	}
}

// filterModes are the modes that keep filters.
var filterModes = []Mode{ModePerFilter, ModeBatch, ModeExternal}
