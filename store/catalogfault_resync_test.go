//go:build filterstore_testhooks

package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
)

// TestLandedCatalogFailureEvictsCatalog: a catalog commit that fails the
// store (an EIO from a checkpoint's commit, landed or not) writes RESYNC,
// as a failed msync does, and the next Open drops the catalog's pages
// from the cache before it opens it (evictCatalog): the cache may hold
// pages of the failed commit that the disk does not. Where that eviction
// fails, Open fails with its error and RESYNC stays; once it succeeds,
// every acknowledged key is there and RESYNC is gone.
func TestLandedCatalogFailureEvictsCatalog(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(landedName(landed), func(t *testing.T) {
			dir, s, a := storeWithKeys(t, 100)
			must(t, s.Checkpoint())
			for i := 100; i < 200; i++ {
				must(t, second(a.Add(key(i))))
			}
			f := armCatalogFault(t, dir, "checkpointLocked", 1, syscall.EIO, landed)
			if err := s.Checkpoint(); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("Checkpoint whose catalog commit fails with EIO: %v, want ErrFailed wrapping EIO", err)
			}
			f.disarm()
			f.mustHaveFired(t)
			resync := filepath.Join(dir, format.ResyncName)
			if _, err := os.Stat(resync); err != nil {
				t.Fatalf("no %s after a failed catalog commit: %v", format.ResyncName, err)
			}
			s.abandonForTest() // the process dies

			var evicted []string
			failEvict := true
			was := evictCatalog
			evictCatalog = func(path string) error {
				evicted = append(evicted, path)
				if failEvict {
					return fmt.Errorf("injected: %w", syscall.EIO)
				}
				return was(path)
			}
			t.Cleanup(func() { evictCatalog = was })
			if s, err := Open(dir, nil); !errors.Is(err, syscall.EIO) {
				if err == nil {
					s.Close()
				}
				t.Fatalf("Open whose eviction of the catalog fails with EIO: %v, want that EIO", err)
			}
			if _, err := os.Stat(resync); err != nil {
				t.Fatalf("%s gone after the failed Open: %v", format.ResyncName, err)
			}
			failEvict = false
			s, err := Open(dir, nil)
			must(t, err)
			defer s.Close()
			if want := catalog.New(dir).Path; len(evicted) != 2 || evicted[1] != want {
				t.Fatalf("catalog evictions %v, want two of %s", evicted, want)
			}
			if _, err := os.Stat(resync); err == nil {
				t.Fatalf("%s still there after a successful Open", format.ResyncName)
			}
			wantKeysClean(t, s, "a", 200)
		})
	}
}

// TestLandedCatalogEvictedBeforeRead: the Open that finds RESYNC drops the
// catalog's pages before it reads the catalog, not after. A create whose
// commit landed in the file but failed with EIO stands for a commit the
// cache holds and the disk does not: when the eviction runs, the test puts
// the catalog from before the create back in the file (the disk's copy).
// An Open that read the catalog first would know filter "p"; one that
// evicted first must not.
func TestLandedCatalogEvictedBeforeRead(t *testing.T) {
	dir, s, _ := storeWithKeys(t, 50)
	must(t, s.Checkpoint())
	path := catalog.New(dir).Path
	disk, err := os.ReadFile(path)
	must(t, err)
	f := armCatalogFault(t, dir, "(*Store).create", 1, syscall.EIO, true)
	if _, err := s.CreateBloom("p", BloomConfig{Capacity: 100}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("create whose catalog commit fails with EIO: %v, want EIO", err)
	}
	f.disarm()
	f.mustHaveFired(t)
	s.abandonForTest()

	was := evictCatalog
	evictCatalog = func(p string) error {
		if err := was(p); err != nil {
			return err
		}
		return os.WriteFile(p, disk, 0o644) // what the disk held
	}
	t.Cleanup(func() { evictCatalog = was })
	s, err = Open(dir, nil)
	must(t, err)
	defer s.Close()
	if _, err := s.Bloom("p"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("filter p, whose create failed and which the disk's catalog lacks: %v, want ErrNotFound (the catalog was read before its pages were dropped)", err)
	}
	wantKeysClean(t, s, "a", 50)
}

// wantKeysClean fails t unless Bloom filter name of s finds keys 0..n-1
// and s checks clean.
func wantKeysClean(t *testing.T, s *Store, name string, n int) {
	t.Helper()
	f, err := s.Bloom(name)
	must(t, err)
	for i := range n {
		if !f.Has(key(i)) {
			t.Fatalf("%s: key %d lost", name, i)
		}
	}
	mustCheckClean(t, s, 0)
}

// TestLandedCatalogFailureAfterStoreFailed: a catalog commit that fails
// with EIO after another goroutine failed the store (a WAL sync, which
// writes no marker) still writes RESYNC.
func TestLandedCatalogFailureAfterStoreFailed(t *testing.T) {
	dir, s, _ := storeWithKeys(t, 2)
	fired := 0
	catalog.AfterCommitHook = func(_ string, err error) error {
		if err != nil {
			return err
		}
		fired++
		s.fail(fmt.Errorf("a concurrent WAL sync: %w", syscall.EIO))
		return syscall.EIO // the commit landed, its sync failed
	}
	t.Cleanup(func() { catalog.AfterCommitHook = nil })
	err := s.Checkpoint()
	catalog.AfterCommitHook = nil
	if fired != 1 || !errors.Is(err, ErrFailed) {
		t.Fatalf("Checkpoint with a failing catalog commit (fired %d): %v, want ErrFailed", fired, err)
	}
	if _, err := os.Stat(filepath.Join(dir, format.ResyncName)); err != nil {
		t.Fatalf("no %s after a catalog commit failed on a store that had failed already: %v", format.ResyncName, err)
	}
	s.abandonForTest()
	s, err = Open(dir, nil)
	must(t, err)
	defer s.Close()
	wantKeysClean(t, s, "a", 2)
}
