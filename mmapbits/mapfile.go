package mmapbits

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapShared maps the first size bytes of the file fd with prot,
// MAP_SHARED. Unless small is set, a mapping of at least a huge page
// starts at a huge-page-aligned address and is advised MADV_HUGEPAGE: the
// kernel then reads its pages into the page cache as 2 MiB folios (where
// the file system supports large folios: ext4 since Linux 6.16, XFS since
// 5.18) and maps each with one page-table entry instead of 512, so that
// random lookups on a filter larger than the TLB's reach take far fewer
// TLB misses and page walks. The address must be aligned for that, as
// file offset 0 is; an unaligned mapping of the same folios gets 4 KiB
// entries only.
//
// The alignment comes from reserving size plus a huge page of address
// space and mapping the file over its aligned part, then releasing the
// rest. Advice only: where the kernel has no huge pages the mapping works
// as a small one.
//
// With small set, the mapping is advised MADV_NOHUGEPAGE instead: 4 KiB
// entries only, even for folios another process brought in large (the
// kernel aligns a file mapping itself where the file system asks for it,
// as ext4 does, and would map those with 2 MiB entries).
func mapShared(fd, size, prot int, small bool) ([]byte, error) {
	if small || size < hugePage {
		mem, err := unix.Mmap(fd, 0, size, prot, unix.MAP_SHARED)
		if err == nil && small {
			adviseSmall(mem)
		}
		return mem, err
	}
	span := uintptr(size + hugePage)
	res, err := unix.MmapPtr(-1, 0, nil, span, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, err
	}
	head := (hugePage - uintptr(res)%hugePage) % hugePage
	at := unsafe.Add(res, head)
	p, err := unix.MmapPtr(fd, 0, at, uintptr(size), prot, unix.MAP_SHARED|unix.MAP_FIXED)
	if err != nil {
		unix.MunmapPtr(res, span)
		return nil, err
	}
	// Release the reservation around the mapping; a failure leaves only
	// inaccessible address space behind.
	if head > 0 {
		unix.MunmapPtr(res, head)
	}
	if tail := span - head - uintptr(size); tail > 0 {
		unix.MunmapPtr(unsafe.Add(at, size), tail)
	}
	mem := unsafe.Slice((*byte)(p), size)
	adviseHuge(mem)
	return mem, nil
}
