package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/filterstore/filterstore/examples/pebble/kv"
)

// printTable writes one row per mode: the median of its runs in each
// column, and its puts/s as a fraction of pebble-only's (when that mode
// ran).
func printTable(w io.Writer, modes []kv.Mode, results map[kv.Mode][]result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tputs/s\tvs pebble-only\tGets/s present\tGets/s absent\tabsent Gets reading pebble\trestart ms\tof which Open+Get ms\t")
	base := 0.0
	if rs, ok := results[kv.ModePebbleOnly]; ok {
		base = median(rs, func(r result) float64 { return r.putsPerSec })
	}
	for _, m := range modes {
		rs := results[m]
		puts := median(rs, func(r result) float64 { return r.putsPerSec })
		ratio := "-"
		if base > 0 {
			ratio = fmt.Sprintf("%.2fx", puts/base)
		}
		fmt.Fprintf(tw, "%v\t%.0f\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", m, puts, ratio,
			median(rs, func(r result) float64 { return r.presentPerSec }),
			median(rs, func(r result) float64 { return r.absentPerSec }),
			median(rs, func(r result) float64 { return float64(r.absentReads) }),
			median(rs, func(r result) float64 { return ms(r.restart) }),
			median(rs, func(r result) float64 { return ms(r.open) }))
	}
	tw.Flush()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median returns the median of f over rs (the mean of the middle two for
// an even count).
func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// printRounds writes every round's puts/s of each mode, with its ratio to
// pebble-only's in the same round (the modes of one round ran back to
// back, so the machine's drift between rounds cancels out of it), and the
// median of each mode's per-round ratios.
func printRounds(w io.Writer, modes []kv.Mode, results map[kv.Mode][]result, rounds int) {
	base, ok := results[kv.ModePebbleOnly]
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "round\t")
	for _, m := range modes {
		fmt.Fprintf(tw, "%v puts/s\t", m)
	}
	fmt.Fprintln(tw)
	ratios := make(map[kv.Mode][]result)
	for r := range rounds {
		fmt.Fprintf(tw, "%d\t", r+1)
		for _, m := range modes {
			puts := results[m][r].putsPerSec
			if !ok || m == kv.ModePebbleOnly {
				fmt.Fprintf(tw, "%.0f\t", puts)
				continue
			}
			ratio := puts / base[r].putsPerSec
			ratios[m] = append(ratios[m], result{putsPerSec: ratio})
			fmt.Fprintf(tw, "%.0f (%.2fx)\t", puts, ratio)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if !ok || len(modes) < 2 {
		return
	}
	fmt.Fprint(w, "median of the per-round ratios to pebble-only:")
	for _, m := range modes {
		if m != kv.ModePebbleOnly {
			fmt.Fprintf(w, " %v %.2fx", m, median(ratios[m], func(r result) float64 { return r.putsPerSec }))
		}
	}
	fmt.Fprintln(w)
}

// printDisk writes, per mode, the syncs the puts cost: the puts per write
// group (ModeBatch's shared filter Batch and pebble batch), the filter
// store's fdatasyncs and the device's flush requests per put, and the device's
// flushes, writes and milliseconds flushing per second of puts (medians
// of the runs; rounds whose counters could not be read are left out).
// When the device completes about the same flushes per second in every
// mode, it is the bound, and a mode's puts/s is that rate over its
// flushes per put.
func printDisk(w io.Writer, modes []kv.Mode, results map[kv.Mode][]result, n int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "during the puts\tputs/write group\tfilter fsyncs/put\tdevice flushes/put\tdevice flushes/s\tdevice writes/s\tdevice ms flushing/s\t")
	for _, m := range modes {
		var rs []result
		for _, r := range results[m] {
			if r.diskOK {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			fmt.Fprintf(tw, "%v\t%s\t-\t-\t-\t-\t-\t\n", m, perGroup(results[m], n))
			continue
		}
		perSec := func(f func(diskCounters) uint64) float64 {
			return median(rs, func(r result) float64 { return float64(f(r.disk)) / r.putTime.Seconds() })
		}
		fmt.Fprintf(tw, "%v\t%s\t%.3f\t%.3f\t%.0f\t%.0f\t%.0f\t\n", m, perGroup(rs, n),
			median(rs, func(r result) float64 { return float64(r.filterSyncs) / float64(n) }),
			median(rs, func(r result) float64 { return float64(r.disk.flushes) / float64(n) }),
			perSec(func(c diskCounters) uint64 { return c.flushes }),
			perSec(func(c diskCounters) uint64 { return c.writes }),
			perSec(func(c diskCounters) uint64 { return c.flushMs }))
	}
	tw.Flush()
}

// perGroup returns the median puts per write group of rs, or "-" for a
// mode that forms none.
func perGroup(rs []result, n int) string {
	if len(rs) == 0 || rs[0].groups == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", median(rs, func(r result) float64 { return float64(n) / float64(r.groups) }))
}
