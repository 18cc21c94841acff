//go:build !linux

package catalog

import (
	"os"

	"golang.org/x/sys/unix"
)

// releaseLeaked releases the lock and descriptor bolt.Open held when it
// faulted on a damaged catalog. (The mapping cannot be found portably and
// stays until the process exits.)
func releaseLeaked(f *os.File) {
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	f.Close()
}
