package mmapbits

import (
	"math/bits"
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
// for a mapping that wants huge pages and at the range's end otherwise,
// mapped elsewhere and then moved there (mapOver). Only if no pooled range fits is fresh address space mapped;
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
	mapMu.Lock()
	defer mapMu.Unlock()
	if err := guard.admit(); err != nil {
		return nil, err
	}
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
	guard.made()
	mem := unsafe.Slice((*byte)(p), size)
	switch {
	case huge:
		adviseHuge(mem)
	case small:
		adviseSmall(mem)
	}
	return mem, nil
}

// mapFresh is mapShared on address space that was not mapped before. A
// mapping of less than a huge page goes wherever the kernel puts it
// (next to the last, as a rule, so that closed ones merge into ranges
// that later ones fit). A larger one starts at a huge-page-aligned address
// (the kernel aligns a large file mapping itself where the file system
// asks for it, so with huge unset too) and takes address space for its
// size class (sizeClass): the mapping, then placeholder pages up to the
// class's end, which go to the pool. Without that slack, a file a little
// larger than every closed range (a filter rebuilt one size up, again and
// again) fits none of them and leaves one more behind at each close, for
// good, since none is ever unmapped.
func mapFresh(fd, size, prot int, huge bool) (unsafe.Pointer, error) {
	length := pageRound(uintptr(size))
	if !huge && length < hugePage {
		return unix.MmapPtr(fd, 0, nil, uintptr(size), prot, unix.MAP_SHARED)
	}
	class := sizeClass(length)
	span := class + hugePage
	res, err := unix.MmapPtr(-1, 0, nil, span, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, err
	}
	head := (hugePage - uintptr(res)%hugePage) % hugePage
	at := unsafe.Add(res, head)
	// Over the reservation, which no reader can read, MAP_FIXED will do
	// (a move, as mapOver makes, would need address space for the file
	// twice over).
	p, err := unix.MmapPtr(fd, 0, at, uintptr(size), prot, unix.MAP_SHARED|unix.MAP_FIXED)
	if err != nil {
		// A failed MAP_FIXED may have unmapped [at, at+length), and a
		// mapping not this package's may be there now: release the
		// reservation around it, and the middle only if it is still
		// the reservation.
		unix.MunmapPtr(res, head)
		unix.MunmapPtr(unsafe.Add(at, length), span-head-length)
		if mappedAs(uintptr(at), length, "---p") {
			unix.MunmapPtr(at, length)
		}
		return nil, err
	}
	// The class's rest becomes placeholder pages in the pool; if that
	// fails it stays reserved, PROT_NONE, and is released below (no
	// reader can be there: it was never readable).
	keep := length
	if rest := class - length; rest > 0 && placehold(uintptr(at)+length, rest) == nil {
		placeholders.put(uintptr(at)+length, rest)
		keep = class
	}
	// Release the reservation around what is kept; a failure leaves only
	// inaccessible address space behind.
	if head > 0 {
		unix.MunmapPtr(res, head)
	}
	if tail := span - head - keep; tail > 0 {
		unix.MunmapPtr(unsafe.Add(at, keep), tail)
	}
	return p, nil
}

// sizeClass returns the address space a fresh mapping of length bytes (a
// multiple of the page size, at least a huge page) takes: length rounded
// up to whole huge pages, then, from 4 huge pages on, to the next of 4, 5,
// 6 or 7 times a power of two of them. A file that grows a little at
// each rebuild then fits its class's closed ranges until it outgrows the
// class: the ranges left behind for good are bounded by the number of
// classes (about four per doubling), not by the number of rebuilds. The
// slack is at most a quarter of the mapping from 8 MiB on; below, the
// rounding to whole huge pages dominates (2 MiB and a page take 4 MiB).
func sizeClass(length uintptr) uintptr {
	u := (length + hugePage - 1) / hugePage
	if u > 4 {
		step := uintptr(1) << (bits.Len(uint(u)) - 3) // u has 3 bits above it
		u = (u + step - 1) / step * step
	}
	return u * hugePage
}
