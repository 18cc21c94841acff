//go:build !linux

package bench

import "errors"

// errNoEvict is returned where page-cache eviction is not implemented.
var errNoEvict = errors.New("bench: page-cache eviction is implemented on Linux only")

// EvictDir is implemented on Linux only.
func EvictDir(dir string) error { return errNoEvict }

// MajorFaults is implemented on Linux only; it returns -1.
func MajorFaults() int64 { return -1 }

// EvictCheck is implemented on Linux only.
func EvictCheck(path string) (pages int, afterMadvise, afterFadvise int64, err error) {
	return 0, 0, 0, errNoEvict
}
