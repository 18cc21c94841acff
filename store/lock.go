package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/filterstore/filterstore/internal/regfile"
	"golang.org/x/sys/unix"
)

// dirLock is the writer's exclusive flock on DIR/LOCK and on DIR itself.
// Both are released when the process dies, so a crash never leaves a
// stale lock. Read-only openers take neither.
//
// The lock on the directory is what keeps a second writer out when
// DIR/LOCK has been deleted under a live one (an operator clearing a
// "stale" lock file): a new LOCK is a new inode, which the second writer
// could lock, and two writers' WAL segments and checkpoints would then
// overwrite each other's. A directory cannot be replaced under its open
// descriptor that way. On a file system where a directory cannot be
// flocked (flock answers other than "held"), the LOCK file alone guards
// the store, as it does for builds older than this one.
type dirLock struct {
	f, dir *os.File
	// dirErr is why the directory could not be flocked (nil if it was):
	// Open logs it, since the store then lacks that protection.
	dirErr error
}

func lockDir(path string) (*dirLock, error) {
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	var dirErr error
	switch err := unix.Flock(int(dir.Fd()), unix.LOCK_EX|unix.LOCK_NB); {
	case errors.Is(err, unix.EWOULDBLOCK):
		dir.Close()
		return nil, fmt.Errorf("store: %s: %w: the directory is flocked by another process (a filterstore writer holds it; open the store with Options.ReadOnly to read beside it)", dir.Name(), ErrLocked)
	case err != nil:
		dir.Close() // not supported here: the LOCK file alone
		dir, dirErr = nil, fmt.Errorf("flock %s: %w", filepath.Dir(path), err)
	}
	l, err := lockFile(path)
	if err != nil {
		if dir != nil {
			dir.Close()
		}
		return nil, err
	}
	l.dir, l.dirErr = dir, dirErr
	return l, nil
}

// lockFile takes the flock on DIR/LOCK, creating the file if needed.
func lockFile(path string) (*dirLock, error) {
	// Not through a symbolic or hard link: the pid written below would
	// overwrite the file it leads to.
	f, err := regfile.OpenOwn(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("store: %s: %w (open it with Options.ReadOnly to read beside the writer)", path, ErrLocked)
		}
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	// The pid is informational, for operators; nothing reads it back.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	if l == nil {
		return nil
	}
	unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	err := l.f.Close()
	if l.dir != nil {
		// Closing the descriptor drops its flock.
		l.dir.Close()
	}
	return err
}
