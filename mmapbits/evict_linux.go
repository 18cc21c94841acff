package mmapbits

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fdatasync writes f's dirty data pages and waits for them.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// dropCache drops f's clean, unmapped pages from the page cache.
func dropCache(f *os.File) error { return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }

// cachedPages returns how many of f's pages are in memory, and how many it
// has, by mincore over a mapping of it that touches none. On tmpfs and
// ramfs, whose pages are the file, it returns 0.
func cachedPages(f *os.File) (cached, pages int, err error) {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
		return 0, 0, err
	}
	if t := uint32(fs.Type); t == unix.TMPFS_MAGIC || t == unix.RAMFS_MAGIC {
		return 0, 0, nil
	}
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, 0, err
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Munmap(mem)
	ps := os.Getpagesize()
	vec := make([]byte, (len(mem)+ps-1)/ps)
	// (unix.Mincore is not defined for every Linux architecture.)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, 0, errno
	}
	for _, v := range vec {
		cached += int(v & 1)
	}
	return cached, len(vec), nil
}
