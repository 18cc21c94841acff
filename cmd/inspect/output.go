package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Shared output helpers: aligned tables, key/value blocks, JSON, number
// formats, and the findings verify and file report.

// table is a text table with a header row; numeric columns align right.
type table struct {
	cols   []string
	right  []bool
	rows   [][]string
	indent string // before every line
}

// newTable returns a table with the given column names; a name starting
// with '>' is right-aligned (the '>' is not printed).
func newTable(cols ...string) *table {
	t := &table{}
	for _, c := range cols {
		r := strings.HasPrefix(c, ">")
		t.cols = append(t.cols, strings.TrimPrefix(c, ">"))
		t.right = append(t.right, r)
	}
	return t
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	width := make([]int, len(t.cols))
	for i, c := range t.cols {
		width[i] = utf8.RuneCountInString(c)
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], utf8.RuneCountInString(c))
			}
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		var l strings.Builder
		l.WriteString(t.indent)
		for i := range t.cols {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				l.WriteString("  ")
			}
			if t.right[i] {
				l.WriteString(pad + c)
			} else {
				l.WriteString(c + pad)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	line(t.cols)
	for _, r := range t.rows {
		line(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// kv is a block of "key  value" lines with the values aligned.
type kv struct {
	indent string
	rows   [][2]string
}

func (k *kv) add(key, format string, args ...any) {
	k.rows = append(k.rows, [2]string{key, fmt.Sprintf(format, args...)})
}

func (k *kv) write(w io.Writer) error {
	n := 0
	for _, r := range k.rows {
		n = max(n, utf8.RuneCountInString(r[0]))
	}
	var b strings.Builder
	for _, r := range k.rows {
		fmt.Fprintf(&b, "%s%s%s  %s\n", k.indent, r[0], strings.Repeat(" ", n-utf8.RuneCountInString(r[0])), r[1])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// jfloat is a float64 that encodes NaN and infinities as null rather than
// failing the whole document.
type jfloat float64

func (f jfloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// fmtBytes formats a size in IEC units with one decimal.
func fmtBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	v := float64(n)
	u := -1
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}

// fmtRate formats a probability or ratio with three significant digits.
func fmtRate(f float64) string {
	switch {
	case math.IsNaN(f):
		return "-"
	case f == 0:
		return "0"
	}
	return strconv.FormatFloat(f, 'g', 3, 64)
}

// fmtFill formats a fill ratio in [0, 1].
func fmtFill(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	return strconv.FormatFloat(f, 'f', 4, 64)
}

// fmtKey prints a key as it is if it is printable without spaces, else
// quoted.
func fmtKey(k string) string {
	if k == "" || !utf8.ValidString(k) {
		return strconv.Quote(k)
	}
	for _, r := range k {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' {
			return strconv.Quote(k)
		}
	}
	return k
}

// relPath returns path relative to dir, with slashes, for output that does
// not depend on where the store lives.
func relPath(dir, path string) string {
	if r, err := filepath.Rel(dir, path); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return path
}

// finding is a problem or a note found by verify or file, located by file
// (relative to the store directory) and byte offset.
type finding struct {
	Severity string `json:"severity"` // "problem" or "note"
	File     string `json:"file,omitempty"`
	Offset   int64  `json:"offset"` // -1: the whole file, or not applicable
	Message  string `json:"message"`
	// unreadable: a file that could not be read, not bad data.
	unreadable bool
}

const (
	sevProblem = "problem"
	sevNote    = "note"
)

func problem(file string, off int64, format string, args ...any) finding {
	return finding{Severity: sevProblem, File: file, Offset: off, Message: oneLine(fmt.Sprintf(format, args...))}
}

func note(file string, off int64, format string, args ...any) finding {
	return finding{Severity: sevNote, File: file, Offset: off, Message: oneLine(fmt.Sprintf(format, args...))}
}

func (f finding) String() string {
	loc := f.location()
	if loc == "" {
		return fmt.Sprintf("%-7s  %s", f.Severity, f.Message)
	}
	return fmt.Sprintf("%-7s  %s: %s", f.Severity, loc, f.Message)
}

// findings is a list of findings that caps repetitive ones: after limit
// findings with the same key, further ones are only counted.
type findings struct {
	list    []finding
	perKey  map[string]int
	dropped map[string]int
	order   []string // keys with dropped findings, first-seen order
	limit   int
	// unreadable counts the problems that are files that could not be
	// read (addUnreadable), not bad data.
	unreadable int
}

func newFindings(limit int) *findings {
	return &findings{perKey: map[string]int{}, dropped: map[string]int{}, limit: limit}
}

// add records f under key (usually file and kind of check).
func (fs *findings) add(key string, f finding) {
	if fs.perKey[key] >= fs.limit {
		if fs.dropped[key] == 0 {
			fs.order = append(fs.order, key)
		}
		fs.dropped[key]++
		return
	}
	fs.perKey[key]++
	fs.list = append(fs.list, f)
}

// all returns the findings, with one summary line per capped key.
func (fs *findings) all() []finding {
	out := append([]finding(nil), fs.list...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Severity != out[j].Severity {
			return out[i].Severity == sevProblem
		}
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Offset < out[j].Offset
	})
	for _, k := range fs.order {
		sev, file, _ := strings.Cut(k, "|")
		file, _, _ = strings.Cut(file, "|")
		out = append(out, finding{Severity: sev, File: file, Offset: -1,
			Message: fmt.Sprintf("... and %d more like the above", fs.dropped[k])})
	}
	return out
}

// count returns the number of findings of a severity, capped ones
// included.
func (fs *findings) count(sev string) int {
	n := 0
	for _, f := range fs.list {
		if f.Severity == sev {
			n++
		}
	}
	for k, d := range fs.dropped {
		if strings.HasPrefix(k, sev+"|") {
			n += d
		}
	}
	return n
}

// addFinding adds f keyed by its severity, file and the given kind.
func (fs *findings) addFinding(kind string, f finding) {
	fs.add(f.Severity+"|"+f.File+"|"+kind, f)
}

// addUnreadable adds the problem f, a file that could not be read
// (permission denied, an I/O error) rather than bad data.
func (fs *findings) addUnreadable(kind string, f finding) {
	fs.unreadable++
	f.unreadable = true
	fs.addFinding(kind, f)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// location is a finding's place: "FILE offset N", or "FILE".
func (f finding) location() string {
	if f.Offset >= 0 {
		return fmt.Sprintf("%s offset %d", f.File, f.Offset)
	}
	return f.File
}

// problemsError is the exit-status-1 error of a command that listed
// problems on stdout: one line naming how many and where the first is.
func problemsError(n int, where string, all []finding) error {
	return &cmdError{code: exitProblems, err: fmt.Errorf("%s %s; the first: %s", plural(n, "problem", "problems"), where, firstProblem(all))}
}

// unreadableError is the exit-status-2 error of a command whose only
// problems, listed on stdout, are n files that could not be read.
func unreadableError(n int, all []finding) error {
	return &cmdError{code: exitUsage, err: fmt.Errorf("%s could not be read; the first: %s", plural(n, "file", "files"), firstProblem(all))}
}

// firstProblem is the first problem of all that is bad data, else the
// first of the files that could not be read, with its location.
func firstProblem(all []finding) string {
	first := ""
	for _, f := range all {
		if f.Severity != sevProblem || (f.unreadable && first != "") {
			continue
		}
		first = f.Message
		if loc := f.location(); loc != "" {
			first = loc + ": " + first
		}
		if !f.unreadable {
			break
		}
	}
	return first
}

// scrubPath makes the paths under dir in a message relative to it, so
// output does not depend on where the store lives.
func scrubPath(msg, dir string) string {
	if dir == "" || dir == "." {
		return msg
	}
	clean := filepath.Clean(dir) + string(filepath.Separator)
	return strings.ReplaceAll(msg, clean, "")
}

// relError is err with its message passed through scrubPath; errors.Is
// and errors.As still see err.
func relError(err error, dir string) error {
	if err == nil {
		return nil
	}
	return &scrubbedError{scrubPath(err.Error(), dir), err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
