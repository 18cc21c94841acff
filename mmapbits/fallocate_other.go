//go:build !linux

package mmapbits

import "golang.org/x/sys/unix"

// fallocate is not available here: allocate writes zeros instead.
var fallocate = func(fd int, mode uint32, off, size int64) error { return unix.ENOSYS }
