package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames from to to unless to exists, which fails with
// an error wrapping fs.ErrExist: renameat2(2) with RENAME_NOREPLACE, in
// one step. Where the file system does not support the flag it checks
// first, then renames (a path made between the two is replaced if it is
// an empty directory).
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("rename %s %s: %w", from, to, fs.ErrExist)
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EPERM):
		// Not supported by the file system, the kernel, or a seccomp
		// filter (which may answer EPERM).
		return renameIfAbsent(from, to)
	}
	return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
}
