package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncData makes f's data durable: fdatasync(2), which skips the inode
// update a size-preserving write does not need.
func syncData(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
