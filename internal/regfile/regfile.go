// Package regfile opens files that must be regular files (filter files,
// WAL segments) without blocking on anything else.
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
// file if it is a regular file. Anything else fails with an error wrapping
// ErrNotRegular, and without blocking: the open itself is non-blocking,
// since opening a FIFO to read waits for a writer to come, which would
// hang a read-only open, a backup or an inspection of a directory where a
// FIFO took a file's name. On a regular file the flag changes nothing.
func Open(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: it is %s", ErrNotRegular, describe(fi.Mode()))}
	}
	return f, nil
}

// describe names the type of a file that is not a regular file.
func describe(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return fmt.Sprintf("of type %v", m.Type())
}
