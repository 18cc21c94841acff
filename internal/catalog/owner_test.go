package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/fserr"
)

// newOwned creates a catalog in a new directory with one filter, loads it
// and makes the test its owner.
func newOwned(t *testing.T) *Catalog {
	t.Helper()
	c := New(t.TempDir())
	id, err := NewStoreID()
	must(t, err)
	must(t, c.Create(id))
	must(t, c.PutFilters(2, map[string]*format.FilterMeta{"a": testMeta(1)}))
	st, err := c.Load()
	must(t, err)
	c.Own(st)
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// second returns the error of a call that returns a value and an error.
func second[T any](_ T, err error) error { return err }

// TestOwnedCatalogReplaced: once the writer owns its catalog, a catalog
// file replaced from outside — renamed over it or written over it in
// place, by an older copy of itself (even one older only by a rename,
// which moves neither the next id nor the checkpoint) or by another
// store's catalog — makes
// every later change fail with ErrCorrupt and leaves the file as the
// outsider left it. Without the check the writer wrote its filters and
// checkpoints into whatever file was there.
func TestOwnedCatalogReplaced(t *testing.T) {
	for _, c := range []struct {
		name       string
		inPlace    bool
		foreign    bool
		renameOnly bool // the owner's only change after the copy is a rename
	}{
		{"older-copy-renamed-over", false, false, false},
		{"older-copy-written-in-place", true, false, false},
		{"older-copy-before-a-rename-written-in-place", true, false, true},
		{"other-store-renamed-over", false, true, false},
		{"other-store-written-in-place", true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cat := newOwned(t)
			src := cat.Path + ".old"
			if c.foreign {
				other := New(t.TempDir())
				id, err := NewStoreID()
				must(t, err)
				must(t, other.Create(id))
				must(t, other.PutFilters(2, map[string]*format.FilterMeta{"x": testMeta(1)}))
				src = other.Path
			} else {
				must(t, cat.CopyFile(src))
			}
			// The owner moves on after the copy.
			if c.renameOnly {
				// Neither the next id nor the checkpoint moves.
				must(t, cat.RenameFilter("a", "a2"))
				must(t, cat.RenameFilter("a2", "a"))
			} else {
				must(t, cat.PutFilters(3, map[string]*format.FilterMeta{"b": testMeta(2)}))
				must(t, second(cat.Checkpoint(10, 0, nil, nil)))
			}

			if c.inPlace {
				data, err := os.ReadFile(src)
				must(t, err)
				must(t, os.WriteFile(cat.Path, data, 0o644)) // same inode
			} else {
				tmp := cat.Path + ".in"
				data, err := os.ReadFile(src)
				must(t, err)
				must(t, os.WriteFile(tmp, data, 0o644))
				must(t, os.Rename(tmp, cat.Path))
			}
			before, err := os.ReadFile(cat.Path)
			must(t, err)
			for _, op := range []struct {
				name string
				do   func() error
			}{
				{"PutFilters", func() error { return cat.PutFilters(4, map[string]*format.FilterMeta{"c": testMeta(3)}) }},
				{"Checkpoint", func() error { _, err := cat.Checkpoint(20, 0, nil, nil); return err }},
				{"DeleteFilter", func() error { return cat.DeleteFilter("a") }},
				{"RenameFilter", func() error { return cat.RenameFilter("a", "z") }},
			} {
				if err := op.do(); !errors.Is(err, fserr.ErrCorrupt) {
					t.Fatalf("%s on a replaced catalog: %v, want ErrCorrupt", op.name, err)
				}
			}
			after, err := os.ReadFile(cat.Path)
			must(t, err)
			if string(before) != string(after) {
				t.Fatal("a refused change still wrote to the replaced catalog")
			}
		})
	}
}

// TestOwnedCatalogGoesOn: the owner's own changes, one after another,
// never trip the check (it follows the next id and checkpoint each
// commit leaves), and an unowned catalog is not checked.
func TestOwnedCatalogGoesOn(t *testing.T) {
	cat := newOwned(t)
	for i := uint64(2); i < 20; i++ {
		must(t, cat.PutFilters(i+1, map[string]*format.FilterMeta{fmt.Sprint("f", i): testMeta(i)}))
		must(t, second(cat.Checkpoint(100*i, i, nil, nil)))
		must(t, second(cat.Checkpoint(100*i, 0, nil, nil))) // the same LSN again
		must(t, cat.RenameFilter(fmt.Sprint("f", i), fmt.Sprint("g", i)))
	}
	must(t, cat.DeleteFilter("a"))

	plain := New(filepath.Dir(cat.Path)) // not owned
	other := newOwned(t)
	data, err := os.ReadFile(other.Path)
	must(t, err)
	must(t, os.WriteFile(plain.Path, data, 0o644))
	must(t, plain.PutFilters(0, map[string]*format.FilterMeta{"y": testMeta(1)}))
}

// TestOpenErrorClassifies: an error the system returned while bbolt
// opened the catalog (no descriptors or memory left, an I/O error) is
// reported as it is, not as ErrCorrupt: the file may be whole. What bbolt
// found wrong with the file's contents is ErrCorrupt. It used to call
// every error but a timeout, a missing file and a permission problem
// corrupt, so that a process at its descriptor limit was told its
// catalog was damaged.
func TestOpenErrorClassifies(t *testing.T) {
	for _, c := range []struct {
		err     error
		corrupt bool
	}{
		{&fs.PathError{Op: "open", Path: "catalog.db", Err: syscall.EMFILE}, false},
		{&fs.PathError{Op: "open", Path: "catalog.db", Err: syscall.ENFILE}, false},
		{syscall.ENOMEM, false},
		{fmt.Errorf("read: %w", syscall.EIO), false},
		{&fs.PathError{Op: "open", Path: "catalog.db", Err: syscall.ENOENT}, false},
		{bolterrors.ErrInvalid, true},
		{bolterrors.ErrChecksum, true},
		{bolterrors.ErrVersionMismatch, true},
		{errors.New("file size too small 12"), true},
	} {
		err := openError("catalog.db", c.err)
		if errors.Is(err, fserr.ErrCorrupt) != c.corrupt {
			t.Errorf("openError(%v) = %v: corrupt %v, want %v", c.err, err, !c.corrupt, c.corrupt)
		}
		if !errors.Is(err, c.err) && !c.corrupt {
			t.Errorf("openError(%v) = %v: does not wrap the cause", c.err, err)
		}
	}
	// bbolt goes on with the default page size when its read of the
	// first page fails, and then finds the meta pages invalid: an error
	// reading the file (EISDIR here, for a disk's EIO) is what is
	// reported, not corruption. (Before, the helper's EIO from a failing
	// disk read "corrupt data: invalid database".)
	err := openError(t.TempDir(), bolterrors.ErrInvalid)
	if errors.Is(err, fserr.ErrCorrupt) || !errors.Is(err, syscall.EISDIR) {
		t.Errorf("openError(invalid database) of a file that cannot be read: %v, want the read's error (EISDIR), not ErrCorrupt", err)
	}
}

// TestOwnedFormat1Upgrade: a format 1 catalog (no store id) that the
// writer owns takes its upgrade (SetStoreID) and the changes after it:
// the owner follows the store id the upgrade sets.
func TestOwnedFormat1Upgrade(t *testing.T) {
	c := New(t.TempDir())
	must(t, c.Create(1))
	must(t, withDB(c.Path, false, false, nil, true, func(db *bolt.DB) error {
		return db.Update(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			if err := meta.Delete(keyStoreID); err != nil {
				return err
			}
			if err := meta.Delete(keySum); err != nil { // format 1 has none
				return err
			}
			return meta.Put(keyFormat, []byte{1, 0, 0, 0})
		})
	}))
	st, err := c.Load()
	must(t, err)
	if st.StoreID != 0 {
		t.Fatalf("format 1 catalog loaded with store id %d", st.StoreID)
	}
	c.Own(st)
	must(t, c.SetStoreID(77))
	must(t, c.PutFilters(2, map[string]*format.FilterMeta{"a": testMeta(1)}))
	must(t, second(c.Checkpoint(5, 0, nil, nil)))
	if st, err = c.Load(); err != nil || st.StoreID != 77 || len(st.Filters) != 1 {
		t.Fatalf("after the upgrade: %+v, %v", st, err)
	}
}

// TestCatalogLocksForgotten: the per-file mutexes of catalogs no
// transaction uses are forgotten, so a process that opens catalogs in ever
// new directories does not keep one per directory (it kept a sync.Map
// entry per directory, about 260 bytes each, for good).
func TestCatalogLocksForgotten(t *testing.T) {
	for range 50 {
		c := New(t.TempDir())
		must(t, c.Create(1))
		if _, err := c.Load(); err != nil {
			t.Fatal(err)
		}
		must(t, c.PutFilters(2, map[string]*format.FilterMeta{"a": testMeta(1)}))
	}
	catalogLocksMu.Lock()
	n := len(catalogLocks)
	catalogLocksMu.Unlock()
	if n != 0 {
		t.Fatalf("%d catalog mutexes kept after every transaction ended", n)
	}
}
