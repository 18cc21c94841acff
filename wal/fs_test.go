package wal

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestOSFSErrorsNameTheSegment: a segment is created as <name>.tmp and
// renamed into place; a failed write or sync of it later names the
// segment's path, not the temporary file's, long gone. The file is broken
// by closing its descriptor under the log.
func TestOSFSErrorsNameTheSegment(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(dir string) (*Log, error)
	}{
		{"new log", func(dir string) (*Log, error) {
			return Open(dir, Options{FS: OSFS{}, Logger: quiet})
		}},
		{"rotated", func(dir string) (*Log, error) {
			l, err := Open(dir, Options{FS: OSFS{}, Logger: quiet, SegmentSize: MinSegmentSize})
			if err == nil {
				_, err = l.Append([]byte("rotate past the first segment"))
				if err == nil {
					err = l.Sync()
				}
				if err == nil {
					_, err = l.Append([]byte("into a second"))
				}
				if err == nil {
					err = l.Sync()
				}
			}
			return l, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := tc.open(dir)
			if err != nil {
				t.Fatal(err)
			}
			l.mu.Lock()
			active, _ := l.active.(*osFile)
			seg := l.segs[len(l.segs)-1].name
			l.mu.Unlock()
			if active == nil {
				t.Fatalf("the active segment is a %T, not OSFS's file", l.active)
			}
			active.File.Close()
			_, err = l.Append([]byte("x"))
			if err == nil {
				err = l.Sync()
			}
			if err == nil {
				t.Fatal("a write to a closed file succeeded")
			}
			want := filepath.Join(dir, seg)
			if msg := err.Error(); !strings.Contains(msg, want+":") || strings.Contains(msg, tmpSuffix) {
				t.Errorf("the error names %q, want the segment %s:\n%v", msg, want, err)
			}
			l.Close()
		})
	}
}
