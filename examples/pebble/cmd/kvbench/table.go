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
