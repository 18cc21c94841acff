package catalog

import (
	"os"
	"sync/atomic"
)

// verifications counts the writer's whole-file checks before an update
// (tests read it).
var verifications atomic.Int64

// A writer's catalog update reads the whole file first (verifyCatalog),
// which costs time in proportion to the catalog, so a store that creates
// its n-th filter paid for all n-1 before it: the 8,000th create took
// 2.9-3.1 ms against 1.1-1.4 ms for the 1,000th (bitmaps of 64 bits, two
// runs on the 2-vCPU VM), the difference that check. The writer owns the file (the
// store's directory lock), so once its own commit has closed the file,
// the file changes only if someone else writes it, which changes its
// change time (ctime), and no system call sets that back. update skips
// the check while the file's identity, size, modification and change
// times are what they were after the writer's last commit: the 8,000th
// create then took 0.9-1.0 ms, the 1,000th 1.1-1.2 ms (the same runs,
// alternated with the build before). What it does not see: a write by
// another process that keeps the size, within the same clock tick as
// the commit where file times advance only once a tick (a few
// milliseconds; many Linux kernels give no finer times to a file written
// so soon); and a page the disk damages later. bbolt reads
// those unchecked; a panic or memory fault inside bbolt is an ErrCorrupt
// all the same (withDB). A read-only open checks the whole file each
// time, as before.

// fileStamp is what a stat of the catalog file says of its identity and
// its last change; ok is false where the system does not say (then every
// update checks the file).
type fileStamp struct {
	dev, ino, size      uint64
	mtimeSec, mtimeNsec int64
	ctimeSec, ctimeNsec int64
	ok                  bool
}

// stampOf stats path; a failed stat is a stamp that matches none.
func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return statStamp(fi)
}

// takeTrust reports whether the catalog file is as this Catalog's last
// successful update left it, and forgets that update's stamp, so that an
// update that then fails leaves the next one to check the file. update
// calls it with the catalog lock held (withDB), under which it records
// the stamp of a commit that succeeded.
func (c *Catalog) takeTrust() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.committed
	c.committed = fileStamp{}
	return last.ok && stampOf(c.Path) == last
}

// setCommitted records the file's stamp after a successful update.
func (c *Catalog) setCommitted(s fileStamp) {
	c.mu.Lock()
	c.committed = s
	c.mu.Unlock()
}
