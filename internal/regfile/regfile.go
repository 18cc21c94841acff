// Package regfile opens files that must be regular files (filter files,
// WAL segments), refusing anything else before opening it.
package regfile

import (
	"fmt"
	"os"
	"syscall"

	"github.com/filterstore/filterstore/internal/fserr"
)

// ErrNotRegular says a path names something other than a regular file (a
// FIFO, a device, a directory); it wraps fserr.ErrCorrupt.
var ErrNotRegular = fmt.Errorf("not a regular file: %w", fserr.ErrCorrupt)

// Open opens path with flag (os.O_RDONLY or os.O_RDWR) and returns the
// file if it is a regular file. Anything else fails with an error
// wrapping ErrNotRegular, without being opened: opening a FIFO to read
// waits for a writer to come, which would hang a read-only open, a backup
// or an inspection of a directory where a FIFO took a file's name. A
// regular file is opened as os.OpenFile opens it (not non-blocking: that
// would fail at once under a lease a file server holds, where a plain
// open waits for the lease to break), then checked again through the
// descriptor; a FIFO swapped in between the two looks can still block the
// open.
func Open(path string, flag int) (*os.File, error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	f, _, err := openRegular(path, flag, 0)
	return f, err
}

// openRegular opens path and checks, through the descriptor, that it is a
// regular file; it returns the file's FileInfo too.
func openRegular(path string, flag int, perm os.FileMode) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, notRegular(path, fi.Mode())
	}
	return f, fi, nil
}

// OpenOwn opens path with flag, creating it with perm if flag has
// os.O_CREATE, for a file its caller writes in place (the store's lock
// file, a marker). Writing through a name that leads elsewhere would
// change another file, so it refuses, with an error wrapping
// ErrNotRegular: a symbolic link (never followed, not even to look), a
// name that is not a regular file (not opened), and a regular file with
// another name too (a hard link, such as one to the catalog).
func OpenOwn(path string, flag int, perm os.FileMode) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	f, fi, err := openRegular(path, flag|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return nil, err
	}
	if err := hardLinked(path, fi); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CheckOwn reports, with OpenOwn's error, why OpenOwn would refuse path,
// without opening it: a symbolic link, a name that is not a regular file,
// a regular file with another name too. A missing path is no error. A
// store calls it for its marker files before it changes any file, so that
// an Open that would fail at the marker fails before it changed another.
func CheckOwn(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if !fi.Mode().IsRegular() {
		return notRegular(path, fi.Mode())
	}
	return hardLinked(path, fi)
}

// hardLinked returns OpenOwn's error for a regular file, at path, with
// more than one name.
func hardLinked(path string, fi os.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: it is a file with %d names (a hard link: to another file of the store, or from a copy made with cp -al, which shares every file of the store and so is no copy), which writing it would change too", ErrNotRegular, st.Nlink)}
	}
	return nil
}

// notRegular is Open's error for path, whose type is m's.
func notRegular(path string, m os.FileMode) error {
	return &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: it is %s", ErrNotRegular, Describe(m))}
}

// Describe names the type of a file that is not a regular file: "a
// FIFO", "a directory", "a symbolic link" and so on.
func Describe(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	}
	return fmt.Sprintf("of type %v", m.Type())
}
