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
// A mapping is made over a closed region's placeholder range from the
// pool first (see placeholders), at a huge-page-aligned address inside it
// for a mapping that wants huge pages and at the lowest fitting address
// otherwise. Only if no pooled range fits is fresh address space mapped;
// then the alignment comes from reserving size plus a huge page of
// address space and mapping the file over its aligned part, then
// releasing the rest. Advice only: where the kernel has no huge pages the
// mapping works as a small one.
//
// With small set, the mapping is advised MADV_NOHUGEPAGE instead: 4 KiB
// entries only, even for folios another process brought in large (the
// kernel aligns a file mapping itself where the file system asks for it,
// as ext4 does, and would map those with 2 MiB entries).
//
// The mapping is made with unix.MmapPtr, never unix.Mmap, whose table of
// live mappings would keep an entry for it for good: a region's mapping
// is never passed to unix.Munmap (Close replaces it by placeholder pages).
func mapShared(fd, size, prot int, small bool) ([]byte, error) {
	huge := !small && size >= hugePage
	align := sysPageSize
	if huge {
		align = hugePage
	}
	p, _ := mapPooled(fd, size, prot, align)
	if p == nil {
		// No pooled range fits, or mapping over one failed: what fails
		// there fails on fresh address space too, as a rule, and then
		// mapFresh's error is the one returned.
		var err error
		if p, err = mapFresh(fd, size, prot, huge); err != nil {
			return nil, err
		}
	}
	mem := unsafe.Slice((*byte)(p), size)
	switch {
	case huge:
		adviseHuge(mem)
	case small:
		adviseSmall(mem)
	}
	return mem, nil
}

// mapFresh is mapShared on address space that was not mapped before: at a
// huge-page-aligned address if huge is set, wherever the kernel puts it
// otherwise.
func mapFresh(fd, size, prot int, huge bool) (unsafe.Pointer, error) {
	if !huge {
		return unix.MmapPtr(fd, 0, nil, uintptr(size), prot, unix.MAP_SHARED)
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
	// Release the reservation around the mapping (PROT_NONE, never
	// readable: no reader can be there); a failure leaves only
	// inaccessible address space behind.
	if head > 0 {
		unix.MunmapPtr(res, head)
	}
	if tail := span - head - pageRound(uintptr(size)); tail > 0 {
		unix.MunmapPtr(unsafe.Add(at, pageRound(uintptr(size))), tail)
	}
	return p, nil
}
