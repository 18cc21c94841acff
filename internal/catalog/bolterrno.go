package catalog

import (
	"errors"
	"strings"
	"syscall"
)

// bbolt formats some errors of the system with %s, not %w, so that the
// errno no longer wraps (bbolt v1.5.0, db.go: "file resize error: %s"
// from grow's ftruncate, "file sync error: %s" from its fsync, "mmap
// allocate error: %s" from a remap during a transaction, "mlock/munlock
// error: %s"). flattenedBy names those prefixes; flattenedErrnos the
// errnos whose text boltErrno looks for at the end of such an error.
var (
	flattenedBy     = []string{"file resize error: ", "file sync error: ", "mmap allocate error: ", "mlock/munlock error: "}
	flattenedErrnos = []syscall.Errno{syscall.EFBIG, syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.ENOMEM,
		syscall.EAGAIN, syscall.EMFILE, syscall.ENFILE, syscall.EROFS, syscall.EPERM, syscall.EACCES, syscall.EINTR}
)

// errnoError is an error of bbolt whose errno bbolt flattened to text,
// with that errno put back: errors.Is(err, errno) holds, and the text is
// bbolt's. grow marks a failed ftruncate of grow, before the commit wrote
// anything.
type errnoError struct {
	err   error
	errno syscall.Errno
	grow  bool
}

func (e *errnoError) Error() string   { return e.err.Error() }
func (e *errnoError) Unwrap() []error { return []error{e.err, e.errno} }

// boltErrno returns err with the errno bbolt flattened into its text put
// back (errnoError), or err as it is if it wraps an errno already or is
// not one of bbolt's flattened errors.
func boltErrno(err error) error {
	if err == nil {
		return nil
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return err
	}
	msg := err.Error()
	for _, p := range flattenedBy {
		if !strings.Contains(msg, p) {
			continue
		}
		for _, e := range flattenedErrnos {
			if strings.HasSuffix(msg, ": "+e.Error()) {
				return &errnoError{err: err, errno: e, grow: p == flattenedBy[0]}
			}
		}
	}
	return err
}

// GrowRefused reports whether err is a commit that failed because the
// catalog file could not be made larger for want of room under the
// process's file size limit (bbolt's ftruncate in grow returned EFBIG:
// Linux refuses it before it changes the file): bbolt grows the file
// before it writes a page, so the commit wrote nothing, and the same
// commit may succeed once the limit is raised.
func GrowRefused(err error) bool {
	var e *errnoError
	return errors.As(err, &e) && e.grow && e.errno == syscall.EFBIG
}
