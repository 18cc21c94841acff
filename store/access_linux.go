package store

import (
	"errors"
	"io/fs"

	"golang.org/x/sys/unix"
)

// access checks path for mode with the process's effective ids, as an
// open or a create there would: faccessat2 with AT_EACCESS, which also
// reports an immutable file or directory (EPERM) and a read-only file
// system. (unix.Faccessat takes an EPERM from faccessat2 for a system
// call a sandbox refused, and emulates it in Go, passing root for any
// file: so not that.) Where faccessat2 is missing (kernels before 5.8:
// ENOSYS) or refused (a seccomp filter answering EPERM for a call it
// does not know: told from an EPERM about the file by asking only
// whether path exists, which no file refuses), it falls back to
// faccessat, with the real ids.
func access(path string, mode uint32) error {
	err := unix.Faccessat2(unix.AT_FDCWD, path, mode, unix.AT_EACCESS)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) && errors.Is(unix.Faccessat2(unix.AT_FDCWD, path, unix.F_OK, unix.AT_EACCESS), unix.EPERM) {
		err = unix.Faccessat(unix.AT_FDCWD, path, mode, 0)
	}
	if err != nil {
		return &fs.PathError{Op: "access", Path: path, Err: err}
	}
	return nil
}
