//go:build !linux

package store

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// access checks path for mode with the process's effective ids, as an
// open or a create there would (faccessat with AT_EACCESS).
func access(path string, mode uint32) error {
	if err := unix.Faccessat(unix.AT_FDCWD, path, mode, unix.AT_EACCESS); err != nil {
		return &fs.PathError{Op: "access", Path: path, Err: err}
	}
	return nil
}
