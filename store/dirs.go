package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/filterstore/filterstore/internal/dirsync"
)

// syncDirFn fsyncs a directory; tests replace it to see which directories
// were made durable.
var syncDirFn = syncDir

// mkdirDurable creates dir and any missing parents, and makes each
// creation durable by syncing the parent of every directory it created,
// from the top down: a directory entry is durable only once its parent is
// synced, and a store whose directory could vanish in a power loss after
// acknowledging writes would lose them.
func mkdirDurable(dir string) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("mkdir %s: %w: %s is not a directory", dir, ErrInvalid, d)
			}
			break
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("mkdir %s: %w: a parent of %s is not a directory: %w", dir, ErrInvalid, d, err)
		}
		if pathRefused(err) {
			return fmt.Errorf("mkdir %.200q: %w: the system does not accept the path (too long, or a NUL byte)", dir, ErrInvalid)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
		missing = append(missing, d)
		if parent := filepath.Dir(d); parent == d {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("mkdir %s: %w", d, err)
		}
		if err := syncDirFn(filepath.Dir(d)); err != nil {
			return fmt.Errorf("mkdir %s: sync %s: %w", d, filepath.Dir(d), err)
		}
	}
	return nil
}

// pathRefused reports whether err says the system does not take a path
// at all (too long, or holding a NUL byte), rather than anything about
// the file it names.
func pathRefused(err error) bool {
	return errors.Is(err, syscall.ENAMETOOLONG) || errors.Is(err, syscall.EINVAL)
}

// syncDir fsyncs a directory (dirsync.Sync).
var syncDir = dirsync.Sync

// dirSync fsyncs the store's directory d, unless its filter files and WAL
// are simulated (Options.simulated, a test seam).
func (s *Store) dirSync(d string) error {
	if s.opts.simulated {
		return nil
	}
	return syncDirFn(d)
}

// isNoSpace reports a full disk.
func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
