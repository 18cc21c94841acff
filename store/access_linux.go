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
// file: so not that.) Kernels before 5.8 lack faccessat2: faccessat, with
// the real ids, then.
func access(path string, mode uint32) error {
	err := unix.Faccessat2(unix.AT_FDCWD, path, mode, unix.AT_EACCESS)
	if errors.Is(err, unix.ENOSYS) {
		err = unix.Faccessat(unix.AT_FDCWD, path, mode, 0)
	}
	if err != nil {
		return &fs.PathError{Op: "access", Path: path, Err: err}
	}
	return nil
}
