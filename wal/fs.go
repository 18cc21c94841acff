package wal

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/filterstore/filterstore/internal/dirsync"
)

// FS is the file system seam of the log: OSFS in production, MemFS in
// crash tests. Names are slash- or OS-separated paths as the caller built
// them with path/filepath; an implementation need not support anything
// else. Errors for a missing file satisfy errors.Is(err, os.ErrNotExist).
type FS interface {
	// Create creates the named file, or truncates it if it exists, and
	// opens it for reading and appending. Its directory entry is durable
	// only after SyncDir on its directory.
	Create(name string) (File, error)
	// Open opens an existing file for reading only; Write, Truncate and
	// Sync on it may fail.
	Open(name string) (File, error)
	// OpenAppend opens an existing file for reading and appending: every
	// Write goes to the current end of the file.
	OpenAppend(name string) (File, error)
	// Rename atomically renames oldname to newname, replacing newname if it
	// exists. The change is durable only after SyncDir on the directory.
	Rename(oldname, newname string) error
	// Remove removes the named file. The removal is durable only after
	// SyncDir on its directory; until then a crash may bring the file back.
	Remove(name string) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// MkdirAll creates dir and any missing parents, and makes them durable.
	MkdirAll(dir string) error
	// SyncDir makes the creations, renames and removals of entries of dir
	// durable.
	SyncDir(dir string) error
}

// File is an open file of an FS. A File is not required to be safe for
// concurrent use, except that ReadAt may run concurrently with Write.
type File interface {
	// Read reads sequentially from the start of the file.
	io.Reader
	// Write appends to the end of the file.
	io.Writer
	// ReadAt reads at an absolute offset, without moving the Read position.
	io.ReaderAt
	// Sync makes the file's contents and size durable (fdatasync). After an
	// error from Sync the state of the unsynced data is unknown: on Linux
	// it may be lost for good while it still reads back (see MemFS), so the
	// log never retries a failed Sync.
	Sync() error
	// Truncate changes the size of the file. The new size is durable after
	// Sync.
	Truncate(size int64) error
	// Size returns the current size of the file.
	Size() (int64, error)
	// Close closes the file. It does not sync.
	Close() error
}

// OSFS is the FS of the operating system. File.Sync is fdatasync(2) on
// Linux (fs_linux.go) and os.File.Sync elsewhere (fs_other.go, which on
// macOS means F_FULLFSYNC); SyncDir fsyncs the directory.
type OSFS struct{}

var _ FS = OSFS{}

// Create implements FS.
func (OSFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Open implements FS.
func (OSFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// OpenAppend implements FS.
func (OSFS) OpenAppend(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Rename implements FS.
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// List implements FS.
func (OSFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	slices.Sort(names)
	return names, nil
}

// MkdirAll implements FS. Every directory it creates is made durable: it
// syncs the parent of each level it created, top down, so that after it
// returns a power loss cannot lose any of them.
func (OSFS) MkdirAll(dir string) error {
	dir = filepath.Clean(dir)
	// The levels that do not exist yet, deepest first.
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := syncDirHook(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// syncDirHook is the directory sync of OSFS, a variable so that tests can
// record which directories are synced.
var syncDirHook = syncDir

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error { return syncDirHook(dir) }

// syncDir fsyncs a directory (dirsync.Sync).
var syncDir = dirsync.Sync

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
