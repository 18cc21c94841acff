package main

// diskCounters are cumulative counters of a block device (Linux's
// /proc/diskstats): write requests, flush requests (a cache flush per
// fdatasync, on a device with a volatile write cache) and the
// milliseconds spent flushing. They count every process's I/O to the
// device, not kvbench's alone.
type diskCounters struct {
	writes, flushes, flushMs uint64
}

// sub returns c minus an earlier reading.
func (c diskCounters) sub(earlier diskCounters) diskCounters {
	return diskCounters{
		writes:  c.writes - earlier.writes,
		flushes: c.flushes - earlier.flushes,
		flushMs: c.flushMs - earlier.flushMs,
	}
}
