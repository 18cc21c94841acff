package catalog

import (
	"fmt"
	"io"
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
			w := &firstErrWriter{w: f}
			_, err = tx.WriteTo(w)
			if err != nil && w.err != nil {
				// bbolt formats some of its writer's errors with %s
				// ("meta 0 copy: ..."), which drops them from the
				// chain: a full disk would not be errors.Is-able as
				// ENOSPC, as every other write of a Backup's is.
				err = keptError{msg: err.Error(), err: w.err}
			}
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

// firstErrWriter is w, keeping the first error a Write returned.
type firstErrWriter struct {
	w   io.Writer
	err error
}

func (f *firstErrWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil && f.err == nil {
		f.err = err
	}
	return n, err
}

// keptError is an error message that names err without wrapping it,
// made to wrap it.
type keptError struct {
	msg string
	err error
}

func (e keptError) Error() string { return e.msg }
func (e keptError) Unwrap() error { return e.err }
