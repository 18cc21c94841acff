package store

import (
	"errors"
	"testing"
	"time"
)

// TestExternalAbortedNeverApplies: a record is applied or aborted, never
// both. An ApplyExternal of an aborted record returns ErrInvalid and
// applies nothing, whether it comes after the abort or waits for its turn
// while the abort happens; an abort of a record being applied returns
// ErrInvalid; the records after them apply. Before, an aborted record
// applied if no later seq had applied yet (a delete then dropped a key
// the engine still held), and an abort of a waiting record returned nil
// while its ApplyExternal applied it (an adversarial review's finding).
func TestExternalAbortedNeverApplies(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
	defer s.Close()
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
	must(t, err)
	must(t, c.Add([]byte("held")))
	encode := func(f func(b *Batch)) []byte {
		t.Helper()
		b := s.NewBatch()
		f(b)
		rec, err := b.Encode()
		must(t, err)
		return rec
	}

	// After the abort: a delete of a key the engine holds.
	del := encode(func(b *Batch) { b.CuckooDelete(c, []byte("held")) })
	must(t, s.AbortExternal(del))
	if res, err := s.ApplyExternal(del); !errors.Is(err, ErrInvalid) || res != nil {
		t.Fatalf("ApplyExternal of an aborted record: %v, %v; want ErrInvalid", res, err)
	}
	if !c.Has([]byte("held")) || c.Count([]byte("held")) != 1 {
		t.Fatal("an aborted delete removed the key")
	}

	// While it waits: seq A pending, seq B's ApplyExternal waits behind
	// it, then B is aborted.
	recA := encode(func(b *Batch) { b.CuckooAdd(c, []byte("a")) })
	recB := encode(func(b *Batch) { b.CuckooDelete(c, []byte("held")) })
	type result struct {
		res []bool
		err error
	}
	// Two calls of the record wait (an engine's retry beside the first):
	// one holds its place in the queue, the other only sleeps.
	waited := make(chan result, 2)
	for range 2 {
		go func() {
			res, err := s.ApplyExternal(recB)
			waited <- result{res, err}
		}()
	}
	seqB, _, err := s.decodeExternal(recB)
	must(t, err)
	for asleep := false; !asleep; time.Sleep(time.Millisecond) {
		time.Sleep(20 * time.Millisecond) // for the second call to sleep too
		s.ext.mu.Lock()
		_, asleep = s.ext.queued[seqB]
		s.ext.mu.Unlock()
	}
	must(t, s.AbortExternal(recB))
	// Both calls wake. Let them settle (return, or queue again) before
	// the record before recB applies: a combiner then takes the queued
	// records after it, and neither waiting call may apply recB.
	for deadline := time.Now().Add(10 * time.Second); len(waited) < 2; time.Sleep(time.Millisecond) {
		s.ext.mu.Lock()
		_, queuedAgain := s.ext.queued[seqB]
		s.ext.mu.Unlock()
		if queuedAgain || time.Now().After(deadline) {
			break
		}
	}
	if res, err := s.ApplyExternal(recA); err != nil || len(res) != 1 || !res[0] {
		t.Fatalf("ApplyExternal of the record before: %v, %v", res, err)
	}
	for range 2 {
		select {
		case r := <-waited:
			if !errors.Is(r.err, ErrInvalid) || r.res != nil {
				t.Fatalf("ApplyExternal waiting when its record was aborted: %v, %v; want ErrInvalid", r.res, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("an ApplyExternal of the aborted record still waits 10 s after the record before it applied")
		}
	}
	if !c.Has([]byte("held")) || !c.Has([]byte("a")) {
		t.Fatal("after the aborted delete and the add before it: a key is missing")
	}

	// While it applies: the abort is too late.
	recC := encode(func(b *Batch) { b.CuckooAdd(c, []byte("c")) })
	var abortErr error
	s.ext.beforeRun = func() { abortErr = s.AbortExternal(recC) }
	res, err := s.ApplyExternal(recC)
	s.ext.mu.Lock()
	s.ext.beforeRun = nil
	s.ext.mu.Unlock()
	if err != nil || len(res) != 1 || !res[0] || !c.Has([]byte("c")) {
		t.Fatalf("ApplyExternal of a record aborted while it applied: %v, %v", res, err)
	}
	if !errors.Is(abortErr, ErrInvalid) {
		t.Fatalf("AbortExternal of a record being applied: %v, want ErrInvalid", abortErr)
	}

	// And records after all of them apply in order.
	recD := encode(func(b *Batch) { b.CuckooAdd(c, []byte("d")) })
	if res, err := s.ApplyExternal(recD); err != nil || len(res) != 1 || !res[0] {
		t.Fatalf("ApplyExternal after the aborts: %v, %v", res, err)
	}
}
