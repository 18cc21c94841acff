package wal

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestOSFSMkdirAllSyncsEveryLevel: MkdirAll makes every directory it
// creates durable, by syncing the parent of each, and syncs nothing when
// there is nothing to create.
func TestOSFSMkdirAllSyncsEveryLevel(t *testing.T) {
	root := t.TempDir()
	var synced []string
	orig := syncDirHook
	syncDirHook = func(dir string) error {
		synced = append(synced, dir)
		return orig(dir)
	}
	defer func() { syncDirHook = orig }()
	fs := OSFS{}
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"a/b/c", []string{".", "a", "a/b"}},
		{"a/b/c", nil},                   // exists
		{"a/x/y/", []string{"a", "a/x"}}, // partly exists
		{"a/b", nil},
	} {
		synced = nil
		if err := fs.MkdirAll(filepath.Join(root, tc.dir)); err != nil {
			t.Fatalf("MkdirAll(%s): %v", tc.dir, err)
		}
		if fi, err := os.Stat(filepath.Join(root, tc.dir)); err != nil || !fi.IsDir() {
			t.Fatalf("MkdirAll(%s) made no directory: %v", tc.dir, err)
		}
		var want []string
		for _, d := range tc.want {
			want = append(want, filepath.Join(root, d))
		}
		if !slices.Equal(synced, want) {
			t.Errorf("MkdirAll(%s) synced %v, want %v", tc.dir, synced, want)
		}
	}
	os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
	if err := fs.MkdirAll(filepath.Join(root, "file", "sub")); err == nil {
		t.Errorf("MkdirAll under a file succeeded")
	}
}
