//go:build !linux

package mmapbits

import "golang.org/x/sys/unix"

// fallocate is not available here: allocate writes zeros instead.
var fallocate = func(fd int, mode uint32, off, size int64) error { return unix.ENOSYS }

// freeSpace cannot tell the free space here: allocate finds out.
var freeSpace = func(fd int) (free uint64, ok bool) { return 0, false }
