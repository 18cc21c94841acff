package catalog

import (
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// CopyFile writes a consistent copy of the catalog, as one read
// transaction sees it (bbolt's Tx.WriteTo), to path, which must not
// exist, and fsyncs it. The caller syncs the directory.
func (c *Catalog) CopyFile(path string) error {
	if err := c.existing(); err != nil {
		return err
	}
	err := withDB(c.Path, true, false, nil, c.NoSync, func(db *bolt.DB) error {
		return db.View(func(tx *bolt.Tx) error {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			_, err = tx.WriteTo(f)
			if err == nil {
				err = f.Sync()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("store: copy catalog %s to %s: %w", c.Path, path, err)
	}
	return nil
}
