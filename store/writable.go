package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/regfile"
	"github.com/filterstore/filterstore/wal"
	"golang.org/x/sys/unix"
)

// checkWritable makes sure, before a writer's Open changes any file,
// that this process may write what the Open goes on to write: the
// catalog (the Open's commits, or its first checkpoint's), the WAL
// directory (a segment the Open starts, or rewrites from a dead
// writer's), the session marker (or the store directory, where it is
// made), the store directory if a resync marker is there to remove, and
// the filters directory if orphan files are there to remove. (The filter
// files and WAL segments it opens for writing refuse before anything
// changes.) Otherwise Open changed files and then failed part-way, or
// succeeded and failed the store later: a catalog the process may not
// write failed the first commit, after a dead writer's WAL was replayed
// into the filters, or at the first checkpoint of a store closed
// cleanly, which failed the store and left a resync marker for the next
// Open; a WAL directory it may not write failed the rewrite of a dead
// writer's records after the session marker and the WAL's tail had
// changed. Permission denied (EACCES, EPERM: mode, owner, an immutable
// attribute, a security module) and a read-only file system (EROFS) are
// reported naming the file, wrapping the system's error, and change
// nothing: an operator fixes them and opens again.
func (s *Store) checkWritable(orphans []string) error {
	// The catalog: opened for writing, then closed (that writes nothing;
	// bbolt opens it for writing at each commit).
	path := filepath.Join(s.dir, format.CatalogName)
	f, err := regfile.Open(path, os.O_RDWR) // no wait on a FIFO there
	if err != nil {
		return notWritable(path, err)
	}
	f.Close()
	dirs := []string{}
	if _, ok := s.opts.walFS.(wal.OSFS); ok {
		dirs = append(dirs, filepath.Join(s.dir, format.WALName))
	}
	session := filepath.Join(s.dir, sessionFile)
	if _, err := os.Lstat(session); err == nil {
		if err := access(session, unix.W_OK); err != nil {
			return notWritable(session, err)
		}
	} else {
		dirs = append(dirs, s.dir)
	}
	if _, err := os.Lstat(filepath.Join(s.dir, format.ResyncName)); err == nil {
		dirs = append(dirs, s.dir)
	}
	if len(orphans) > 0 {
		dirs = append(dirs, filepath.Join(s.dir, format.FiltersName))
	}
	for _, d := range dirs {
		// One not made yet (a new store's WAL directory) is made by
		// this Open, in a directory it was able to make or write.
		if err := access(d, unix.W_OK|unix.X_OK); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return notWritable(d, err)
		}
	}
	return nil
}

// notWritable is checkWritable's error for path: one that says the
// writer may not write it where the system refused for permission or a
// read-only file system, else err as it is.
func notWritable(path string, err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
		return fmt.Errorf("store: open: %s cannot be written by this process, and a writer's Open changes it (nothing was changed; open the store ReadOnly to read it): %w", path, err)
	}
	return fmt.Errorf("store: open: %w", err)
}
