package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestInspectWritesNothing checks the package doc's "inspect never writes
// into the store (stats --png refuses a FILE inside DIR), never takes the
// writer lock (DIR/LOCK) and never panics on a bad file" for every
// command, on a store as a dead writer leaves it, with the debris a
// writer's Open would clean up: records after its checkpoint (SESSION
// there), a torn WAL tail (garbage appended to the newest segment), a
// RESYNC marker, and no LOCK. After each command every file and
// directory must be as it was (mode, modification time, contents), and
// there must be no LOCK; no command may panic or exit 2.
func TestInspectWritesNothing(t *testing.T) {
	dir := testStore(t)
	if _, err := os.Lstat(filepath.Join(dir, "LOCK")); err == nil {
		t.Fatal("the test store has a LOCK")
	}
	must(t, os.WriteFile(filepath.Join(dir, "RESYNC"), []byte("an msync of a filter file failed: the next Open rewrites every page before trusting them\n"), 0o644))
	segs, err := filepath.Glob(filepath.Join(dir, "wal", "*.log"))
	must(t, err)
	if len(segs) == 0 {
		t.Fatal("the test store has no WAL segment")
	}
	slices.Sort(segs)
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write([]byte{9, 8, 7, 6, 5, 4, 3, 2, 1, 0xff})
	must(t, err)
	must(t, f.Close())
	if _, err := os.Stat(filepath.Join(dir, "SESSION")); err != nil {
		t.Fatalf("the test store has no SESSION: %v", err)
	}
	layer := layerFile(t, dir, "users", 0)
	png := filepath.Join(t.TempDir(), "stats.png")
	// Let a write after the snapshot show in a modification time even
	// where timestamps are coarse.
	time.Sleep(20 * time.Millisecond)
	before := storeSnapshot(t, dir)
	for _, args := range [][]string{
		{"ls", dir},
		{"ls", "--json", dir},
		{"info", dir, "users"},
		{"info", dir, "seen"},
		{"info", dir, "hits"},
		{"info", dir, "flags"},
		{"check", dir, "users", "user-001", "late-1", "nope"},
		{"check", dir, "seen", "seen-030", "late-1"},
		{"check", dir, "hits", "hit-050"},
		{"verify", dir},
		{"verify", dir, "seen"},
		{"wal", dir},
		{"wal", dir, "--dump"},
		{"file", layer},
		{"stats", dir, "users"},
		{"stats", dir, "seen", "--png", png},
		{"stats", dir, "flags"},
	} {
		cmd := strings.Join(args, " ")
		r := runCLI(args...)
		t.Logf("inspect %s: exit %d, stderr %q", cmd, r.code, r.stderr)
		for _, bad := range []string{"panic", "goroutine "} {
			if strings.Contains(r.stderr, bad) {
				t.Errorf("inspect %s: %s", cmd, r)
			}
		}
		if r.code != 0 && r.code != 1 {
			t.Errorf("inspect %s: exit %d on a readable store:\n%s", cmd, r.code, r)
		}
		after := storeSnapshot(t, dir)
		var changed []string
		for p, b := range before {
			if a, ok := after[p]; !ok {
				changed = append(changed, "removed "+p)
			} else if a != b {
				changed = append(changed, "changed "+p)
			}
		}
		for p := range after {
			if _, ok := before[p]; !ok {
				changed = append(changed, "created "+p)
			}
		}
		if len(changed) > 0 {
			slices.Sort(changed)
			t.Fatalf("inspect %s changed the store:\n%s", cmd, strings.Join(changed, "\n"))
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "LOCK")); err == nil {
		t.Fatal("inspect made LOCK")
	}
}
