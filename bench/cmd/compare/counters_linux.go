package main

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// counters are the events opened on one OS thread.
type counters struct {
	names  []string // the events opened, in column order
	failed []string // "event: error" for the events that could not be
	fds    []int
	buf    [24]byte
}

// counterEvents are the events -counters asks for, in column order.
var counterEvents = []struct {
	name   string
	typ    uint32
	config uint64
}{
	{"task-clock ns", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_TASK_CLOCK},
	{"cycles", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES},
	{"instructions", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_INSTRUCTIONS},
	{"L1d load misses", unix.PERF_TYPE_HW_CACHE, unix.PERF_COUNT_HW_CACHE_L1D |
		unix.PERF_COUNT_HW_CACHE_OP_READ<<8 | unix.PERF_COUNT_HW_CACHE_RESULT_MISS<<16},
	{"LLC misses", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CACHE_MISSES},
	{"dTLB load misses", unix.PERF_TYPE_HW_CACHE, unix.PERF_COUNT_HW_CACHE_DTLB |
		unix.PERF_COUNT_HW_CACHE_OP_READ<<8 | unix.PERF_COUNT_HW_CACHE_RESULT_MISS<<16},
	{"branch misses", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_BRANCH_MISSES},
}

// openCounters opens every event of counterEvents it can on the calling
// thread (the caller has locked its goroutine to it), counting from now
// on. It fails only if none can be opened.
func openCounters() (*counters, error) {
	c := &counters{}
	for _, e := range counterEvents {
		attr := unix.PerfEventAttr{
			Type:        e.typ,
			Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
			Config:      e.config,
			Read_format: unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING,
			Bits:        unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
		}
		fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			c.failed = append(c.failed, fmt.Sprintf("%s: %v", e.name, err))
			continue
		}
		c.names = append(c.names, e.name)
		c.fds = append(c.fds, fd)
	}
	if len(c.fds) == 0 {
		return nil, fmt.Errorf("no event could be opened (%v)", c.failed)
	}
	return c, nil
}

// read returns every open event's count, scaled up by the share of time
// it was scheduled where the kernel multiplexed it.
func (c *counters) read() []float64 {
	v := make([]float64, len(c.fds))
	for i, fd := range c.fds {
		n, err := unix.Read(fd, c.buf[:])
		if err != nil || n != len(c.buf) {
			continue
		}
		val := float64(binary.NativeEndian.Uint64(c.buf[0:]))
		enabled := float64(binary.NativeEndian.Uint64(c.buf[8:]))
		running := float64(binary.NativeEndian.Uint64(c.buf[16:]))
		if running > 0 && running < enabled {
			val *= enabled / running
		}
		v[i] = val
	}
	return v
}

// close closes the events.
func (c *counters) close() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
}
