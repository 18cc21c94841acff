package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress draws a progress bar on a terminal once the work has taken more
// than a delay (one second), and erases it when done. It draws nothing on
// a stderr that is not a terminal, so logs and tests stay clean.
type progress struct {
	w       io.Writer
	on      bool
	label   string
	total   int64
	done    int64
	start   time.Time
	last    time.Time
	delay   time.Duration
	shown   bool
	now     func() time.Time
	current string // what is being read now
}

// newProgress returns a progress bar for total units of work on w, drawn
// only if w is a terminal.
func newProgress(w io.Writer, label string, total int64) *progress {
	f, ok := w.(*os.File)
	return newProgressOn(w, label, total, ok && isTerminal(f), time.Now, time.Second)
}

func newProgressOn(w io.Writer, label string, total int64, on bool, now func() time.Time, delay time.Duration) *progress {
	t := now()
	return &progress{w: w, on: on, label: label, total: max(total, 1), start: t, last: t, delay: delay, now: now}
}

// setCurrent names what is being read, shown after the bar.
func (p *progress) setCurrent(s string) {
	if p != nil {
		p.current = s
	}
}

// add records n more units done and redraws at most ten times a second.
func (p *progress) add(n int64) {
	if p == nil || !p.on {
		return
	}
	p.done += n
	t := p.now()
	if t.Sub(p.start) < p.delay || (p.shown && t.Sub(p.last) < 100*time.Millisecond) {
		return
	}
	p.last = t
	p.shown = true
	frac := min(float64(p.done)/float64(p.total), 1)
	const width = 30
	fill := int(frac * width)
	cur := p.current
	if len(cur) > 36 {
		cur = "..." + cur[len(cur)-33:]
	}
	fmt.Fprintf(p.w, "\r%s [%s%s] %3.0f%% %-36s", p.label, strings.Repeat("#", fill), strings.Repeat(".", width-fill), frac*100, cur)
}

// finish erases the bar if it was drawn.
func (p *progress) finish() {
	if p == nil || !p.shown {
		return
	}
	fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", len(p.label)+2+30+7+36))
	p.shown = false
}
