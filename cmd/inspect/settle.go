package main

import (
	"fmt"
	"time"
)

// A command that describes one filter (info, stats) reads the catalog,
// then the files it names. A live writer may drop the filter, or rename
// another one over it, in between: the files the first read named are
// then gone or replaced, which is no fault of the data. Such a command
// reads the catalog again when it meets a problem, and starts over if the
// filter it named is another one now.

// settleTries is how many times settled reads a filter before it gives
// up on a store that replaces the filter under every read. (10 was too
// few on a loaded 2-CPU machine under the race detector, where a read
// takes about as long as the writer's pause between replacements: two CI
// runs met a replacement in each of 10 reads.)
const settleTries = 20

// settled runs read against a fresh read of dir's catalog until read
// succeeds, or fails while the catalog read right after it still names
// the same filter called name (the failure is then the store's, and is
// returned with read's result), at most settleTries times, a little
// longer apart each time (try ms: a read that met a replacement starts
// again soon after it, in the pause a writer replacing the filter in a
// loop, as a rebuild does, leaves after each replacement). A filter
// replaced under every try is an exit-status-2 error that names the last
// failure.
func settled[T any](dir, name string, read func(cat *catalogSnapshot) (T, error)) (T, error) {
	var zero T
	for try := 1; ; try++ {
		cat, err := readCatalog(dir)
		if err != nil {
			return zero, err
		}
		v, err := read(cat)
		if err == nil {
			return v, nil
		}
		again, aerr := readCatalogGuarded(dir)
		if aerr != nil || sameFilter(cat, again, name) {
			return v, err
		}
		if try == settleTries {
			return zero, &cmdError{code: exitUsage, err: fmt.Errorf(
				"filter %s was replaced, dropped or created during each of %d reads (a writer is changing it); the last read met: %s", fmtKey(name), settleTries, oneLine(err.Error()))}
		}
		time.Sleep(time.Duration(try) * time.Millisecond)
	}
}

// sameFilter reports whether catalog reads a and b name the same filter
// name: both none, or the same store, filter id and layer files. (Its
// counts and checkpoint may differ: they are no reason for a file to be
// missing.)
func sameFilter(a, b *catalogSnapshot, name string) bool {
	fa, fb := filterNamed(a, name), filterNamed(b, name)
	if fa == nil || fb == nil {
		return fa == fb
	}
	if a.StoreID != b.StoreID || fa.ID != fb.ID || len(fa.Layers) != len(fb.Layers) {
		return false
	}
	for i := range fa.Layers {
		if fa.Layers[i].Path != fb.Layers[i].Path {
			return false
		}
	}
	return true
}

// filterNamed returns cat's record of the filter name, or nil.
func filterNamed(cat *catalogSnapshot, name string) *filterRecord {
	for i := range cat.Filters {
		if cat.Filters[i].Name == name {
			return &cat.Filters[i]
		}
	}
	return nil
}
