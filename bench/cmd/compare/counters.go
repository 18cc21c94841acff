package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
)

// The -counters flag counts hardware events (cycles, instructions, cache
// and TLB misses) around the timed passes of the calling goroutine, which
// is locked to its OS thread for the run: perf_event_open counts one
// thread. A build that runs goroutines of its own (a store's Load) is
// counted on the calling thread only. Where the kernel gives no hardware
// counters (most virtual machines), the events that cannot be opened are
// named with the error and left out, and task-clock, a software event
// every Linux kernel counts, remains.

// lockCounters locks the calling goroutine to its OS thread, where the
// timed passes of size n then run, and opens the counters on it, logging
// what it counts; it returns nil counters if none can be opened. done
// closes them and unlocks the thread.
func lockCounters(log io.Writer, n uint64) (c *counters, done func()) {
	runtime.LockOSThread()
	c, err := openCounters()
	if err != nil {
		fmt.Fprintf(log, "n=%d: -counters: %v\n", n, err)
		return nil, runtime.UnlockOSThread
	}
	fmt.Fprintf(log, "n=%d: -counters: counting %v; not counted: %v\n", n, c.names, c.failed)
	return c, func() {
		c.close()
		runtime.UnlockOSThread()
	}
}

// tally sums the counts of one library's passes of one kind.
type tally struct {
	ops int
	v   []float64
}

// add adds one pass's deltas (after - before) over n operations.
func (t *tally) add(before, after []float64, n int) {
	if t.v == nil {
		t.v = make([]float64, len(after))
	}
	for i := range after {
		t.v[i] += after[i] - before[i]
	}
	t.ops += n
}

// counterRow is one line of a counters table.
type counterRow struct {
	lib, pass string
	t         *tally
}

// countersTable returns a markdown table of events per operation, a row
// per library and pass.
func countersTable(c *counters, rows []counterRow) string {
	var b strings.Builder
	b.WriteString("\nHardware events per operation (perf_event_open on the calling thread, user mode only; " +
		"summed over every timed pass of that kind, then divided by its operations)")
	if len(c.failed) > 0 {
		fmt.Fprintf(&b, "; not counted here: %s", strings.Join(c.failed, "; "))
	}
	b.WriteString(".\n\n")
	fmt.Fprintf(&b, "| library | pass | %s | IPC |\n|---|---|%s---:|\n",
		strings.Join(c.names, " | "), strings.Repeat("---:|", len(c.names)))
	cyc, ins := c.index("cycles"), c.index("instructions")
	for _, r := range rows {
		if r.t == nil || r.t.ops == 0 {
			continue
		}
		cells := []string{r.lib, r.pass}
		for i := range c.names {
			cells = append(cells, fmt.Sprintf("%.2f", r.t.v[i]/float64(r.t.ops)))
		}
		ipc := "–"
		if cyc >= 0 && ins >= 0 && r.t.v[cyc] > 0 {
			ipc = fmt.Sprintf("%.2f", r.t.v[ins]/r.t.v[cyc])
		}
		fmt.Fprintf(&b, "| %s | %s |\n", strings.Join(cells, " | "), ipc)
	}
	b.WriteString("\n")
	return b.String()
}

// index returns the position of the event named name, or -1.
func (c *counters) index(name string) int {
	for i, n := range c.names {
		if n == name {
			return i
		}
	}
	return -1
}
