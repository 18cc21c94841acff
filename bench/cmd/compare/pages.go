package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/filterstore/filterstore/bench"
	"github.com/filterstore/filterstore/internal/smaps"
)

// How the filters' memory is mapped decides part of a lookup's cost once
// a filter outgrows the caches: a page walk per lookup with 4 KiB page
// table entries, fewer with 2 MiB ones. The kernel maps a store's file
// with 2 MiB entries only where the page cache holds the file in 2 MiB
// folios, which it may not manage (free memory in 2 MiB pieces, the file
// system), and the Go heap is on 4 KiB pages unless the kernel's
// transparent huge pages are "always". So the pairs table says, for the
// run it comes from, how each side's memory was mapped.

// mapped is how much of a set of mappings is resident and how much of
// that is mapped with 2 MiB entries, in KiB.
type mapped struct{ rss, huge int64 }

// String formats m in MiB.
func (m mapped) String() string {
	return fmt.Sprintf("%d MiB resident, %d MiB of it with 2 MiB entries", m.rss>>10, m.huge>>10)
}

// pageReport returns a sentence on how the process maps each store's
// files (the mappings of files under dirs[name]) and its anonymous
// memory (the Go heap and any anonymous build memory), or "" where
// /proc/self/smaps cannot be read.
func pageReport(names []string, dirs map[string]string) string {
	ms, err := smaps.Read()
	if err != nil {
		return ""
	}
	real := make(map[string]string, len(dirs))
	for name, dir := range dirs {
		real[name] = bench.RealPath(dir)
	}
	files := make(map[string]mapped)
	var anon mapped
	for _, m := range ms {
		if m.Path == "" || strings.HasPrefix(m.Path, "[") {
			anon.rss += m.KB["Anonymous"]
			anon.huge += m.KB["AnonHugePages"]
			continue
		}
		for name, dir := range real {
			if under(m.Path, dir) {
				f := files[name]
				f.rss += m.KB["Rss"]
				f.huge += m.KB["FilePmdMapped"]
				files[name] = f
			}
		}
	}
	var parts []string
	for _, name := range names {
		if _, ok := dirs[name]; ok {
			parts = append(parts, fmt.Sprintf("%s's files %v", name, files[name]))
		}
	}
	parts = append(parts, fmt.Sprintf("anonymous memory (the Go heap's filters and keys) %v", anon))
	return "Memory after the last pair (/proc/self/smaps): " + strings.Join(parts, "; ") + ".\n"
}

// under reports whether path lies in directory dir (both absolute, with
// symbolic links resolved: bench.RealPath).
func under(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
