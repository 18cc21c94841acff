package mmapbits

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A closed region's mapping is never unmapped: Close replaces it, at the
// same address (MAP_FIXED), with anonymous PROT_READ zero pages, so that
// a lookup that read the region's words before Close and goes on reading
// after it reads zeros instead of faulting. No one can tell when the last
// such reader is done, so the placeholder stays mapped for the life of
// the process; to keep that from leaking address space (and mappings)
// with every Close, the placeholder's range goes to a process-wide pool,
// and a later mapping of a region file is moved over part of a pooled
// range (mapped elsewhere, then mremap with MREMAP_FIXED over the
// placeholder, with no moment at which the range is unmapped; MAP_FIXED
// where there is no address space for the first step) before any fresh
// address space is mapped. What it
// leaves of the range (before and after it) goes back to the pool, still
// mapped as placeholder pages.
//
// A stale reader of a closed region may therefore read another file's
// bytes rather than zeros; it never faults. The store treats what a
// lookup read as a hint once its filter is closed (it checks the
// filter's closed flag again where an answer could be wrong: a miss, a
// counting filter's count, a fill count), and no writer touches a closed
// region.
//
// There is no cap on the pool, and none could be made safe by unmapping:
// any placeholder may still be read by a reader that does not yet know
// its region closed, and an unmapped range could fault it, or be taken
// by an unrelated mapping whose contents it would then read. A cap that
// stopped adding ranges to the pool would bound nothing (the range stays
// mapped either way) and would only lose it for reuse. The pool's total
// is bounded instead by reuse: it holds about the address space of the
// regions once open at the same time, plus what fragmentation and the
// 2 MiB alignment of huge-page mappings leave unusable, and the slack of
// size classes: a fresh mapping of a huge page or more takes the address
// space of its class (mapFresh, sizeClass), so that a file slightly
// larger than every closed range still fits a class's range, and growth
// leaves ranges behind per class crossed, not per close.

// span is a range of address space mapped as placeholder pages:
// [addr, addr+size), both multiples of the system page size.
type span struct{ addr, size uintptr }

// end returns the first address past s.
func (s span) end() uintptr { return s.addr + s.size }

// spanPool is a set of disjoint placeholder ranges. Adjacent ranges are
// merged as they are added.
type spanPool struct {
	mu    sync.Mutex
	spans []span // sorted by addr; disjoint, and no span ends where the next begins
}

// placeholders is the process-wide pool of closed regions' ranges.
var placeholders spanPool

// sysPageSize is the system page size: mappings cover whole pages.
var sysPageSize = uintptr(os.Getpagesize())

// pageRound rounds n up to a whole number of system pages.
func pageRound(n uintptr) uintptr { return (n + sysPageSize - 1) &^ (sysPageSize - 1) }

// put adds the placeholder range [addr, addr+size) to p, merged with the
// ranges it adjoins. An empty range is ignored.
func (p *spanPool) put(addr, size uintptr) {
	if size == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.putLocked(span{addr, size})
}

// putLocked is put with p.mu held.
func (p *spanPool) putLocked(s span) {
	i, _ := slices.BinarySearchFunc(p.spans, s.addr, func(x span, a uintptr) int {
		switch {
		case x.addr < a:
			return -1
		case x.addr > a:
			return 1
		}
		return 0
	})
	// i is where s goes: spans[i-1] (if any) starts before it.
	if i > 0 && p.spans[i-1].end() > s.addr || i < len(p.spans) && s.end() > p.spans[i].addr {
		// An overlap means two owners of one range: a bug that reusing
		// either would turn into one mapping clobbering another.
		panic("mmapbits: placeholder range added twice")
	}
	mergeLeft := i > 0 && p.spans[i-1].end() == s.addr
	mergeRight := i < len(p.spans) && s.end() == p.spans[i].addr
	switch {
	case mergeLeft && mergeRight:
		p.spans[i-1].size += s.size + p.spans[i].size
		p.spans = slices.Delete(p.spans, i, i+1)
	case mergeLeft:
		p.spans[i-1].size += s.size
	case mergeRight:
		p.spans[i].addr = s.addr
		p.spans[i].size += s.size
	default:
		p.spans = slices.Insert(p.spans, i, s)
	}
}

// take removes from p the smallest range that holds size bytes (a
// multiple of the page size) at an address aligned to align (a power of
// two, at least the page size), and returns it with that address: the
// caller owns the range until it gives what it does not use back with
// put. ok is false when no range fits.
func (p *spanPool) take(size, align uintptr) (s span, at uintptr, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := -1
	for i, c := range p.spans {
		a := (c.addr + align - 1) &^ (align - 1)
		if a < c.addr || a > c.end() || c.end()-a < size {
			continue
		}
		if best < 0 || c.size < p.spans[best].size {
			best, at = i, a
			if align < hugePage {
				// A mapping that wants no huge-page alignment goes at
				// the range's end: its aligned start, where a huge
				// mapping (a filter rebuilt a little larger) would go,
				// stays whole.
				at = (c.end() - size) &^ (align - 1)
			}
		}
	}
	if best < 0 {
		return span{}, 0, false
	}
	s = p.spans[best]
	p.spans = slices.Delete(p.spans, best, best+1)
	return s, at, true
}

// total returns the address space p holds, in bytes, and its number of
// ranges.
func (p *spanPool) total() (bytes uintptr, ranges int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.spans {
		bytes += s.size
	}
	return bytes, len(p.spans)
}

// addrPtr returns addr as a pointer, for the system calls: every address
// the pool holds is of memory outside the Go heap, mapped by this package.
func addrPtr(addr uintptr) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(nil), addr) }

// placehold replaces the pages of [addr, addr+size) by anonymous PROT_READ
// zero pages (MAP_FIXED): whatever was mapped there goes, in one step, so
// that a reader of the range never finds it unmapped.
func placehold(addr, size uintptr) error {
	_, err := unix.MmapPtr(-1, 0, addrPtr(addr), size,
		unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_FIXED)
	return err
}

// mapMu serializes mapShared: a pooled or fresh mapping that fails
// halfway never races another, which could take its hole for a range of
// its own. (Close maps placeholder pages over its own range only, which
// is in no one's hands but its own until it is pooled.)
var mapMu sync.Mutex

// mapPooled maps the first size bytes of the file fd with prot, MAP_SHARED,
// over a pooled placeholder range at an address aligned to align, and
// returns the mapping's address; what the mapping leaves of the range goes
// back to the pool. It returns nil, with no error, when no pooled range
// fits, and nil with the error when the mapping failed. Called with mapMu
// held.
func mapPooled(fd, size, prot int, align uintptr) (unsafe.Pointer, error) {
	length := pageRound(uintptr(size))
	s, at, ok := placeholders.take(length, align)
	if !ok {
		return nil, nil
	}
	p, touched, err := mapOver(fd, size, prot, at)
	if err != nil {
		placeholders.put(s.addr, at-s.addr)
		placeholders.put(at+length, s.end()-(at+length))
		// A failure before the move leaves the placeholder as it was. A
		// failed move may have unmapped the range: map a placeholder
		// again where nothing is mapped; if anything else is there, the
		// range cannot be told to be ours only and is left out of the
		// pool for good (leaked, as every closed range once was). mapMu
		// keeps this package's pooled and fresh mappings out of it
		// meanwhile, not its views, its private builds' memory or the
		// runtime's: placeholderAt tells those apart.
		if !touched || placeholderAt(at, length) || replace(at, length) {
			placeholders.put(at, length)
		}
		return nil, err
	}
	placeholders.put(s.addr, at-s.addr)
	placeholders.put(at+length, s.end()-(at+length))
	return p, nil
}

// placeholderAt reports whether [addr, addr+size) is still mapped as
// placeholder pages, as /proc/self/maps shows it (anonymous, private,
// read-only, no file). Without the file, it reports false.
func placeholderAt(addr, size uintptr) bool { return mappedAs(addr, size, "r--p") }

// mappedAs reports whether /proc/self/maps shows [addr, addr+size) wholly
// mapped anonymous, with no file or name, with the permissions perms
// ("r--p": placeholder pages; "---p": a reservation). Without the file,
// it reports false.
func mappedAs(addr, size uintptr, perms string) bool {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return false
	}
	next := addr // covered up to here
	for line := range strings.Lines(string(maps)) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || uintptr(end) <= next || uintptr(start) >= addr+size {
			continue
		}
		if uintptr(start) > next || f[1] != perms || f[4] != "0" || len(f) > 5 {
			return false
		}
		if next = uintptr(end); next >= addr+size {
			return true
		}
	}
	return false
}

// replace maps placeholder pages over [addr, addr+size) if nothing is
// mapped there, and reports whether it did. (Where the kernel does not
// know MAP_FIXED_NOREPLACE, the address is only a hint: a mapping placed
// elsewhere is unmapped at once and replace reports false.)
func replace(addr, size uintptr) bool {
	p, err := unix.MmapPtr(-1, 0, addrPtr(addr), size,
		unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON|mapFixedNoReplace)
	if err != nil {
		return false
	}
	if uintptr(p) != addr {
		unix.MunmapPtr(p, size) // never readable by anyone: safe to release
		return false
	}
	return true
}
