package store

import "testing"

// TestStats checks the counters against changes whose WAL cost is known:
// under SyncAlways, single adds from one goroutine take a record and an
// fdatasync each (after the first write, which also syncs the segment's
// reserved space), a Batch one of each for all its ops; a checkpoint moves
// CheckpointLSN; a read-only store has no WAL counters.
func TestStats(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, &Options{Sync: SyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.CreateBloom("f", BloomConfig{Capacity: 1000})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Add([]byte("first")); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := f.Add([]byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	after := s.Stats()
	if got := after.WAL.Records - before.WAL.Records; got != 3 {
		t.Errorf("3 adds: %d WAL records, want 3", got)
	}
	if got := after.WAL.Syncs - before.WAL.Syncs; got != 3 {
		t.Errorf("3 adds under SyncAlways from one goroutine: %d fdatasyncs, want 3", got)
	}

	before = after
	b := s.NewBatch()
	for _, k := range []string{"x", "y", "z"} {
		b.BloomAdd(f, []byte(k))
		b.CuckooAdd(c, []byte(k))
	}
	if _, err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	after = s.Stats()
	if got := after.WAL.Records - before.WAL.Records; got != 1 {
		t.Errorf("a Batch of 6 ops: %d WAL records, want 1", got)
	}
	if got := after.WAL.Syncs - before.WAL.Syncs; got != 1 {
		t.Errorf("a Batch of 6 ops: %d fdatasyncs, want 1", got)
	}
	if after.WAL.Bytes <= before.WAL.Bytes || after.WAL.Writes <= before.WAL.Writes {
		t.Errorf("a Batch: WAL bytes %d -> %d, writes %d -> %d: want both to grow",
			before.WAL.Bytes, after.WAL.Bytes, before.WAL.Writes, after.WAL.Writes)
	}

	ckpt := after.CheckpointLSN
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().CheckpointLSN; got <= ckpt {
		t.Errorf("CheckpointLSN %d after a checkpoint of 5 more records, %d before: want it to grow", got, ckpt)
	}
	last := s.Stats()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got.WAL.Records != last.WAL.Records || got.CheckpointLSN < last.CheckpointLSN {
		t.Errorf("after Close: %+v, want the counters Close left (%+v before it)", got, last)
	}

	r, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Stats(); got.WAL.Records != 0 || got.WAL.Syncs != 0 || got.CheckpointLSN == 0 {
		t.Errorf("read-only store: %+v, want no WAL counters and the checkpoint's LSN", got)
	}
}
