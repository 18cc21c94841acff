package store

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/filterstore/filterstore/internal/regfile"
	"golang.org/x/sys/unix"
)

// lockSession takes an open file description lock (fcntl F_OFD_SETLK,
// Linux 3.15 and later) for writing on the whole session marker, open
// for writing in f: a reader tells a running writer from one that died
// with the marker there by whether the lock is held (sessionHeld). The
// lock goes with f's close or the process's death. It is not the flock
// on DIR/LOCK, which a reader could only test by taking it (and so make
// a starting writer fail), and which NFS emulates with the same byte
// range locks: the marker is locked by no one else.
func lockSession(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return nil
}

// sessionHeld reports whether a process holds the session marker's lock
// (F_OFD_GETLK asks without taking it), and known false if it cannot
// tell: no marker, or the query failed.
func sessionHeld(dir string) (held, known bool) {
	f, err := regfile.Open(filepath.Join(dir, sessionFile), os.O_RDONLY)
	if err != nil {
		return false, false
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, false
	}
	return lk.Type != unix.F_UNLCK, true
}
