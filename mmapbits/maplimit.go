package mmapbits

import (
	"fmt"
	"syscall"
)

// The kernel limits the number of memory mappings a process may hold
// (vm.max_map_count on Linux, 65,530 by default), and each open region is
// one. At the limit every mmap fails with ENOMEM, the Go runtime's own
// included: its next heap growth or thread stack ends the process
// ("fatal error: runtime: out of memory"). So this package maps a file
// only while the process holds fewer than the limit less a sixteenth of
// it, which it leaves to the runtime and to the rest of the process; past
// that a mapping fails with ErrTooManyMappings, an error the caller can
// return.
//
// Counting the process's mappings means reading /proc/self/maps, which
// costs about a microsecond a mapping of a file (the kernel writes out
// its path): 23 ms at 20,000 on a 2-vCPU EPYC VM, too much for every
// mapping once there are thousands. The guard counts them again once
// this package has made as many mappings since as the last count found
// (at least minRecount), which costs about a microsecond a mapping at any
// scale, and whenever its estimate, the last count plus maxPerMapping for
// each of this package's mappings since, would pass the bound: near the
// bound, it counts every few mappings. Mappings the rest of the process
// makes in between are seen at the next count; the sixteenth kept back
// absorbs them, unless the rest of the process maps thousands at once.

// maxPerMapping is the most mappings (kernel VMAs) one of this package's
// mappings may add: itself, and the split of a pooled placeholder range
// in two around it.
const maxPerMapping = 3

// minRecount is the fewest of this package's mappings between two counts
// of the process's mappings made for no other reason.
const minRecount = 64

// mapGuard is the state of the mapping limit's guard. Its fields are
// guarded by mapMu.
type mapGuard struct {
	counted int // the process's mappings at the last count
	limit   int // the limit at the last count; 0: not counted yet
	since   int // mappings this package made since the last count
	// noLimit is set once the limit or the count cannot be read (no
	// /proc): the guard then admits every mapping.
	noLimit bool
}

var guard mapGuard

// mapLimitHook returns the process's mapping limit, and whether there is
// one it can read; a variable so that tests can lower it.
var mapLimitHook = mapLimit

// mapCountHook returns the number of mappings the process holds; a
// variable so that tests can count the calls.
var mapCountHook = mapCount

// headroom returns the mappings the guard leaves to the rest of the
// process under limit.
func headroom(limit int) int { return limit / 16 }

// admit returns nil if the process may make another mapping, and
// ErrTooManyMappings wrapped with the counts if it may not, wrapping
// syscall.ENOMEM too (the kernel's error at the limit: a caller that
// tells a want of memory from a fault of the file sees it); naming the
// file is the caller's part. Called with mapMu held, before each mapping
// of a region or of a build's anonymous memory, each of which made
// records.
func (g *mapGuard) admit() error {
	if g.noLimit {
		return nil
	}
	if g.limit == 0 || g.since >= max(minRecount, g.counted) ||
		g.counted+maxPerMapping*(g.since+1) > g.limit-headroom(g.limit) {
		limit, ok := mapLimitHook()
		if !ok {
			g.noLimit = true
			return nil
		}
		n, err := mapCountHook()
		if err != nil {
			g.noLimit = true
			return nil
		}
		g.counted, g.limit, g.since = n, limit, 0
	}
	if bound := g.limit - headroom(g.limit); g.counted+maxPerMapping > bound {
		return fmt.Errorf("%d of the process's memory mappings in use, and %d is the limit less the %d it keeps for the Go runtime and the rest of the process (raise vm.max_map_count, or keep fewer filters open): %w (%w)",
			g.counted, bound, headroom(g.limit), ErrTooManyMappings, syscall.ENOMEM)
	}
	return nil
}

// made records one mapping made since the last count.
func (g *mapGuard) made() { g.since++ }
