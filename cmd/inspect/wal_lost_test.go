package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// deadWriterCopy returns a copy of a store whose writer logged adds
// after its last checkpoint and "died" (the copy keeps SESSION), with
// several WAL segments.
func deadWriterCopy(t *testing.T) string {
	t.Helper()
	live := t.TempDir()
	s, err := store.Open(live, &store.Options{SegmentSize: 64 << 10, CheckpointEvery: -1, Sync: store.SyncInterval})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.CreateBloom("b", store.BloomConfig{Capacity: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, 4000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("late-%d", i))
	}
	for _, k := range keys {
		if _, err := b.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	// Make what the copy holds durable (a dead writer's page cache).
	_, _ = b.AddMany([][]byte{[]byte("sync")})
	dead := filepath.Join(t.TempDir(), "dead")
	if err := copyDir(live, dead); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dead, "SESSION")); err != nil {
		t.Fatalf("no SESSION in the copy: %v", err)
	}
	return dead
}

// TestWalAndStatsReportLostSegments: a dead writer's store whose newest
// WAL segment, or whole wal/, was removed fails every Open with
// ErrCorrupt (the SESSION marker records the newest segment the writer
// started). 'inspect wal', whose help says segments are checked as
// recovery checks them, and 'inspect stats', which shows the data with
// the WAL applied, exit 1 naming the loss. Before, both exited 0 (an
// adversarial review's finding).
func TestWalAndStatsReportLostSegments(t *testing.T) {
	for _, what := range []string{"newest-segment", "all-segments"} {
		t.Run(what, func(t *testing.T) {
			dir := deadWriterCopy(t)
			ents, err := os.ReadDir(filepath.Join(dir, "wal"))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			sort.Strings(names)
			if len(names) < 2 {
				t.Fatalf("want several segments, have %v", names)
			}
			rm := names[len(names)-1:]
			if what == "all-segments" {
				rm = names
			}
			for _, n := range rm {
				if err := os.Remove(filepath.Join(dir, "wal", n)); err != nil {
					t.Fatal(err)
				}
			}
			_, roErr := store.Open(dir, &store.Options{ReadOnly: true})
			if !errors.Is(roErr, store.ErrCorrupt) {
				t.Fatalf("read-only Open: %v, want ErrCorrupt", roErr)
			}
			r := runCLI("wal", dir)
			if r.code != 1 || !strings.Contains(r.String(), "lost") {
				t.Errorf("inspect wal on a store whose Open fails with ErrCorrupt (WAL lost): exit %d, want 1:\n%s", r.code, r)
			}
			r = runCLI("stats", dir, "b")
			if r.code != 1 || !strings.Contains(r.String(), "lost") {
				t.Errorf("inspect stats on a store whose Open fails with ErrCorrupt (WAL lost): exit %d, want 1 naming the loss:\n%s", r.code, r)
			}
		})
	}
}
