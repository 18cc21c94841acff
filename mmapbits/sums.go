package mmapbits

import (
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/internal/workers"
)

// SumsPerPage is the number of 4-byte data-page checksums one checksum page
// holds (format version 3).
const SumsPerPage = PageSize / 4

// zeroPageSum is the CRC-32C of a page of zeros. Stored checksums are
// masked with it, so that the checksum pages of a new file, all zeros, are
// right for its zeroed data pages without a write.
var zeroPageSum = crc.Checksum(make([]byte, PageSize))

// PageSum returns the checksum stored for a data page holding words (one
// page, WordsPerPage words): the CRC-32C (Castagnoli) of the page's bytes,
// XOR the CRC-32C of a page of zeros, so a zeroed page sums to 0. The
// caller must keep the words from changing meanwhile (or copy them first).
func PageSum(words []uint64) uint32 {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)
	return crc.Checksum(b) ^ zeroPageSum
}

// PageCheck is what a region knows about one data page's checksum.
type PageCheck struct {
	// HasSum is false if the file has no checksums (format version 1 or
	// 2, or a memory region): nothing else is set.
	HasSum bool
	// Stored is the checksum in the file; Computed is PageSum of the page
	// as read now (through atomic loads, so writers may run).
	Stored, Computed uint32
	// Stale says Stored is not expected to match: the page was written
	// (Touch) since UpdateSums last computed its checksum, or the
	// checksums were invalidated and not yet recomputed.
	Stale bool
}

// pageSums keeps the data-page checksums of a version 3 region: which
// pages were written since their checksum was computed, and the
// recomputation. A nil *pageSums, or one with no sums, does nothing.
type pageSums struct {
	data []uint64 // the data words
	sums []uint32 // the checksum pages, one uint32 per data page; nil without
	// stale has bit p set once data page p was written (Touch) since its
	// checksum was last computed. Read and written atomically.
	stale []uint64
	// all says every checksum is unknown (InvalidateSums) until
	// UpdateSums(true).
	all atomic.Bool
	mu  sync.Mutex // serializes update
}

func newPageSums(data []uint64, sums []uint32) *pageSums {
	if sums == nil {
		return nil
	}
	pages := uint64(len(data)) / WordsPerPage
	return &pageSums{data: data, sums: sums[:pages], stale: make([]uint64, (pages+63)/64)}
}

// touch marks the pages holding words [from, to) stale. Writers call it
// after their write: an update that ran before the write then left the
// bit for the next one.
func (s *pageSums) touch(from, to uint64) {
	if s == nil {
		return
	}
	to = min(to, uint64(len(s.data)))
	if from >= to {
		return
	}
	for p := from / WordsPerPage; p <= (to-1)/WordsPerPage; p++ {
		w, bit := &s.stale[p/64], uint64(1)<<(p%64)
		if atomic.LoadUint64(w)&bit == 0 {
			atomic.OrUint64(w, bit)
		}
	}
}

// invalidate marks every checksum unknown until update(true).
func (s *pageSums) invalidate() {
	if s != nil {
		s.all.Store(true)
	}
}

// update recomputes the checksums of the stale pages and, if full, of
// every page once they were invalidated, and returns how many it computed;
// wrote, if not nil, is called with each data page whose checksum it
// stored. The caller keeps writers out meanwhile. With sumsParallelMin
// stale pages or more and no wrote, it computes them on up to GOMAXPROCS
// goroutines, each over an equal share of the page range (a Load's closing
// checkpoint finds every page of the filter stale: 131,180 pages for a
// counting filter of 1e8 keys took 118 ms on one goroutine). A caller that
// reads the mapping with debug.SetPanicOnFault gets a fault on another
// goroutine as a panic of its own, with the same value.
func (s *pageSums) update(full bool, wrote func(p uint64)) int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := full && s.all.Load()
	procs := 1
	if wrote == nil {
		stale := len(s.sums)
		if !all {
			stale = 0
			for i := range s.stale {
				stale += bits.OnesCount64(atomic.LoadUint64(&s.stale[i]))
			}
		}
		procs = max(1, min(runtime.GOMAXPROCS(0), stale/sumsParallelMin))
	}
	var n int
	if procs == 1 {
		n = s.updateWords(0, len(s.stale), all, wrote)
	} else {
		var total atomic.Int64
		workers.Run(procs, func(w int) { // faulting as the caller does
			lo, hi := len(s.stale)*w/procs, len(s.stale)*(w+1)/procs
			total.Add(int64(s.updateWords(lo, hi, all, nil)))
		})
		n = int(total.Load())
	}
	if all {
		s.all.Store(false)
	}
	return n
}

// sumsParallelMin is the fewest stale pages (32 MiB) per goroutine that
// update computes on more than one. A variable for tests.
var sumsParallelMin = 8192

// updateWords is update over the pages of stale words [lo, hi).
func (s *pageSums) updateWords(lo, hi int, all bool, wrote func(p uint64)) int {
	n := 0
	for wi := lo; wi < hi; wi++ {
		set := atomic.SwapUint64(&s.stale[wi], 0)
		if all {
			set = ^uint64(0)
		}
		for set != 0 {
			p := uint64(wi)*64 + uint64(bits.TrailingZeros64(set))
			set &= set - 1
			if p >= uint64(len(s.sums)) {
				break
			}
			atomic.StoreUint32(&s.sums[p], PageSum(s.data[p*WordsPerPage:(p+1)*WordsPerPage]))
			if wrote != nil {
				wrote(p)
			}
			n++
		}
	}
	return n
}

// check compares data page p (0 <= p < pages) with its stored checksum.
func (s *pageSums) check(p uint64) PageCheck {
	if s == nil || p >= uint64(len(s.sums)) {
		return PageCheck{}
	}
	c := PageCheck{HasSum: true, Stale: s.all.Load() || atomic.LoadUint64(&s.stale[p/64])&(1<<(p%64)) != 0}
	c.Stored = atomic.LoadUint32(&s.sums[p])
	var page [WordsPerPage]uint64
	for i := range page {
		page[i] = atomic.LoadUint64(&s.data[p*WordsPerPage+uint64(i)])
	}
	c.Computed = PageSum(page[:])
	return c
}

// sumsOf views the checksum pages at mem (8-byte aligned) as uint32s.
func sumsOf(mem []byte) []uint32 {
	if len(mem) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&mem[0])), len(mem)/4)
}
