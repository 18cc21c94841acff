package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"golang.org/x/sys/unix"
)

// Linux's inode flags (chattr): with FS_IMMUTABLE_FL (+i) no process,
// root included, may write the file or create and remove entries in the
// directory; with FS_APPEND_FL (+a) a file opens for writing only to
// append.
const (
	fsImmutableFL = 0x10
	fsAppendFL    = 0x20
)

// denyWrites makes path unwritable for this process, as an operator's
// mistake would: by its mode where the process is not root, by the
// immutable attribute where it is (root passes any mode), or, with
// appendOnly, by the append-only attribute (root only: the test skips
// otherwise); it restores path when restore is called, or the test ends.
// It skips the test where the attribute cannot be set (a file system
// without it, no CAP_LINUX_IMMUTABLE).
func denyWrites(t *testing.T, path string, appendOnly bool) (restore func()) {
	t.Helper()
	fi, err := os.Stat(path)
	must(t, err)
	flag := uint32(fsImmutableFL)
	if appendOnly {
		if os.Geteuid() != 0 {
			t.Skip("the append-only attribute needs root")
		}
		flag = fsAppendFL
	}
	if os.Geteuid() != 0 {
		must(t, os.Chmod(path, fi.Mode().Perm()&^0o222))
		restore = func() { must(t, os.Chmod(path, fi.Mode().Perm())) }
		t.Cleanup(func() { os.Chmod(path, fi.Mode().Perm()) })
		return restore
	}
	setFlags := func(on bool) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
		if err != nil {
			return err
		}
		if on {
			flags |= flag
		} else {
			flags &^= flag
		}
		v := int(flags)
		return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, v)
	}
	if err := setFlags(true); err != nil {
		t.Skipf("running as root, and the immutable attribute cannot be set on %s: %v", path, err)
	}
	restore = func() { must(t, setFlags(false)) }
	t.Cleanup(func() { setFlags(false) })
	return restore
}

// TestOpenNotWritableChangesNothing: a writer's Open of a store whose
// catalog, WAL directory, session marker or store directory this process
// may not write (mode 0444/0555, or, for root, the immutable attribute;
// the append-only attribute on the session marker, root only) fails with
// an error wrapping fs.ErrPermission that names the path, before it
// changes any file; once the permission is back, Open finds every acknowledged
// key. Both a store closed cleanly and one whose writer died (records past
// the checkpoint to replay). Before, seen as an unprivileged user: with
// the catalog read-only, a clean store opened, and the first commit (at
// Close) failed the store and wrote RESYNC, so the next Open rewrote
// every filter page; a dead writer's store had its WAL replayed into the
// filters, its session marker rewritten and RESYNC written before the
// Open failed; with the WAL directory read-only, Open failed after it had
// rewritten the session marker and cut the newest segment's tail; with an
// append-only session marker, Open failed after the WAL's tail was cut;
// with the store directory read-only, Open succeeded and Close could not
// remove the session marker (a reviewer's runs). A read-only Open of the
// same store still reads it.
func TestOpenNotWritableChangesNothing(t *testing.T) {
	const n = 200
	cases := []struct {
		name       string
		path       string // relative to the store
		dead       bool   // the writer died
		appendOnly bool   // chattr +a rather than +i (root)
	}{
		{"catalog", format.CatalogName, false, false},
		{"catalog/dead", format.CatalogName, true, false},
		{"wal-dir/dead", format.WALName, true, false},
		{"session/dead", sessionFile, true, false},
		{"session-append-only/dead", sessionFile, true, true},
		{"store-dir/dead", ".", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			var dir string
			if c.dead {
				dir = crashedStore(t, root, n)
			} else {
				dir = filepath.Join(root, "clean")
				s := mustOpen(t, dir, nil)
				f, err := s.CreateBloom("f", BloomConfig{Capacity: 10_000})
				must(t, err)
				for i := range n {
					must(t, second(f.Add(key(i))))
				}
				must(t, s.Close())
			}
			path := filepath.Join(dir, c.path)
			restore := denyWrites(t, path, c.appendOnly)
			before := treeState(t, dir)
			s, err := Open(dir, nil)
			if err == nil {
				cerr := s.Close()
				t.Fatalf("Open with %s unwritable succeeded (Close: %v)", c.path, cerr)
			}
			if !errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrFailed) {
				t.Fatalf("Open with %s unwritable: %v; want an error wrapping fs.ErrPermission, not ErrCorrupt or ErrFailed", c.path, err)
			}
			after := treeState(t, dir)
			delete(before, format.LockName) // every writer's Open writes its pid there
			delete(after, format.LockName)
			if d := treeDiff(before, after); len(d) > 0 {
				t.Fatalf("Open with %s unwritable failed (%v) after changing %v", c.path, err, d)
			}
			ro, err := Open(dir, &Options{ReadOnly: true})
			must(t, err)
			must(t, ro.Close())

			// Permission back: every key.
			restore()
			s, err = Open(dir, nil)
			must(t, err)
			defer s.Close()
			f, err := s.Bloom("f")
			must(t, err)
			for i := range n {
				if !f.Has(key(i)) {
					t.Fatalf("key %d absent after the permission came back", i)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, format.ResyncName)); err == nil {
				t.Fatalf("%s left after the failed Open", format.ResyncName)
			}
		})
	}
}

// TestOpenParentUnreadableChangesNothing: a writer's Open syncs the
// directory above the store, which needs it readable; where it is not
// (mode 0311), Open fails with an error wrapping fs.ErrPermission before
// it changes any file. Before (a reviewer's run), Open failed at that
// sync having created the session marker, so the next Open took the
// last writer for dead. Modes do not bind root: skipped there.
func TestOpenParentUnreadableChangesNothing(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a directory of any mode")
	}
	parent := filepath.Join(t.TempDir(), "parent")
	dir := filepath.Join(parent, "store")
	s := mustOpen(t, dir, nil)
	must(t, s.Close())
	must(t, os.Chmod(parent, 0o311))
	defer os.Chmod(parent, 0o755)
	before := treeState(t, dir)
	s, err := Open(dir, nil)
	if err == nil {
		s.Close()
		t.Fatal("Open with the directory above the store unreadable succeeded")
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("Open with the directory above the store unreadable: %v; want an error wrapping fs.ErrPermission", err)
	}
	after := treeState(t, dir)
	delete(before, format.LockName)
	delete(after, format.LockName)
	if d := treeDiff(before, after); len(d) > 0 {
		t.Fatalf("Open failed (%v) after changing %v", err, d)
	}
}

// TestCatalogUnwritableFailsOnlyTheCall: a running writer whose catalog
// becomes unwritable (its mode, or the immutable attribute as root) wrote
// nothing when a catalog update cannot open the file: the checkpoint, and
// a create, fail with an error wrapping fs.ErrPermission, the store goes
// on (adds work, nothing is ErrFailed, no resync marker), and once the
// permission is back the next checkpoint succeeds and a reopen finds every
// key. Before, the first such checkpoint failed the store and wrote
// RESYNC, so every change failed until a reopen, which rewrote every
// filter page.
func TestCatalogUnwritableFailsOnlyTheCall(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	defer func() { s.Close() }()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	must(t, second(b.Add(key(0))))
	restore := denyWrites(t, filepath.Join(dir, format.CatalogName), false)
	err = s.Checkpoint()
	if !errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrFailed) {
		t.Fatalf("Checkpoint with the catalog unwritable: %v; want an error wrapping fs.ErrPermission, not ErrFailed", err)
	}
	if _, err := s.CreateBloom("c", BloomConfig{Capacity: 1000}); !errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrFailed) {
		t.Fatalf("CreateBloom with the catalog unwritable: %v; want an error wrapping fs.ErrPermission, not ErrFailed", err)
	}
	must(t, second(b.Add(key(1))))
	if _, err := os.Stat(filepath.Join(dir, format.ResyncName)); err == nil {
		t.Fatalf("%s written after a catalog update that wrote nothing", format.ResyncName)
	}
	restore()
	must(t, s.Checkpoint())
	must(t, second(b.Add(key(2))))
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	b, err = s.Bloom("b")
	must(t, err)
	for i := range 3 {
		if !b.Has(key(i)) {
			t.Fatalf("key %d absent after the reopen", i)
		}
	}
}
