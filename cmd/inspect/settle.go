package main

import (
	"fmt"
	"reflect"
)

// A command that describes one filter (info, stats) reads the catalog,
// then the files it names. A live writer may drop the filter, or rename
// another one over it, in between: the files the first read named are
// then gone or replaced, which is no fault of the data. Such a command
// reads the catalog again when it meets a problem, and starts over if
// the catalog changed meanwhile.

// settleTries is how many times settled reads a filter before it gives
// up on a store that changes under every read.
const settleTries = 10

// settled runs read against a fresh read of dir's catalog until read
// succeeds, or fails while the catalog read right after it is the one it
// was given (the failure is then the store's, and is returned with read's
// result), at most settleTries times. A catalog that changed under every
// try is an exit-status-2 error that names the last failure.
func settled[T any](dir string, read func(cat *catalogSnapshot) (T, error)) (T, error) {
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
		if aerr != nil || reflect.DeepEqual(cat, again) {
			return v, err
		}
		if try == settleTries {
			return zero, &cmdError{code: exitUsage, err: fmt.Errorf(
				"the store's catalog changed during each of %d reads (a writer is dropping or replacing filters); the last read met: %s", settleTries, oneLine(err.Error()))}
		}
	}
}
