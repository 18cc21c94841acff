package kv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/filterstore/filterstore/store"
)

// logRecords returns the seqs of the filter log records pebble holds.
func logRecords(t *testing.T, s *Service) []uint64 {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logKey(1), UpperBound: logEnd()}) // logKey(0) is the binding
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for it.First(); it.Valid(); it.Next() {
		seq, err := store.ExternalSeq(it.Value())
		if err != nil {
			t.Fatalf("filter log key %x: %v", it.Key(), err)
		}
		if string(logKey(seq)) != string(it.Key()) {
			t.Fatalf("filter log key %x holds the record of seq %d", it.Key(), seq)
		}
		seqs = append(seqs, seq)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return seqs
}

// checkExact fails the test unless the cuckoo filter holds exactly one
// copy per key pebble holds: ModeExternal writes a key and its filter
// change in one pebble batch, so a crash leaks nothing.
func checkExact(t *testing.T, s *Service) {
	t.Helper()
	checkInvariant(t, s)
	if items, held := s.live.Items(), len(pebbleKeys(t, s)); items != uint64(held) {
		t.Errorf("cuckoo filter holds %d items, pebble %d keys", items, held)
	}
}

// TestExternalCrash: a crash after pebble committed a change and before
// the filters applied it leaves the filters behind pebble; the next Open
// replays the filter log and the change is whole, with no leaked copy.
func TestExternalCrash(t *testing.T) {
	errCrash := errors.New("crash")
	s := open(t, t.TempDir(), ModeExternal)
	a, b := []byte("a"), []byte("b")
	if err := s.Put(b, value(1)); err != nil {
		t.Fatal(err)
	}
	s.crashPoint = func() error { return errCrash }
	if err := s.Put(a, value(0)); !errors.Is(err, errCrash) {
		t.Fatalf("Put with a crash after its pebble commit: %v", err)
	}
	if err := s.Delete(b); !errors.Is(err, errCrash) {
		t.Fatalf("Delete with a crash after its pebble commit: %v", err)
	}
	// The premise: the filters lack both changes (b's copy only).
	if n := s.live.Items(); n != 1 {
		t.Fatalf("before the restart the cuckoo filter holds %d items, want 1 (b)", n)
	}

	s = reopen(t, s)
	if n := s.Stats().Replayed; n != 2 {
		t.Errorf("Open replayed %d filter log records, want 2", n)
	}
	checkExact(t, s)
	if v, found, err := s.Get(a); !found || err != nil || string(v) != string(value(0)) {
		t.Errorf("Get a = %q, %v, %v", v, found, err)
	}
	if n := s.live.Count(b); n != 0 {
		t.Errorf("copies of b after its replayed delete: %d, want 0", n)
	}
	if _, found, err := s.Get(b); found || err != nil {
		t.Errorf("Get b = %v, %v; want not found", found, err)
	}
	if n := len(logRecords(t, s)); n != 0 {
		t.Errorf("after a clean Open the filter log holds %d records, want 0 (trimmed)", n)
	}
}

// TestExternalFilterStoreLoss: the filter store loses every change since
// an earlier point (the most a power loss may take from it: what it had
// not reported in ExternalDurable), modelled by putting back a copy of
// its directory; the filter log in pebble brings it up to date.
func TestExternalFilterStoreLoss(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, ModeExternal)
	s.trimEvery = 0
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
	s.trimEvery = 0
	for i := 50; i < 100; i++ {
		if err := s.Put(key(i), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100; i += 5 {
		if err := s.Delete(key(i)); err != nil {
			t.Fatal(err)
		}
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
	if n := s.Stats().Replayed; n != 70 {
		t.Errorf("Open replayed %d filter log records, want 70 (50 puts, 20 deletes)", n)
	}
	checkExact(t, s)
	for i := range 100 {
		v, found, err := s.Get(key(i))
		if err != nil || found != (i%5 != 0) || (found && string(v) != string(value(i))) {
			t.Errorf("Get %s = %q, %v, %v", key(i), v, found, err)
		}
		if !s.seen.Has(key(i)) {
			t.Errorf("seen lost %s", key(i))
		}
	}
}

// TestExternalTrim: the write path deletes the filter log records the
// filter store holds durably, and only those.
func TestExternalTrim(t *testing.T) {
	s := open(t, t.TempDir(), ModeExternal)
	s.trimEvery = 0
	for i := range 40 {
		if err := s.Put(key(i), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(logRecords(t, s)); n != 40 {
		t.Fatalf("filter log holds %d records, want 40", n)
	}
	if err := s.fs.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	d := s.fs.ExternalDurable()
	if d != 40 {
		t.Fatalf("ExternalDurable after a checkpoint = %d, want 40", d)
	}
	s.trimEvery = 1
	if err := s.Put(key(40), value(40)); err != nil { // seq 41, trims
		t.Fatal(err)
	}
	seqs := logRecords(t, s)
	for _, seq := range seqs {
		if seq <= d {
			t.Errorf("filter log still holds seq %d <= ExternalDurable %d", seq, d)
		}
	}
	if len(seqs) != 1 || seqs[0] != 41 {
		t.Errorf("filter log holds seqs %v, want [41]", seqs)
	}
	s = reopen(t, s)
	checkExact(t, s)
	for i := range 41 {
		if _, found, err := s.Get(key(i)); !found || err != nil {
			t.Errorf("Get %s = %v, %v", key(i), found, err)
		}
	}
}

// TestExternalModeSwitch: a directory ModeExternal left with records the
// filters lack opens in ModeBatch with them applied, and back.
func TestExternalModeSwitch(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, ModeExternal)
	if err := s.Put(key(1), value(1)); err != nil {
		t.Fatal(err)
	}
	s.crashPoint = func() error { return errors.New("crash") }
	if err := s.Put(key(2), value(2)); err == nil {
		t.Fatal("Put with a crash point: nil error")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, ModeBatch)
	if n := s.Stats().Replayed; n != 1 {
		t.Errorf("ModeBatch's Open replayed %d records, want 1", n)
	}
	checkExact(t, s)
	if err := s.Put(key(3), value(3)); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	if n := s.Stats().Replayed; n != 0 {
		t.Errorf("second ModeBatch Open replayed %d records, want 0", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, ModeExternal)
	if err := s.Put(key(4), value(4)); err != nil {
		t.Fatal(err)
	}
	checkExact(t, s)
	for i := 1; i <= 4; i++ {
		if _, found, err := s.Get(key(i)); !found || err != nil {
			t.Errorf("Get %s = %v, %v", key(i), found, err)
		}
	}
}

// TestExternalApplyRefused: when the filter store refuses a record pebble
// committed (a failed store, whose lookups still answer from what it
// holds), the Put reports it, every later Get reads pebble (the filters
// lack the key), and the next Open replays the record.
func TestExternalApplyRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, ModeExternal)
	if err := s.Put(key(1), value(1)); err != nil {
		t.Fatal(err)
	}
	errFailed := errors.New("store failed")
	s.applyFault = func(rec []byte) ([]bool, error) {
		if err := s.fs.AbortExternal(rec); err != nil {
			t.Error(err)
		}
		return nil, errFailed
	}
	if err := s.Put(key(2), value(2)); !errors.Is(err, errFailed) {
		t.Fatalf("Put with the filter store refusing: %v", err)
	}
	before := s.Stats().PebbleReads
	for _, i := range []int{1, 2} {
		if v, found, err := s.Get(key(i)); !found || err != nil || string(v) != string(value(i)) {
			t.Errorf("Get %s = %q, %v, %v", key(i), v, found, err)
		}
	}
	if _, found, err := s.Get(key(99)); found || err != nil {
		t.Errorf("Get of a key never put = %v, %v", found, err)
	}
	if got := s.Stats().PebbleReads - before; got != 3 {
		t.Errorf("Gets read pebble %d times, want 3: filters that may lack a key must not answer", got)
	}
	if !s.Seen(key(2)) {
		t.Error("Seen of a key pebble holds = false")
	}
	s = reopen(t, s)
	if n := s.Stats().Replayed; n != 1 {
		t.Errorf("Open replayed %d records, want 1", n)
	}
	checkExact(t, s)
}

// TestReservedKeys: keys in the filter log's key space are refused in
// every mode, and nothing is written.
func TestReservedKeys(t *testing.T) {
	for _, mode := range Modes() {
		s := open(t, t.TempDir(), mode)
		k := logKey(1)
		if err := s.Put(k, value(1)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: Put of a filter log key: %v, want ErrInvalid", mode, err)
		}
		if err := s.Delete(k); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: Delete of a filter log key: %v, want ErrInvalid", mode, err)
		}
		if _, _, err := s.Get(k); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: Get of a filter log key: %v, want ErrInvalid", mode, err)
		}
		if keys := pebbleKeys(t, s); len(keys) != 0 {
			t.Errorf("%v: pebble holds %q", mode, keys)
		}
	}
}

// TestExternalDeleteWhileUntrusted: after the filter store refused an
// apply (the filters untrusted), a Delete of the key whose apply was
// refused deletes it from pebble. Before, Delete asked the cuckoo filter,
// which lacked the key, and returned nil leaving it there (an adversarial
// review's finding; the test failed so).
func TestExternalDeleteWhileUntrusted(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, ModeExternal)
	if err := s.Put(key(1), value(1)); err != nil {
		t.Fatal(err)
	}
	errFailed := errors.New("store failed")
	s.applyFault = func(rec []byte) ([]bool, error) {
		if err := s.fs.AbortExternal(rec); err != nil {
			t.Error(err)
		}
		return nil, errFailed
	}
	if err := s.Put(key(2), value(2)); !errors.Is(err, errFailed) {
		t.Fatalf("Put with the filter store refusing: %v", err)
	}
	s.applyFault = nil
	if err := s.Delete(key(2)); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, found, err := s.Get(key(2)); found || err != nil {
		t.Errorf("Get %s after a Delete that returned nil = found %v, %v; want not found", key(2), found, err)
	}
	s = reopen(t, s)
	if _, found, err := s.Get(key(2)); found || err != nil {
		t.Errorf("after reopen, Get %s after a Delete that returned nil = found %v, %v; want not found", key(2), found, err)
	}
}
