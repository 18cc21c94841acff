// Package smaps reads how the calling process's memory is mapped, from
// /proc/self/smaps and /proc/self/smaps_rollup (Linux). Tests and
// benchmarks use it to check that filter files are mapped as intended
// (huge-page advice, 2 MiB page-table entries); elsewhere Read and
// Rollup return an error wrapping fs.ErrNotExist.
package smaps

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Mapping is one mapping of the process's address space.
type Mapping struct {
	Start, End uintptr // [Start, End)
	Path       string  // the mapped file, "" for anonymous memory
	// Flags are the mapping's VmFlags: "hg" for MADV_HUGEPAGE, "nh" for
	// MADV_NOHUGEPAGE, "rr" for MADV_RANDOM, ...
	Flags []string
	// KB holds the size fields, in KiB: Rss, FilePmdMapped, ...
	KB map[string]int64
}

// Has reports whether the mapping has VmFlag flag.
func (m Mapping) Has(flag string) bool { return slices.Contains(m.Flags, flag) }

// Read returns every mapping of the calling process, in address order.
func Read() ([]Mapping, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Containing returns the mapping of the calling process that holds addr.
func Containing(addr uintptr) (Mapping, error) {
	ms, err := Read()
	if err != nil {
		return Mapping{}, err
	}
	for _, m := range ms {
		if m.Start <= addr && addr < m.End {
			return m, nil
		}
	}
	return Mapping{}, fmt.Errorf("smaps: no mapping holds %#x", addr)
}

// Rollup returns the size fields of /proc/self/smaps_rollup, in KiB
// (Rss, FilePmdMapped, ...): the sums over every mapping.
func Rollup() (map[string]int64, error) {
	f, err := os.Open("/proc/self/smaps_rollup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ms, err := Parse(f)
	if err != nil {
		return nil, err
	}
	if len(ms) != 1 {
		return nil, fmt.Errorf("smaps: smaps_rollup has %d headers, want 1", len(ms))
	}
	return ms[0].KB, nil
}

// Parse reads mappings in the format of /proc/PID/smaps: for each, a
// header line ("start-end perms offset dev inode [path]") followed by
// "Field: value kB" lines and a "VmFlags:" line.
func Parse(r io.Reader) ([]Mapping, error) {
	var ms []Mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") {
			m, err := header(f)
			if err != nil {
				return nil, fmt.Errorf("smaps: %q: %w", line, err)
			}
			ms = append(ms, m)
			continue
		}
		if len(ms) == 0 {
			return nil, fmt.Errorf("smaps: %q before the first mapping", line)
		}
		m := &ms[len(ms)-1]
		name := strings.TrimSuffix(f[0], ":")
		switch {
		case name == "VmFlags":
			m.Flags = f[1:]
		case len(f) == 3 && f[2] == "kB":
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("smaps: %q: %w", line, err)
			}
			m.KB[name] = v
		}
	}
	return ms, sc.Err()
}

// header parses a mapping's header line, split into fields.
func header(f []string) (Mapping, error) {
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return Mapping{}, fmt.Errorf("no address range")
	}
	start, err := strconv.ParseUint(lo, 16, 64)
	if err != nil {
		return Mapping{}, err
	}
	end, err := strconv.ParseUint(hi, 16, 64)
	if err != nil {
		return Mapping{}, err
	}
	m := Mapping{Start: uintptr(start), End: uintptr(end), KB: map[string]int64{}}
	if len(f) >= 6 {
		// A path may hold spaces; the kernel appends " (deleted)" to a
		// removed file's.
		m.Path = strings.Join(f[5:], " ")
	}
	return m, nil
}
