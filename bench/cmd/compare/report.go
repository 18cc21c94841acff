package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/filterstore/filterstore/bench"
)

// report accumulates the markdown output.
type report struct {
	opts    *options
	cmdline string
	b       strings.Builder
	noted   map[string]bool
	notes   []string
}

// String returns the report, the libraries' configurations last.
func (r *report) String() string {
	if len(r.notes) == 0 {
		return r.b.String()
	}
	return r.b.String() + "\nLibraries:\n\n" + strings.Join(r.notes, "\n") + "\n"
}

func (r *report) header(m string) {
	o := r.opts
	fmt.Fprintf(&r.b, "Machine: %s\n\n", m)
	fmt.Fprintf(&r.b, "Command: `%s`\n\n", r.cmdline)
	if o.pairs {
		fmt.Fprintf(&r.b, "Seed %d, target FPR %g, pairs mode. Keys: random %d-byte strings.\n", o.seed, o.fpr, bench.KeySize)
		return
	}
	fmt.Fprintf(&r.b, "Seed %d, target FPR %g, %d round(s), library order rotated each round. "+
		"Cells: median of rounds (min–max). Keys: random %d-byte strings.\n",
		o.seed, o.fpr, o.rounds, bench.KeySize)
}

// pairs are the ratios the summary shows: filterstore / peer, on medians.
var pairs = [][2]string{
	{"fs-bloom", "blobloom"},
	{"fs-bloom", "blobloom-sync"},
	{"fs-bloom", "bitsbloom"},
	{"fs-bloom-owned", "blobloom"},
	{"fs-store-bloom", "blobloom"},
	{"fs-store-bloom", "blobloom-sync"},
	{"fs-cuckoo-f16", "panmari"},
	{"fs-cuckoo-f16-owned", "panmari"},
	{"fs-cuckoo-f16-mix", "panmari"},
	{"fs-cuckoo-f16", "fs-cuckoo-f16-mix"},
	{"fs-cuckoo-f16-pow2", "panmari"},
	{"fs-cuckoo-f16-pow2-owned", "panmari"},
	{"fs-cuckoo-f16", "linvon-f16"},
	{"fs-cuckoo-fopt", "linvon-fopt"},
	{"fs-store-cuckoo", "panmari"},
	{"fs-store-cuckoo", "linvon-f16"},
}

func (r *report) size(n uint64, res *sizeResult) {
	fmt.Fprintf(&r.b, "\n## n = %s\n\n", countName(n))
	var libJobs, coldJobs []job
	for _, j := range res.jobs {
		if j.kind == "" {
			libJobs = append(libJobs, j)
		} else {
			coldJobs = append(coldJobs, j)
		}
	}
	if len(libJobs) > 0 {
		fmt.Fprintf(&r.b, "Lookups per pass: %d keys that were added, %d absent keys (FPR measured on these).\n\n",
			res.lookups, res.lookups)
		r.table(libJobs, libMetrics, res)
	}

	var ratios []string
	for _, p := range pairs {
		a, b := res.vals[p[0]], res.vals[p[1]]
		if a == nil || b == nil {
			continue
		}
		var cells []string
		for _, m := range []string{mBuild, mHit, mMiss} {
			cells = append(cells, fmt.Sprintf("%s %.2f", m, median(a[m])/median(b[m])))
		}
		ratios = append(ratios, fmt.Sprintf("- %s / %s: %s", p[0], p[1], strings.Join(cells, ", ")))
	}
	if len(ratios) > 0 {
		fmt.Fprintf(&r.b, "\nRatios of medians (below 1: filterstore faster):\n\n%s\n", strings.Join(ratios, "\n"))
	}

	if res.ctr != nil {
		var rows []counterRow
		for _, j := range libJobs {
			for _, pass := range counterPasses {
				rows = append(rows, counterRow{j.name, pass, res.tallies[j.name][pass]})
			}
		}
		r.b.WriteString(countersTable(res.ctr, rows))
		r.b.WriteString("\nA build that runs goroutines of its own (a store's `Load`) is counted on the calling thread only.\n")
	}

	if len(coldJobs) > 0 {
		fmt.Fprintf(&r.b, "\nStore path: Create, Load, Close, then every file of the store evicted from the page cache "+
			"(posix_fadvise DONTNEED), Open timed, then the first %d lookups (Has; after a second evicted reopen, HasMany) "+
			"with the process's major faults (getrusage ru_majflt) counted, then the same lookups warm.\n\n",
			min(r.opts.coldKeys, res.lookups))
		r.table(coldJobs, coldMetrics, res)
	}
	if res.evict != "" {
		fmt.Fprintf(&r.b, "\n%s.\n", res.evict)
	}
	for _, j := range libJobs {
		if j.lib.Note != "" && !r.noted[j.name] {
			if r.noted == nil {
				r.noted = map[string]bool{}
			}
			r.noted[j.name] = true
			r.notes = append(r.notes, fmt.Sprintf("- %s: %s", j.name, j.lib.Note))
		}
	}
}

// table writes one markdown table: a row per job, a column per metric that
// some job has.
func (r *report) table(jobs []job, metrics []string, res *sizeResult) {
	var cols []string
	for _, m := range metrics {
		for _, j := range jobs {
			if len(res.vals[j.name][m]) > 0 {
				cols = append(cols, m)
				break
			}
		}
	}
	fmt.Fprintf(&r.b, "| library | %s |\n|---|%s\n", strings.Join(cols, " | "), strings.Repeat("---:|", len(cols)))
	for _, j := range jobs {
		if len(res.vals[j.name]) == 0 { // not run yet (a run in progress)
			continue
		}
		cells := []string{j.name}
		for _, m := range cols {
			cells = append(cells, cell(m, res.vals[j.name][m]))
		}
		fmt.Fprintf(&r.b, "| %s |\n", strings.Join(cells, " | "))
	}
}

// cell formats the median of vs and, when the rounds differ, their range.
func cell(metric string, vs []float64) string {
	if len(vs) == 0 {
		return "–"
	}
	f := format(metric)
	med := fmt.Sprintf(f, median(vs))
	lo, hi := slices.Min(vs), slices.Max(vs)
	l, h := fmt.Sprintf(f, lo), fmt.Sprintf(f, hi)
	if l == h {
		return med
	}
	return fmt.Sprintf("%s (%s–%s)", med, l, h)
}

func format(metric string) string {
	switch metric {
	case mFPR:
		return "%.3f"
	case mBits:
		return "%.2f"
	case mFailed, mReopenMF, mColdMF, mManyMF:
		return "%.0f"
	case mHitRate:
		return "%.2f"
	}
	return "%.1f"
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// countName writes 1000000 as 1e6 when it is a power of ten.
func countName(n uint64) string {
	e := 0
	for m := n; m >= 10 && m%10 == 0; m /= 10 {
		e++
	}
	if e >= 3 {
		if n == uint64(math.Pow10(e)) {
			return fmt.Sprintf("1e%d", e)
		}
	}
	return fmt.Sprint(n)
}
