package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestIncompleteBackupMarker: a directory holding BACKUP-INCOMPLETE is
// one every Open refuses (ErrCorrupt); inspect's commands that read the
// files themselves should not call it clean (as for an unreadable
// SESSION marker, 72f270b).
func TestIncompleteBackupMarker(t *testing.T) {
	dir := cleanStore(t)
	if err := os.WriteFile(filepath.Join(dir, "BACKUP-INCOMPLETE"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ls", dir}, {"verify", dir}, {"wal", dir}, {"check", dir, "c", "k"}, {"info", dir, "c"}} {
		r := runCLI(args...)
		t.Logf("inspect %v: exit %d\nstdout: %s\nstderr: %s", args[0], r.code, r.stdout, r.stderr)
		if r.code == 0 {
			t.Errorf("inspect %s exits 0 on a directory every Open refuses", args[0])
		}
	}
}
