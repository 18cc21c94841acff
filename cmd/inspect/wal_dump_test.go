package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// TestWalDumpExternal: wal --dump shows an external record (a batch that
// rode in an engine's log) with its sequence number and its parts, as
// text and as JSON; it was shown as a words record of filter 0 with its
// parts left out.
func TestWalDumpExternal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ext")
	s, err := store.Open(dir, &store.Options{Sync: store.SyncInterval, CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateBloom("b", store.BloomConfig{Capacity: 100})
	if err != nil {
		t.Fatal(err)
	}
	bt := s.NewBatch()
	bt.BloomAdd(b, []byte("x"))
	bt.BloomAdd(b, []byte("y"))
	rec, err := bt.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyExternal(rec); err != nil {
		t.Fatal(err)
	}
	seq, err := store.ExternalSeq(rec)
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(t.TempDir(), "copy") // the store as a crash leaves it
	if err := copyDir(dir, copied); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	r := mustRun(t, 0, "wal", copied, "--dump")
	want := " op=external seq=" + strconv.FormatUint(seq, 10) + " parts=2 | filter=b id=1 layer=0 op=hash hash="
	if !strings.Contains(r.stdout, want) {
		t.Errorf("wal --dump does not show the external record as %q:\n%s", want, r.stdout)
	}
	r = mustRun(t, 0, "wal", copied, "--dump", "--json")
	found := false
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var d struct {
			Op    string           `json:"op"`
			Seq   *uint64          `json:"seq"`
			Parts []map[string]any `json:"parts"`
		}
		decode(t, line, &d)
		if d.Op != "external" {
			continue
		}
		found = true
		if d.Seq == nil || *d.Seq != seq || len(d.Parts) != 2 || d.Parts[0]["filter"] != "b" {
			t.Errorf("wal --dump --json line of the external record: %s", line)
		}
	}
	if !found {
		t.Errorf("wal --dump --json has no external record:\n%s", r.stdout)
	}
}

// TestWalDroppedNotPending: the records of a filter dropped after them
// are not pending (replay skips them), in wal --dump and in its counts;
// they were marked pending and counted among the records the next Open
// replays.
func TestWalDroppedNotPending(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "live")
	s, err := store.Open(dir, &store.Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := s.CreateBloom("d", store.BloomConfig{Capacity: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Add([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Drop("d"); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(t.TempDir(), "copy")
	if err := copyDir(dir, copied); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 0, "wal", copied, "--dump")
	if !strings.Contains(r.stdout, "filter=- id=1 layer=0 op=hash") || strings.Contains(r.stdout, "pending") {
		t.Errorf("wal --dump of a dropped filter's record:\n%s", r.stdout)
	}
	var out struct {
		Pending int `json:"after_checkpoint"`
	}
	r = mustRun(t, 0, "wal", copied, "--json")
	decode(t, r.stdout, &out)
	if out.Pending != 0 {
		t.Errorf("wal --json counts %d pending records, want 0 (the only one is a dropped filter's):\n%s", out.Pending, r.stdout)
	}
}
