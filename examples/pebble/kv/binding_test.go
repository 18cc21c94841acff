package kv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// checkAll fails the test unless Get finds keys 0..n-1 (but every fifth,
// if deleted) with their values, and both filters hold each one found.
func checkAll(t *testing.T, s *Service, n int, deleted bool) {
	t.Helper()
	lost := 0
	for i := range n {
		gone := deleted && i%5 == 0
		v, found, err := s.Get(key(i))
		if err != nil {
			t.Fatalf("Get %s: %v", key(i), err)
		}
		if found == gone || (found && string(v) != string(value(i))) || (!gone && (!s.seen.Has(key(i)) || !s.live.Has(key(i)))) {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d keys answered wrongly", lost, n)
	}
}

// TestFiltersDirEmptied: the filter store's directory emptied (its
// contents deleted, the directory kept) while pebble holds keys: Open
// finds a store of another id than the one pebble's writes went through,
// or, in a directory from before bindings, empty filters beside pebble's
// keys, and rebuilds both filters from pebble, in every filter mode
// (before, it opened new empty filters and every Get answered "not
// found"; found by a helper).
func TestFiltersDirEmptied(t *testing.T) {
	for _, mode := range filterModes {
		for _, unbound := range []bool{false, true} {
			name := mode.String()
			if unbound {
				name += "/no binding"
			}
			t.Run(name, func(t *testing.T) { testFiltersDirEmptied(t, mode, unbound) })
		}
	}
}

func testFiltersDirEmptied(t *testing.T, mode Mode, unbound bool) {
	dir := t.TempDir()
	s := open(t, dir, mode)
	for i := range 20 {
		if err := s.Put(key(i), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	s = reopen(t, s) // ModeExternal's Open trims the filter log
	if n := s.Stats().Rebuilt; n != 0 {
		t.Fatalf("a plain reopen rebuilt %d keys", n)
	}
	if unbound {
		if err := s.db.Delete(bindingKey(), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	filters := filepath.Join(dir, filtersDir)
	ents, err := os.ReadDir(filters)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(filters, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	s = open(t, dir, mode)
	if n := s.Stats().Rebuilt; n != 20 {
		t.Errorf("Open rebuilt the filters with %d keys, want 20", n)
	}
	checkAll(t, s, 20, false)
	s = reopen(t, s)
	if n := s.Stats().Rebuilt; n != 0 {
		t.Errorf("the reopen after the rebuild rebuilt %d keys again", n)
	}
	checkAll(t, s, 20, false)
}

// TestOlderFilterCopyAfterTrim: the filter store put back to an older copy
// of itself after pebble deleted the filter log records that copy lacks
// (the write path's trim, or a trim at a later Open): Open rebuilds the
// filters from pebble. Before, it replayed what was left and 31 (trim
// every 8 records) or 50 (a trim at Open) of 100 keys answered "not
// found" (found by a helper). TestExternalFilterStoreLoss is the case
// where the log still holds every record: a replay, no rebuild.
func TestOlderFilterCopyAfterTrim(t *testing.T) {
	for _, variant := range []string{"trim at Open", "trim every 8"} {
		t.Run(variant, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, ModeExternal)
			for i := range 50 {
				if err := s.Put(key(i), value(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			filters := filepath.Join(dir, filtersDir)
			old := filepath.Join(t.TempDir(), "filters-old")
			if out, err := exec.Command("cp", "-a", filters, old).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, out)
			}
			s = open(t, dir, ModeExternal)
			if variant == "trim every 8" {
				s.trimEvery = 8
			}
			for i := 50; i < 100; i++ {
				if err := s.Put(key(i), value(i)); err != nil {
					t.Fatal(err)
				}
				if variant == "trim every 8" && i == 80 {
					if err := s.fs.Checkpoint(); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i := 0; i < 100; i += 5 {
				if err := s.Delete(key(i)); err != nil {
					t.Fatal(err)
				}
			}
			if variant == "trim at Open" {
				s = reopen(t, s)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(filters); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(old, filters); err != nil {
				t.Fatal(err)
			}
			s = open(t, dir, ModeExternal)
			if n := s.Stats().Rebuilt; n != 80 {
				t.Errorf("Open rebuilt the filters with %d keys, want the 80 pebble holds", n)
			}
			checkAll(t, s, 100, true)
			checkExact(t, s)
			// The write path goes on from the rebuilt filters.
			if err := s.Put(key(1000), value(1000)); err != nil {
				t.Fatal(err)
			}
			s = reopen(t, s)
			if n := s.Stats().Rebuilt; n != 0 {
				t.Errorf("the reopen after the rebuild rebuilt %d keys again", n)
			}
			checkAll(t, s, 100, true)
			if _, found, err := s.Get(key(1000)); err != nil || !found {
				t.Errorf("the put after the rebuild: found %v, %v", found, err)
			}
		})
	}
}

// TestBindingFromBefore: a directory from before bindings (pebble holds
// none) opens as it did, without a rebuild, and gets one; a binding that
// is not 16 bytes fails Open with ErrCorrupt.
func TestBindingFromBefore(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, ModeExternal)
	for i := range 10 {
		if err := s.Put(key(i), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Delete(bindingKey(), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	if n := s.Stats().Rebuilt; n != 0 {
		t.Errorf("a directory without a binding was rebuilt (%d keys)", n)
	}
	if bd, err := s.readBinding(); err != nil || !bd.found || bd.id != s.fs.ID() {
		t.Fatalf("binding after Open: %+v, %v; want the store's id %016x", bd, err, s.fs.ID())
	}
	checkAll(t, s, 10, false)
	if err := s.db.Set(bindingKey(), []byte("short"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, ModeExternal, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a 5-byte binding: %v, want ErrCorrupt", err)
	}
}
