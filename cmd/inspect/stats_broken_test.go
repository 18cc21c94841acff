package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/mmapbits"
)

// TestStatsOfBrokenFilter: a layer file the store opens broken (the
// header of another kind's file, of another store's filter, or a stamp
// older than the catalog's checkpoint) is exit 1 from stats with the
// reason, as from ls, info, check and verify; stats printed that file's
// fill under the filter's name with exit 0 before (an adversarial
// review's finding).
func TestStatsOfBrokenFilter(t *testing.T) {
	other := cleanStore(t)
	for _, tc := range []struct {
		name   string
		src    func(dir string) []byte
		reason string // in stats' error line
	}{
		{"a bitmap's file", func(dir string) []byte { return readAll(t, layerFile(t, dir, "m", 0)) }, "header field"},
		{"another store's layer", func(string) []byte { return readAll(t, layerFile(t, other, "c", 0)) }, "header field"},
		{"a stamp older than the catalog", func(dir string) []byte {
			b := readAll(t, layerFile(t, dir, "c", 0))
			clear(b[mmapbits.StampOffset : mmapbits.StampOffset+8])
			return b
		}, "older than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := cleanStore(t)
			if err := os.WriteFile(layerFile(t, dir, "c", 0), tc.src(dir), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"ls", dir}, {"info", dir, "c"}, {"check", dir, "c", "k"}, {"verify", dir}} {
				if r := runCLI(args...); r.code != 1 {
					t.Fatalf("inspect %s: want exit 1, got:\n%s", strings.Join(args, " "), r)
				}
			}
			for _, args := range [][]string{{"stats", dir, "c"}, {"--json", "stats", dir, "c"}} {
				r := runCLI(args...)
				t.Logf("inspect %s: exit %d: %s", args[len(args)-3], r.code, strings.TrimSpace(r.stderr))
				if r.code != 1 || !strings.Contains(r.stderr, "broken") || !strings.Contains(r.stderr, tc.reason) {
					t.Errorf("inspect %s: want exit 1 naming the filter broken (%q), got:\n%s", strings.Join(args, " "), tc.reason, r)
				}
				if strings.Contains(r.stdout, "used slots") || strings.Contains(r.stdout, "set bits") || strings.Contains(r.stdout, "histogram") {
					t.Errorf("inspect %s: a broken filter's fill was shown:\n%s", strings.Join(args, " "), r)
				}
			}
		})
	}
}

// TestStatsStoreThatCannotOpen: a SESSION marker that is a directory
// makes the store's Open refuse the store; stats exits as info does
// (it read on and exited 0 before).
func TestStatsStoreThatCannotOpen(t *testing.T) {
	dir := cleanStore(t)
	if err := os.Mkdir(filepath.Join(dir, "SESSION"), 0o755); err != nil {
		t.Fatal(err)
	}
	info := runCLI("info", dir, "c")
	stats := runCLI("stats", dir, "c")
	if info.code != 1 || stats.code != info.code {
		t.Fatalf("SESSION a directory: info and stats must both exit 1; info:\n%s\nstats:\n%s", info, stats)
	}
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWalSessionUnreadable: wal on a store whose SESSION marker is a
// directory (a writer's Open refuses it) exits 1 and names the marker,
// as info does. Before, the unreadable marker was a note, with exit 0
// (listed open in the twenty-third session).
func TestWalSessionUnreadable(t *testing.T) {
	dir := cleanStore(t)
	if err := os.Mkdir(filepath.Join(dir, "SESSION"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := runCLI("wal", dir)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "SESSION") {
		t.Fatalf("wal with SESSION a directory: want exit 1 naming SESSION, got:\n%s", r)
	}
}
