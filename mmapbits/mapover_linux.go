package mmapbits

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapOver maps the first size bytes of the file fd with prot, MAP_SHARED,
// at at: over a placeholder or a reservation of this package's, which it
// replaces. The file is mapped first wherever the kernel puts it, then
// moved to at (mremap, MREMAP_FIXED): a file system's mmap hook that
// fails (an I/O error, a file server) then fails before anything at at
// has changed, where a MAP_FIXED mapping over it would already have torn
// the placeholder down and could leave a hole, on which a reader of a
// closed region would fault. Where there is no address space for the
// temporary mapping (ENOMEM), it maps over at directly (MAP_FIXED), which
// needs none. touched reports a failure after which at may or may not
// still hold what it held.
func mapOver(fd, size, prot int, at uintptr) (p unsafe.Pointer, touched bool, err error) {
	length := pageRound(uintptr(size))
	tmp, err := unix.MmapPtr(fd, 0, nil, uintptr(size), prot, unix.MAP_SHARED)
	if errors.Is(err, unix.ENOMEM) {
		// No address space for the temporary mapping (RLIMIT_AS, or the
		// mappings near vm.max_map_count), which MAP_FIXED over the
		// placeholder does not need: map so, as the only way left.
		p, err = unix.MmapPtr(fd, 0, addrPtr(at), uintptr(size), prot, unix.MAP_SHARED|unix.MAP_FIXED)
		return p, err != nil, err
	}
	if err != nil {
		return nil, false, err
	}
	p, err = unix.MremapPtr(tmp, length, addrPtr(at), length, unix.MREMAP_MAYMOVE|unix.MREMAP_FIXED)
	if err != nil {
		unix.MunmapPtr(tmp, length)
		return nil, true, err
	}
	return p, false, nil
}
