package store

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/wal"
)

// TestLoadAfterBackgroundSyncFailureLeavesFilterWhole: under SyncInterval,
// a Load started once the WAL's background fdatasync has failed, before
// the store's tick has noticed, fails with ErrFailed without changing
// anything: after the process dies the filter reopens as it was, "ok",
// every acknowledged key found, not incomplete. A Load marks the catalog
// before it logs its record; a start that marked it for a log that had
// already failed would leave a filter incomplete (every lookup "maybe",
// every change ErrIncomplete until it is dropped and rebuilt) though no
// Load changed a word of it.
func TestLoadAfterBackgroundSyncFailureLeavesFilterWhole(t *testing.T) {
	for attempt := 0; ; attempt++ {
		w := newSimWorld(t, SyncInterval)
		w.opts.SyncEvery = time.Millisecond
		fail := &failSwitch{err: syscall.EIO}
		w.fs.SetInjector(fail.wal(wal.OpSync))
		s, err := w.open(t)
		must(t, err)
		b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
		must(t, err)
		for i := range 50 {
			must(t, second(b.Add(key(i))))
		}
		must(t, s.Checkpoint())
		fail.on.Store(true)
		// A record for the background fdatasync to fail on.
		must(t, second(b.Add(key(60))))
		deadline := time.Now().Add(5 * time.Second)
		for s.log.Err() == nil {
			if time.Now().After(deadline) {
				t.Fatal("the background fdatasync never ran")
			}
			time.Sleep(50 * time.Microsecond)
		}
		fail.on.Store(false)
		if s.failed() != nil {
			// The store's tick noticed first: the Load would be refused
			// before its start either way. Try again.
			w.kill(s)
			if attempt == 5 {
				t.Skip("the store noticed the failed fdatasync before each Load")
			}
			continue
		}
		lerr := b.Load(rangeKeys(100, 200))
		if !errors.Is(lerr, ErrFailed) {
			t.Fatalf("Load after the background fdatasync failed: %v; want ErrFailed", lerr)
		}
		w.kill(s)
		s, err = w.open(t)
		must(t, err)
		defer s.Close()
		b, err = s.Bloom("b")
		must(t, err)
		if in := mustInfo(t, b); in.State != "ok" {
			t.Fatalf("after a Load refused for a failed WAL and a crash the filter is %q, want ok (no word of it was changed)", in.State)
		}
		for i := range 50 {
			if !b.Has(key(i)) {
				t.Fatalf("acknowledged key %d absent", i)
			}
		}
		if _, err := b.Add(key(300)); err != nil {
			t.Fatalf("an add after the reopen: %v", err)
		}
		return
	}
}
