package wal

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Sync is fdatasync(2): it flushes the data and the metadata needed to read
// it back (the size), not the timestamps.
func (f *osFile) Sync() error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return f.named(&os.PathError{Op: "fdatasync", Path: f.File.Name(), Err: err})
		}
		return nil
	}
}
