package store

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/filterstore/filterstore/internal/regfile"
	"golang.org/x/sys/unix"
)

// dirLock is the writer's exclusive flock on DIR/LOCK. It is released when
// the process dies, so a crash never leaves a stale lock. Read-only openers
// do not take it.
type dirLock struct{ f *os.File }

func lockDir(path string) (*dirLock, error) {
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
	return l.f.Close()
}
