//go:build !linux

package mmapbits

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapOver maps the first size bytes of the file fd with prot, MAP_SHARED,
// at at, over a placeholder or a reservation of this package's
// (MAP_FIXED; without mremap, a failure may leave at unmapped: touched).
func mapOver(fd, size, prot int, at uintptr) (p unsafe.Pointer, touched bool, err error) {
	p, err = unix.MmapPtr(fd, 0, addrPtr(at), uintptr(size), prot, unix.MAP_SHARED|unix.MAP_FIXED)
	return p, err != nil, err
}
