package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/filterstore/filterstore/internal/format"
)

// TestImportReserveFullDiskThenFailedCreate: an Import whose id
// reservation finds the catalog's disk full (ENOSPC on its commit), then
// a create whose catalog commit fails the same way, then Close: the next
// Open opens, with every key. The reservation used to skip the id with no
// file at it, the failed create left its zero file at the id after, and
// Open took that file, past a gap, for an older catalog's: "filters/3-0.flt
// is this store's, but the catalog (next id 2) names no such filter"; the
// store would not open until the file was deleted by hand.
func TestImportReserveFullDiskThenFailedCreate(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	a, err := s.CreateBloom("a", BloomConfig{Capacity: 100})
	must(t, err)
	must(t, second(a.Add(key(1))))
	var exp bytes.Buffer
	must(t, second(a.WriteTo(&exp)))
	free, restore := fullCatalogDisk(t, dir)

	var impErr error
	for range 50 { // until a reservation's commit needs a page it cannot have
		if impErr = s.Import("imp", bytes.NewReader(exp.Bytes())); impErr == nil {
			must(t, s.Drop("imp"))
			continue
		}
		break
	}
	if !errors.Is(impErr, syscall.ENOSPC) {
		t.Fatalf("Import with the catalog's disk full: %v, want ENOSPC", impErr)
	}
	if _, err := s.CreateBloom("b", BloomConfig{Capacity: 100}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create with the catalog's disk full: %v, want ENOSPC", err)
	}
	free()
	must(t, s.Close())
	restore()
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatalf("Open after a full disk failed an Import's reservation and a create: %v", err)
	}
	defer s.Close()
	a, err = s.Bloom("a")
	must(t, err)
	if !a.Has(key(1)) {
		t.Fatal("a's key absent")
	}
	if _, err := s.CreateBloom("b", BloomConfig{Capacity: 100}); err != nil {
		t.Fatalf("create after the reopen: %v", err)
	}
}

// fullCatalogDisk puts the store's catalog on a tiny tmpfs that is full,
// bind-mounted over DIR/catalog.db: a catalog commit that needs a page
// fails with ENOSPC, as on a full disk, while filter files, on the test's
// file system, can still be made. free makes room; restore unmounts it and
// writes the catalog back in place (the file the writer owns).
func fullCatalogDisk(t *testing.T, dir string) (free, restore func()) {
	t.Helper()
	tiny := smallFS(t, "256k")
	cat := filepath.Join(dir, format.CatalogName)
	data, err := os.ReadFile(cat)
	must(t, err)
	tcat := filepath.Join(tiny, format.CatalogName)
	must(t, os.WriteFile(tcat, data, 0o644))
	punchFreePages(t, tcat)
	filler := filepath.Join(tiny, "filler")
	f, err := os.Create(filler)
	must(t, err)
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	must(t, unix.Mount(tcat, cat, "", unix.MS_BIND, ""))
	mounted := true
	t.Cleanup(func() {
		if mounted {
			unix.Unmount(cat, unix.MNT_DETACH)
		}
	})
	free = func() { must(t, os.Remove(filler)) }
	restore = func() {
		data, err := os.ReadFile(tcat)
		must(t, err)
		must(t, unix.Unmount(cat, 0))
		mounted = false
		must(t, os.WriteFile(cat, data, 0o644))
	}
	return free, restore
}

// punchFreePages punches holes where the bbolt file at path has free or
// unused pages, so that a commit reusing them needs space.
func punchFreePages(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o644, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	must(t, err)
	ps := db.Info().PageSize
	fi, err := os.Stat(path)
	must(t, err)
	var holes []int
	must(t, db.View(func(tx *bolt.Tx) error {
		for id := 2; id < int(fi.Size())/ps; id++ {
			info, err := tx.Page(id)
			if err != nil {
				return err
			}
			if info == nil || info.Type == "free" {
				holes = append(holes, id)
			}
		}
		return nil
	}))
	must(t, db.Close())
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	for _, id := range holes {
		must(t, unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(id*ps), int64(ps)))
	}
}
