package blackbox_test

import (
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

// Encode/ApplyExternal need SyncInterval: under SyncAlways both are
// ErrInvalid.
func TestExternalNeedsSyncInterval(t *testing.T) {
	s, _ := newStore(t, nil)
	b, _ := s.CreateBloom("b", store.BloomConfig{})
	bt := s.NewBatch()
	bt.BloomAdd(b, []byte("x"))
	_, err := bt.Encode()
	wantIs(t, "Encode under SyncAlways", err, store.ErrInvalid)
	if b.Has([]byte("x")) {
		t.Error("refused Encode changed the filter")
	}
	// A record from a SyncInterval store applied to a SyncAlways store.
	si, _ := newStore(t, &store.Options{Sync: store.SyncInterval})
	b2, _ := si.CreateBloom("b", store.BloomConfig{})
	bt = si.NewBatch()
	bt.BloomAdd(b2, []byte("x"))
	rec, err := bt.Encode()
	must(t, err)
	_, err = s.ApplyExternal(rec)
	wantIs(t, "ApplyExternal under SyncAlways", err, store.ErrInvalid)
	must(t, si.AbortExternal(rec))
}

// ExternalSeq: a torn or foreign record is ErrCorrupt; seqs increase from 1.
// ApplyExternal: results as Commit; Encode changes nothing; a replay of an
// applied record changes nothing and returns nil results; an aborted record
// applied is ErrInvalid; a record encoded once (Encode twice ErrInvalid).
func TestExternalProtocol(t *testing.T) {
	s, dir := newStore(t, &store.Options{Sync: store.SyncInterval})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	b, _ := s.CreateBloom("b", store.BloomConfig{})
	for _, bad := range [][]byte{nil, []byte("x"), make([]byte, 64)} {
		_, err := store.ExternalSeq(bad)
		wantIs(t, "ExternalSeq(garbage)", err, store.ErrCorrupt)
		_, err = s.ApplyExternal(bad)
		wantIs(t, "ApplyExternal(garbage)", err, store.ErrCorrupt)
	}
	bt := s.NewBatch()
	bt.CuckooAdd(c, []byte("k"))
	bt.BloomAdd(b, []byte("k"))
	bt.BloomAdd(b, []byte("k"))
	rec, err := bt.Encode()
	must(t, err)
	_, err = bt.Encode()
	wantIs(t, "second Encode", err, store.ErrInvalid)
	_, err = bt.Commit()
	wantIs(t, "Commit after Encode", err, store.ErrInvalid)
	seq, err := store.ExternalSeq(rec)
	must(t, err)
	if seq != 1 {
		t.Errorf("first seq %d, want 1", seq)
	}
	if c.Has([]byte("k")) || b.Has([]byte("k")) {
		t.Error("Encode changed a filter")
	}
	res, err := s.ApplyExternal(rec)
	must(t, err)
	if len(res) != 3 || !res[0] || !res[1] || res[2] {
		t.Errorf("results %v, want [true true false]", res)
	}
	if !c.Has([]byte("k")) || !b.Has([]byte("k")) {
		t.Error("ApplyExternal not visible")
	}
	res, err = s.ApplyExternal(rec)
	if err != nil || res != nil {
		t.Errorf("replay of applied record = %v, %v, want nil, nil", res, err)
	}
	if c.Count([]byte("k")) != 1 {
		t.Errorf("replay applied twice: Count %d", c.Count([]byte("k")))
	}
	// Abort then apply.
	bt = s.NewBatch()
	bt.CuckooAdd(c, []byte("aborted"))
	rec2, _ := bt.Encode()
	must(t, s.AbortExternal(rec2))
	_, err = s.ApplyExternal(rec2)
	wantIs(t, "ApplyExternal of aborted", err, store.ErrInvalid)
	if c.Has([]byte("aborted")) {
		t.Error("aborted record applied")
	}
	must(t, s.AbortExternal(rec2)) // "An abort of a record ... aborted already ... changes nothing"
	// Later record applies after the aborted one.
	bt = s.NewBatch()
	bt.CuckooDelete(c, []byte("k"))
	rec3, _ := bt.Encode()
	seq3, _ := store.ExternalSeq(rec3)
	if seq3 != 3 {
		t.Errorf("third seq %d", seq3)
	}
	res, err = s.ApplyExternal(rec3)
	if err != nil || len(res) != 1 || !res[0] {
		t.Errorf("apply delete = %v, %v", res, err)
	}
	must(t, s.Close())
	s = openStore(t, dir, &store.Options{Sync: store.SyncInterval})
	defer s.Close()
	if d := s.ExternalDurable(); d != 3 {
		t.Errorf("ExternalDurable after clean Close = %d, want 3", d)
	}
	c2, _ := s.Cuckoo("c")
	if c2.Has([]byte("k")) {
		t.Error("external delete lost over reopen")
	}
	// Replay of a record at or below ExternalDurable changes nothing.
	res, err = s.ApplyExternal(rec)
	if err != nil || res != nil {
		t.Errorf("replay after reopen = %v, %v", res, err)
	}
	if c2.Has([]byte("k")) {
		t.Error("replayed old record re-added k")
	}
	// The passed-over (aborted) seq 2 replayed: ErrInvalid? Doc: "one at or
	// below the highest seq applied whose seq was passed over ... is refused
	// with ErrInvalid"; but after a restart the store remembers only the
	// process's gaps. Record what happens.
	_, err = s.ApplyExternal(rec2)
	t.Logf("replay of aborted seq 2 after restart: %v", err)
	if c2.Has([]byte("aborted")) {
		t.Error("aborted record applied when replayed after a restart")
	}
}

// Encode checks now: a bitmap offset out of range (ErrInvalid), a dropped
// filter (ErrClosed, as the Encode doc says).
func TestExternalEncodeChecks(t *testing.T) {
	s, _ := newStore(t, &store.Options{Sync: store.SyncInterval})
	m, _ := s.CreateBitmap("m", 10)
	bt := s.NewBatch()
	bt.BitmapSet(m, 10)
	_, err := bt.Encode()
	wantIs(t, "Encode bitmap out of range", err, store.ErrInvalid)
	b, _ := s.CreateBloom("b", store.BloomConfig{})
	must(t, s.Drop("b"))
	bt = s.NewBatch()
	bt.BloomAdd(b, []byte("x"))
	_, err = bt.Encode()
	wantIs(t, "Encode on a dropped filter", err, store.ErrClosed)
	// Empty batch encode.
	rec, err := s.NewBatch().Encode()
	t.Logf("Encode of empty batch: %d bytes, %v", len(rec), err)
	if err == nil {
		res, err := s.ApplyExternal(rec)
		t.Logf("apply empty: %v %v", res, err)
	}
}

// Records apply in seq order: ApplyExternal of record 2 waits for record 1.
func TestExternalOrdering(t *testing.T) {
	s, _ := newStore(t, &store.Options{Sync: store.SyncInterval})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	b1 := s.NewBatch()
	b1.CuckooAdd(c, []byte("one"))
	r1, _ := b1.Encode()
	b2 := s.NewBatch()
	b2.CuckooAdd(c, []byte("two"))
	r2, _ := b2.Encode()
	done := make(chan error, 1)
	go func() { _, err := s.ApplyExternal(r2); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("record 2 applied before record 1: %v", err)
	default:
	}
	if c.Has([]byte("two")) {
		t.Error("record 2 visible before record 1 applied")
	}
	_, err := s.ApplyExternal(r1)
	must(t, err)
	must(t, <-done)
	if !c.Has([]byte("one")) || !c.Has([]byte("two")) {
		t.Error("records not applied")
	}
}

// ApplyExternal of an op that cannot apply (NonScaling full) marks the filter
// incomplete and reports false.
func TestExternalFullMarksIncomplete(t *testing.T) {
	s, _ := newStore(t, &store.Options{Sync: store.SyncInterval})
	f, _ := s.CreateBloom("f", store.BloomConfig{Capacity: 10, NonScaling: true})
	bt := s.NewBatch()
	for i := range 100 {
		bt.BloomAdd(f, keyN("x", i))
	}
	rec, err := bt.Encode()
	must(t, err)
	res, err := s.ApplyExternal(rec)
	t.Logf("apply over-full: %d results, err %v", len(res), err)
	in, _ := f.Info()
	if in.State != "incomplete" {
		t.Errorf("state %q, want incomplete", in.State)
	}
	if !f.Has([]byte("never-zz")) {
		t.Error("incomplete filter must answer maybe")
	}
}

// "every op of the record on a filter that is incomplete, broken or dropped
// is skipped" and reports false; the other ops apply.
func TestExternalSkipsDroppedFilter(t *testing.T) {
	s, _ := newStore(t, &store.Options{Sync: store.SyncInterval})
	a, _ := s.CreateBloom("a", store.BloomConfig{})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	bt := s.NewBatch()
	bt.BloomAdd(a, []byte("x"))
	bt.CuckooAdd(c, []byte("y"))
	rec, err := bt.Encode()
	must(t, err)
	must(t, s.Drop("a"))
	res, err := s.ApplyExternal(rec)
	if err != nil || len(res) != 2 || res[0] || !res[1] {
		t.Errorf("apply with a dropped filter = %v, %v, want [false true], nil", res, err)
	}
	if !c.Has([]byte("y")) {
		t.Error("op on the live filter not applied")
	}
}

// Encode of a batch deleting from a cuckoo or counting filter that an
// ordinary call changed since the last sync "costs one fdatasync";
// otherwise "Encode does no I/O".
func TestExternalEncodeDeleteSyncs(t *testing.T) {
	s, _ := newStore(t, &store.Options{Sync: store.SyncInterval, SyncEvery: time.Hour, CheckpointEvery: -1})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	must(t, c.Add([]byte("k")))
	st0 := s.Stats().WAL
	bt := s.NewBatch()
	bt.CuckooAdd(c, []byte("z"))
	rec, err := bt.Encode()
	must(t, err)
	if s.Stats().WAL.Syncs != st0.Syncs {
		t.Error("Encode of an add synced")
	}
	_, err = s.ApplyExternal(rec)
	must(t, err)
	st1 := s.Stats().WAL
	bt = s.NewBatch()
	bt.CuckooDelete(c, []byte("k"))
	rec, err = bt.Encode()
	must(t, err)
	if d := s.Stats().WAL.Syncs - st1.Syncs; d != 1 {
		t.Errorf("Encode of a delete after an ordinary add: %d fdatasyncs, want 1", d)
	}
	st2 := s.Stats().WAL
	_, err = s.ApplyExternal(rec)
	must(t, err)
	bt = s.NewBatch()
	bt.CuckooDelete(c, []byte("z"))
	_, err = bt.Encode()
	must(t, err)
	if d := s.Stats().WAL.Syncs - st2.Syncs; d != 0 {
		t.Errorf("Encode of a delete with no ordinary change since the sync: %d fdatasyncs, want 0", d)
	}
}
