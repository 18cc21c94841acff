// Package prefetch asks the CPU to start loading cache lines that a batch
// of lookups is about to read, so that their misses overlap.
//
// A filter lookup on a filter larger than the caches misses once (Bloom,
// counting) or twice (cuckoo), and the miss, with the page walk a TLB miss
// adds, takes a few hundred nanoseconds. A loop that touches every address
// with a plain load first keeps few of them in flight: each load holds a
// reorder-buffer entry until its line arrives, so the core stalls once the
// buffer fills. A software prefetch retires at once and only holds a
// miss buffer, so a batch of them keeps as many misses in flight as the
// core has buffers. On amd64 Lines is PREFETCHT0 in a small assembly loop,
// on arm64 PRFM PLDL1KEEP; elsewhere (or with the purego build tag) it
// falls back to plain loads of the first word of each line, which is what
// the lookups did before.
//
// A prefetch never faults: an address it cannot translate is dropped. The
// fallback loads, so its addresses must be readable, which is what every
// caller passes: the words it is about to probe.
package prefetch

import "unsafe"

// Lines starts loading the cache line at each address of ps into the
// caches and returns without waiting for any of them.
func Lines(ps []unsafe.Pointer) {
	if len(ps) > 0 {
		lines(&ps[0], len(ps))
	}
}
