//go:build filterstore_testhooks

package store

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
	bolt "go.etcd.io/bbolt"
)

// A format 1 catalog (no store id) whose upgrade at Open (SetStoreID)
// fails, landed or not: Open fails and writes RESYNC, as any failed
// catalog commit does, so that the next Open reads the catalog from the
// disk; a second Open must succeed.
func TestLandedUpgradeFault(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
		for _, landed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/%s", errno, landedName(landed)), func(t *testing.T) {
				dir := t.TempDir()
				s := mustOpen(t, dir, nil)
				must(t, s.Close())
				db, err := bolt.Open(catalog.New(dir).Path, 0o644, nil)
				must(t, err)
				must(t, db.Update(func(tx *bolt.Tx) error {
					meta := tx.Bucket([]byte(format.BucketMeta))
					if err := meta.Delete([]byte(format.KeyStoreID)); err != nil {
						return err
					}
					if err := meta.Delete([]byte(format.KeySum)); err != nil { // format 1 has none
						return err
					}
					return meta.Put([]byte(format.KeyFormat), []byte{1, 0, 0, 0})
				}))
				must(t, db.Close())
				// A format 1 store's WAL: none after a clean Close.
				must(t, os.RemoveAll(filepath.Join(dir, format.WALName)))
				f := armCatalogFault(t, dir, "recover", 1, errno, landed)
				_, err = Open(dir, nil)
				f.disarm()
				t.Logf("first Open: %v", err)
				f.mustHaveFired(t)
				if err == nil {
					t.Fatal("Open with the upgrade failing succeeded")
				}
				if _, err := os.Stat(filepath.Join(dir, format.ResyncName)); err != nil {
					t.Fatalf("no %s after the upgrade's catalog commit failed: %v", format.ResyncName, err)
				}
				s, err = Open(dir, nil)
				if err != nil {
					t.Fatalf("second Open: %v", err)
				}
				b, err := s.CreateBloom("b", BloomConfig{Capacity: 10})
				must(t, err)
				must(t, second(b.Add(key(1))))
				must(t, s.Close())
				s = mustOpen(t, dir, nil)
				defer s.Close()
				b, err = s.Bloom("b")
				must(t, err)
				if !b.Has(key(1)) {
					t.Fatal("key absent")
				}
			})
		}
	}
}
