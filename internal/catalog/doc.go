// Package catalog reads and writes a store's catalog, DIR/catalog.db: the
// bbolt database whose buckets and values package format draws. Package
// store writes it through a Catalog, one short transaction at a time;
// cmd/inspect and the tests read it with Read, which never writes.
//
// bbolt follows page ids, offsets and lengths read from the file without
// bounds checks, so on a damaged file it can read anywhere: past its
// mapping (a fault), into the Go heap (garbage taken for a key, or a bad
// pointer the garbage collector then trips on), or round a loop of pages
// forever. Every open here therefore first checks, with bounds-checked
// reads of its own, every page and element bbolt can reach from the meta
// page it will use (verify.go); a file that fails is ErrCorrupt and bbolt
// never reads past its meta pages. A fault or panic inside bbolt all the
// same is turned into an error wrapping ErrCorrupt, and the descriptor,
// lock and mapping bbolt held are released.
//
// A commit that fails once its transaction ran (a failed write or
// fdatasync) can leave in the page cache, clean, pages the disk does not
// hold; the Catalog's next update first syncs the file and drops its pages
// from the cache (mmapbits.Evicter), so that bbolt reads the last commit
// that reached the disk and writes no page id again over a page whose
// write-back failed.
package catalog
