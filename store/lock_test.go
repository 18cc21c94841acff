package store

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
)

// TestLockThroughLinkRefused: a LOCK that is a symbolic link (to a file
// outside the store, to the catalog) or a hard link to the catalog fails
// Open with ErrCorrupt, and the file it leads to is left as it was. Open
// used to truncate that file and write its pid into it: the catalog, and
// every filter with it, was gone.
func TestLockThroughLinkRefused(t *testing.T) {
	for _, c := range []string{"symlink-outside", "symlink-catalog", "hardlink-catalog"} {
		t.Run(c, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, nil)
			b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
			must(t, err)
			for i := range 100 {
				must(t, second(b.Add(key(i))))
			}
			must(t, s.Close())
			victim := filepath.Join(dir, format.CatalogName)
			if c == "symlink-outside" {
				victim = filepath.Join(t.TempDir(), "precious")
				must(t, os.WriteFile(victim, []byte("not a store's\n"), 0o644))
			}
			before, err := os.ReadFile(victim)
			must(t, err)
			lock := filepath.Join(dir, format.LockName)
			must(t, os.Remove(lock))
			if c == "hardlink-catalog" {
				must(t, os.Link(victim, lock))
			} else {
				must(t, os.Symlink(victim, lock))
			}
			if s, err := Open(dir, nil); !errors.Is(err, ErrCorrupt) {
				if err == nil {
					s.Close()
				}
				t.Errorf("Open with LOCK a %s: %v, want ErrCorrupt", c, err)
			}
			if after, err := os.ReadFile(victim); err != nil || !bytes.Equal(before, after) {
				t.Fatalf("Open changed %s: %d bytes before, %d after (%v)", victim, len(before), len(after), err)
			}
			must(t, os.Remove(lock))
			s = mustOpen(t, dir, nil)
			defer s.Close()
			b, err = s.Bloom("b")
			must(t, err)
			for i := range 100 {
				if !b.Has(key(i)) {
					t.Fatalf("key %d absent after the link was removed", i)
				}
			}
		})
	}
}

// TestLockFileRemovedUnderWriter: with DIR/LOCK deleted under a live
// writer (an operator clearing a "stale" lock), a second writer's Open
// still fails with ErrLocked and changes nothing; the first writer goes
// on, and once it closes the store opens again with every key. The second
// Open used to succeed: two writers then shared the WAL, and after both
// died the store would not open ("records 1..200 are missing").
func TestLockFileRemovedUnderWriter(t *testing.T) {
	dir := t.TempDir()
	a := mustOpen(t, dir, nil)
	b, err := a.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	for i := range 100 {
		must(t, second(b.Add(key(i))))
	}
	must(t, os.Remove(filepath.Join(dir, format.LockName)))
	if s2, err := Open(dir, nil); !errors.Is(err, ErrLocked) {
		if err == nil {
			s2.Close()
		}
		t.Fatalf("second writer's Open with LOCK deleted: %v, want ErrLocked", err)
	}
	for i := 100; i < 200; i++ {
		must(t, second(b.Add(key(i))))
	}
	must(t, a.Checkpoint())
	must(t, a.Close())
	s := mustOpen(t, dir, nil)
	defer s.Close()
	b, err = s.Bloom("b")
	must(t, err)
	for i := range 200 {
		if !b.Has(key(i)) {
			t.Fatalf("key %d absent after reopen", i)
		}
	}
}

// TestHardLinkedCopyRefused: a copy of a store made with hard links (cp
// -al) whose LOCK was removed shares the catalog, the WAL and the filter
// files with the original. A writer Open of either fails with ErrCorrupt
// naming the shared file, and changes nothing; a read-only Open of the
// copy reads it. Before, both writers ran, appended to one WAL and
// committed to one catalog, and after a crash neither store opened (an
// adversarial review's finding).
func TestHardLinkedCopyRefused(t *testing.T) {
	orig := t.TempDir()
	s := mustOpen(t, orig, nil)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	for i := range 100 {
		must(t, second(b.Add(key(i))))
	}
	must(t, s.Close())
	cp := filepath.Join(t.TempDir(), "copy")
	must(t, filepath.WalkDir(orig, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(orig, p)
		dst := filepath.Join(cp, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case rel == format.LockName:
			return nil
		default:
			return os.Link(p, dst)
		}
	}))
	before := snapshotDir(t, orig)
	for _, dir := range []string{cp, orig} {
		s, err := Open(dir, nil)
		if err == nil {
			s.Close()
			t.Fatalf("writer Open of %s, whose files have two names, succeeded", dir)
		}
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "has 2 names (a hard link") {
			t.Fatalf("writer Open of %s: %v; want ErrCorrupt naming the hard link", dir, err)
		}
	}
	if after := snapshotDir(t, orig); !maps.Equal(before, after) {
		t.Fatal("a refused Open changed the store's files")
	}
	r, err := Open(cp, &Options{ReadOnly: true})
	must(t, err)
	defer r.Close()
	rb, err := r.Bloom("b")
	must(t, err)
	for i := range 100 {
		if !rb.Has(key(i)) {
			t.Fatalf("read-only copy: key %d absent", i)
		}
	}
}

// snapshotDir returns every file under dir with its contents, a
// symbolic link as its target, but LOCK (whose pid changes with each
// Open).
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	must(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == format.LockName {
			return err
		}
		if d.Type()&os.ModeSymlink != 0 {
			to, err := os.Readlink(p)
			out[p] = "link to " + to
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	}))
	return out
}
