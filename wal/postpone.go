package wal

import (
	"errors"
	"syscall"
)

// notMadeError is createSegment's error when the new segment's name never
// appeared in the directory: its temporary file could not be created,
// written, synced or renamed into place (a failed rename changes no
// name), and was removed. The log may then go on in the
// active segment (rotate); after the rename it may not, since a crash
// could keep the empty new segment beside records the old one holds past
// its first LSN.
type notMadeError struct{ err error }

func (e *notMadeError) Error() string { return e.err.Error() }

func (e *notMadeError) Unwrap() error { return e.err }

// lacksRoom reports whether err is the system's refusal for want of room
// or file descriptors: ENOSPC (no free block, or no free inode), EDQUOT,
// EMFILE or ENFILE. An operator or the process frees them; nothing is
// wrong with the disk or the log.
func lacksRoom(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
