package mmapbits

import (
	"errors"
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
	// noLimit is set once the limit or the count cannot be read for
	// good (no /proc, no such limit): the guard then admits every
	// mapping. A read that fails for a reason that passes (no descriptor
	// left to open the file with: transient) does not set it.
	noLimit bool
}

var guard mapGuard

// mapLimitHook returns the process's mapping limit, or errNoMapLimit
// where there is none it can read, or the error of a read that failed;
// a variable so that tests can lower it.
var mapLimitHook = mapLimit

// errNoMapLimit says the process's mapping limit cannot be read on this
// system (not Linux, no /proc, a value not understood).
var errNoMapLimit = errors.New("mmapbits: no mapping limit to read")

// transient reports whether err, reading the limit or the count, may
// pass: the process or the system is short of descriptors or memory, or
// the read was interrupted. Any other error is for good (errNoMapLimit,
// no such file, permission denied).
func transient(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EAGAIN) ||
		errors.Is(err, syscall.EINTR)
}

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
	if g.limit == 0 || g.since >= max(minRecount, g.counted) || g.over() {
		limit, err := mapLimitHook()
		n := 0
		if err == nil {
			n, err = mapCountHook()
		}
		switch {
		case err == nil:
			g.counted, g.limit, g.since = n, limit, 0
		case !transient(err):
			g.noLimit = true
			return nil
		case g.limit == 0 || g.over():
			// No count to go by, or the estimate passes the bound: refused
			// for what the count lacked (a descriptor), which passes.
			// The guard counts again at the next mapping.
			return fmt.Errorf("cannot count the process's memory mappings against its limit: %w", err)
		}
		// Otherwise the estimate admits this mapping; the guard counts
		// again at the next one.
	}
	if bound := g.limit - headroom(g.limit); g.counted+maxPerMapping > bound {
		return fmt.Errorf("%d of the process's memory mappings in use, and %d is the limit less the %d it keeps for the Go runtime and the rest of the process (raise vm.max_map_count, or keep fewer filters open): %w (%w)",
			g.counted, bound, headroom(g.limit), ErrTooManyMappings, syscall.ENOMEM)
	}
	return nil
}

// over reports whether the estimate of the process's mappings after one
// more of this package's (the last count plus maxPerMapping for each
// since and for it) would pass the bound. g.limit is not 0.
func (g *mapGuard) over() bool {
	return g.counted+maxPerMapping*(g.since+1) > g.limit-headroom(g.limit)
}

// made records one mapping made since the last count.
func (g *mapGuard) made() { g.since++ }
