package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/regfile"
	"github.com/filterstore/filterstore/wal"
	"golang.org/x/sys/unix"
)

// checkWritable makes sure, before a writer's Open changes any file,
// that this process may write what the Open and its Close go on to
// write: the catalog (the Open's commits, or its first checkpoint's) and
// the session marker, each opened for writing and closed again (which
// writes nothing, and also refuses an append-only file), the store
// directory (the session marker is made and removed there, the resync
// marker too), the WAL directory (a segment the Open starts, or rewrites
// from a dead writer's), and the directory above the store, which Open
// reads to sync it. (The filter files and WAL segments it opens for
// writing refuse before anything changes; filters/, where orphans are to
// be removed, is checked once they are known, checkDirWritable.)
// Otherwise Open changed files and then failed part-way, or succeeded and
// failed the store later: a catalog the process may not write failed the
// first commit, after a dead writer's WAL was replayed into the filters,
// or at the first checkpoint of a store closed cleanly, which failed the
// store and left a resync marker for the next Open; a WAL directory it
// may not write failed the rewrite of a dead writer's records after the
// session marker and the WAL's tail had changed. Permission denied
// (EACCES, EPERM: mode, owner, an immutable or append-only attribute, a
// security module) and a read-only file system (EROFS) are reported
// naming the path, wrapping the system's error: an operator fixes them
// and opens again.
func (s *Store) checkWritable() error {
	files := []string{filepath.Join(s.dir, format.CatalogName)}
	if session := filepath.Join(s.dir, sessionFile); exists(session) {
		files = append(files, session)
	}
	for _, path := range files {
		f, err := regfile.Open(path, os.O_WRONLY) // no wait on a FIFO there
		if err != nil {
			return notWritable(path, err)
		}
		f.Close()
	}
	if err := checkDirWritable(s.dir); err != nil {
		return err
	}
	if _, ok := s.opts.walFS.(wal.OSFS); ok {
		if err := checkDirWritable(filepath.Join(s.dir, format.WALName)); err != nil {
			return err
		}
	}
	if parent := filepath.Dir(filepath.Clean(s.dir)); !s.opts.simulated {
		if err := access(parent, unix.R_OK|unix.X_OK); err != nil {
			return notWritable(parent, err)
		}
	}
	return nil
}

// checkDirWritable checks that this process may create, remove and list
// entries of directory d, and sync it; one not made yet (a new store's
// WAL directory) is made by the Open, in a directory it could write.
func checkDirWritable(d string) error {
	if fi, err := os.Stat(d); err == nil && !fi.IsDir() {
		// access(X_OK) of a file with no execute bit fails with EACCES,
		// for root too: not a permission problem to report.
		return fmt.Errorf("store: open: %w", &fs.PathError{Op: "open", Path: d, Err: syscall.ENOTDIR})
	}
	if err := access(d, unix.R_OK|unix.W_OK|unix.X_OK); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return notWritable(d, err)
	}
	return nil
}

// exists reports whether path names an entry (a link not followed).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// notWritable is checkWritable's error for path: one that says the
// writer may not write it where the system refused for permission or a
// read-only file system, else err as it is.
func notWritable(path string, err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("store: open: %s cannot be written (or read) by this process, which a writer's Open needs (open the store ReadOnly to read it): %w", path, err)
	}
	return fmt.Errorf("store: open: %w", err)
}
