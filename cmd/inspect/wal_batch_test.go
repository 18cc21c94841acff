package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// TestWALBatch: a batch record beside the live writer is dumped as one
// line with its parts, counted once among the records and per part in
// its filters' rows, and verify reads it into the overlays (no
// problems).
func TestWALBatch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "batch")
	s, err := store.Open(dir, &store.Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 10})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 10})
	m, _ := s.CreateBitmap("m", 100)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	bt := s.NewBatch()
	bt.BloomAdd(b, []byte("x"))
	bt.CuckooAdd(c, []byte("x"))
	bt.BitmapSet(m, 3)
	bt.BitmapSet(m, 3) // changes nothing: no part
	if _, err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 0, "wal", "--dump", dir)
	golden(t, "wal_dump_batch", r.stdout)
	r = mustRun(t, 0, "wal", "--dump", "--json", dir)
	var d walDumpJSON
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &d); err != nil {
		t.Fatal(err)
	}
	if d.Op != "batch" || len(d.Parts) != 3 || d.Parts[0].Filter != "b" || d.Parts[2].Op != "words" || !d.Pending {
		t.Fatalf("batch record dumped as %+v", d)
	}
	r = mustRun(t, 0, "wal", "--json", dir)
	var out walOut
	decode(t, r.stdout, &out)
	if out.Records != 1 || out.Batches != 1 || out.Pending != 1 || len(out.Filters) != 3 {
		t.Fatalf("wal summary: %+v", out)
	}
	mustRun(t, 0, "verify", dir)
	r = mustRun(t, 0, "check", dir, "c", "x")
	if !strings.Contains(r.stdout, "maybe") && !strings.Contains(r.stdout, "present") {
		t.Fatalf("check of a key the batch added: %s", r.stdout)
	}
}
