package catalog

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/filterstore/filterstore/internal/dirsync"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/fserr"
	"github.com/filterstore/filterstore/internal/regfile"
	"github.com/filterstore/filterstore/mmapbits"
)

// Catalog is the catalog file of a store: DIR/catalog.db, a bbolt
// database laid out as package format draws it.
//
// A new catalog is written as catalog.db.tmp and renamed into place once
// complete and synced, so catalog.db either does not exist or is whole:
// an empty or unreadable one is corruption, never a fresh start.
//
// The writer opens the database only for the length of one transaction,
// so read-only openers (a ReadOnly store, cmd/inspect) can take bbolt's
// shared lock between the writer's catalog changes, which are rare:
// create, drop, rename, a new layer, a checkpoint.
type Catalog struct {
	// Path is the catalog file, DIR/catalog.db.
	Path string
	// NoSync skips bbolt's fdatasync of each commit. Only tests set it:
	// those whose power losses are simulated in the filter files and the
	// WAL (mmapbits.Sim, wal.MemFS), where the real catalog file never
	// loses a write, so its syncs only cost time.
	NoSync bool

	mu        sync.Mutex // guards owned, committed and evict
	owned     *owner     // set by Own: what every update checks first
	committed fileStamp  // the file after this Catalog's last update (stamp.go)
	// evict is set when a commit failed after its transaction ran: the
	// failed update then drops the file's cached pages (evictNow) and,
	// where that fails, the next update first (evictFailed).
	evict bool
}

// New returns the catalog of the store directory dir.
func New(dir string) *Catalog { return &Catalog{Path: format.CatalogPath(dir)} }

// Wait bounds how long an open waits for another process's bbolt lock:
// 5 s. A variable only so that the store's tests, whose lock-timeout
// cases wait it out, can shorten it before they start; nothing else
// changes it.
var Wait = 5 * time.Second

var (
	bucketMeta    = []byte(format.BucketMeta)
	bucketFilters = []byte(format.BucketFilters)
	keyFormat     = []byte(format.KeyFormat)
	keyStoreID    = []byte(format.KeyStoreID)
	keyCheckpoint = []byte(format.KeyCheckpoint)
	keyExternal   = []byte(format.KeyExternal)
	keyNextID     = []byte(format.KeyNextID)
)

// ErrNoCatalog reports a directory without catalog.db.
var ErrNoCatalog = errors.New("store: no catalog")

// State is everything the catalog holds.
type State struct {
	StoreID    uint64 // 0 in a format 1 catalog
	Checkpoint uint64 // LSN of the latest checkpoint
	// External is the highest external-log sequence number whose batch
	// the latest checkpoint covers; 0 if none ever did.
	External uint64
	NextID   uint64 // the id the next created filter gets
	Filters  map[string]*format.FilterMeta
	// TxID is the bbolt transaction id of the catalog's last commit, as
	// read: every commit raises it, and a copy keeps the one it was taken
	// at (see Own).
	TxID uint64
}

// NewStoreID returns a random store identity, never 0.
func NewStoreID() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("store: store id: %w", err)
		}
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id, nil
		}
	}
}

// catalogLocks holds one mutex per catalog file in use: this process
// opens a catalog with bbolt one transaction at a time, so that the
// clean-up after a fault inside bolt.Open can tell the mapping bbolt left
// behind from any other. Files are told apart by device and inode, so two
// paths to one file (a symlink, a bind mount) share a mutex. An entry
// lives while a transaction holds or waits for it, so a process that
// opens stores in ever new directories does not keep one per directory.
var (
	catalogLocksMu sync.Mutex
	catalogLocks   = make(map[fileKey]*catalogMutex)
)

type fileKey struct {
	dev, ino uint64
	path     string // for a file that does not exist yet
}

// catalogMutex is a catalog file's mutex and how many holders and
// waiters it has (guarded by catalogLocksMu).
type catalogMutex struct {
	sync.Mutex
	key  fileKey
	refs int
}

// lockCatalog locks the mutex of the catalog file at path and returns it,
// for unlockCatalog.
func lockCatalog(path string) *catalogMutex {
	mu := catalogRef(path)
	mu.Lock()
	return mu
}

// catalogRef returns the mutex of the catalog file at path, counted as
// held or waited for until unlockCatalog, without locking it.
func catalogRef(path string) *catalogMutex {
	key := fileKey{path: path}
	if abs, err := filepath.Abs(path); err == nil {
		key.path = abs
	}
	var st syscall.Stat_t
	if syscall.Stat(path, &st) == nil {
		key = fileKey{dev: uint64(st.Dev), ino: st.Ino}
	}
	catalogLocksMu.Lock()
	mu := catalogLocks[key]
	if mu == nil {
		mu = &catalogMutex{key: key}
		catalogLocks[key] = mu
	}
	mu.refs++
	catalogLocksMu.Unlock()
	return mu
}

// unlockCatalog unlocks mu and forgets it once no one holds or waits for
// it.
func unlockCatalog(mu *catalogMutex) {
	mu.Unlock()
	catalogLocksMu.Lock()
	if mu.refs--; mu.refs == 0 {
		delete(catalogLocks, mu.key)
	}
	catalogLocksMu.Unlock()
}

// withDB opens the bbolt file at path, runs fn on it and closes it. It
// never creates the file unless create is set. A failure to open it is
// fserr.ErrCorrupt unless it is a lock timeout, a missing file or a permission
// problem. bbolt follows page pointers read from the file without bounds
// checks, so before bbolt reads past the meta pages, verifyCatalog checks
// every page and element it can reach, unless trusted, asked with the
// catalog lock held, says the file is as the writer's last commit left
// it (stamp.go). A fault or panic inside bbolt all
// the same becomes an error wrapping fserr.ErrCorrupt, and the descriptor,
// lock and mapping bbolt held are released.
func withDB(path string, readOnly, create bool, trusted func() bool, noSync bool, fn func(db *bolt.DB) error) (err error) {
	return withDBPrepared(path, readOnly, create, trusted, noSync, nil, nil, fn)
}

// withDBPrepared is withDB that first runs prepare, if set, with the
// catalog lock held and before bbolt opens the file; an error it returns
// is withDB's, as one before the transaction began (notStarted). It runs
// finish, if set, last: after bbolt closed the file and before the lock
// is released.
func withDBPrepared(path string, readOnly, create bool, trusted func() bool, noSync bool, prepare func() error, finish func(), fn func(db *bolt.DB) error) (err error) {
	mu := lockCatalog(path)
	defer unlockCatalog(mu)
	if finish != nil {
		defer finish()
	}
	if prepare != nil {
		if err := prepare(); err != nil {
			return notStarted(err)
		}
	}
	var file *os.File
	opts := &bolt.Options{Timeout: Wait, ReadOnly: readOnly,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			if !create {
				flag &^= os.O_CREATE
			}
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		}}
	var db *bolt.DB
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if db != nil {
				db.Close()
			} else if file != nil {
				releaseLeaked(file)
			}
			err = fmt.Errorf("store: catalog %s: %w: bbolt failed reading it: %v", path, fserr.ErrCorrupt, r)
			if rerr := readError(path, maxCatalogSize); rerr != nil {
				// A fault on a page the disk cannot read.
				err = fmt.Errorf("store: catalog %s: %w (bbolt failed reading it: %v)", path, rerr, r)
			}
		}
	}()
	if !readOnly && !create && (trusted == nil || !trusted()) {
		// The writer owns the file (the store's directory lock): nobody
		// changes it between this check and bolt.Open, which may read the
		// freelist, or walk the whole tree when the file has none.
		// (trusted: the file is as the writer's last commit left it; see
		// stamp.go.)
		verifications.Add(1)
		if err := verifyCatalogPath(path); err != nil {
			return notStarted(err)
		}
	}
	db, err = bolt.Open(path, 0o644, opts)
	if err != nil {
		db = nil
		return notStarted(openError(path, err))
	}
	if readOnly {
		// A read-only open reads no page past the meta pages; the check
		// runs under bbolt's shared lock, where no writer is mid-commit.
		if err := verifyCatalog(file, path); err != nil {
			db.Close()
			return err
		}
	}
	db.NoSync = noSync
	err = boltErrno(fn(db))
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("store: catalog %s: close: %w", path, cerr)
	}
	return err
}

// notStartedError is an error of withDB before its transaction began:
// the catalog file could not be opened or read, so nothing was written.
type notStartedError struct{ err error }

func (e *notStartedError) Error() string { return e.err.Error() }
func (e *notStartedError) Unwrap() error { return e.err }

// notStarted marks err as met before a transaction began, unless it says
// the file's contents are corrupt (which a caller treats as such anyway).
func notStarted(err error) error {
	if errors.Is(err, fserr.ErrCorrupt) {
		return err
	}
	return &notStartedError{err}
}

// NotStarted reports whether err is an update's failure to open or read
// the catalog file before its transaction began (for want of descriptors
// or memory, an I/O error): the file was not written.
func NotStarted(err error) bool {
	var e *notStartedError
	return errors.As(err, &e)
}

// openError classifies an error of bolt.Open. One the system returned
// (a missing or unreadable file, no memory, address space or file
// descriptors left, an I/O error: bbolt passes the errno on from open,
// flock, stat, mmap and pread) is about this process or the disk, not the
// file's contents, and is reported as it is: the same catalog may open
// once it passes. Anything else bbolt found wrong with the file (its meta
// pages, page size or size) is corruption.
func openError(path string, err error) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return fmt.Errorf("store: catalog %s: still locked by another process after %v: %w", path, Wait, err)
	case errors.As(err, &errno), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("store: catalog %s: %w", path, err)
	}
	// bbolt reads the first page to learn the page size and goes on with
	// the default if that read fails, so a disk's read error reaches it
	// as meta pages that do not validate ("invalid database"): read them
	// again to tell the two apart.
	if rerr := readError(path, 128<<10); rerr != nil {
		return fmt.Errorf("store: catalog %s: %w (bbolt: %v)", path, rerr, err)
	}
	return fmt.Errorf("store: catalog %s: %w: %v", path, fserr.ErrCorrupt, err)
}

// readError reads the file at path up to limit bytes (the meta pages are
// in its first 128 KiB, two of the largest page size bbolt takes) and
// returns the error a read returned, if any: an I/O error, not a short
// file. A file it cannot open (gone meanwhile) tells nothing: nil.
func readError(path string, limit int64) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, min(limit, 1<<20))
	for off := int64(0); off < limit; off += int64(len(buf)) {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), limit-off)], off)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
	return nil
}

// existing checks that the catalog file exists, is a regular file (or a
// symbolic link to one) and is not empty: bbolt would make an empty file
// a new database, and a store never leaves one. A symbolic link to
// nothing is not a missing catalog: a new one would be made where it
// points.
func (c *Catalog) existing() error {
	st, err := os.Stat(c.Path)
	if errors.Is(err, fs.ErrNotExist) {
		if lst, lerr := os.Lstat(c.Path); lerr == nil && lst.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("store: catalog %s: %w: a symbolic link to nothing: %w", c.Path, fserr.ErrCorrupt, err)
		}
		return fmt.Errorf("%w: %s does not exist: %w", ErrNoCatalog, c.Path, err)
	}
	if err != nil {
		return fmt.Errorf("store: catalog %s: %w", c.Path, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("store: catalog %s: %w: not a regular file: it is %s", c.Path, fserr.ErrCorrupt, regfile.Describe(st.Mode()))
	}
	if st.Size() == 0 {
		return fmt.Errorf("store: catalog %s: %w: the file is empty", c.Path, fserr.ErrCorrupt)
	}
	return nil
}

// update runs fn in one read-write transaction, committed durably. Once
// the writer owns the catalog (Own), the transaction first checks that
// the file is still the one the writer read at Open, and no older.
func (c *Catalog) update(fn func(w *writeTx) error) error {
	if err := c.existing(); err != nil {
		return err
	}
	return withDBPrepared(c.Path, false, false, c.takeTrust, c.NoSync, c.evictFailed, c.evictNow, func(db *bolt.DB) error {
		var txid, storeID uint64
		ran := false // the transaction got to its commit
		err := db.Update(func(tx *bolt.Tx) error {
			if err := c.checkOwner(tx); err != nil {
				return err
			}
			w, err := beginWrite(tx, c.Path)
			if err != nil {
				return err
			}
			if err := fn(w); err != nil {
				return err
			}
			if err := w.seal(); err != nil {
				return err
			}
			txid, storeID = uint64(tx.ID()), storeIDOf(tx)
			ran = true
			return nil
		})
		if err = afterCommit(c.Path, err); err == nil {
			c.advance(txid, storeID)
			// Still under the catalog lock, and bbolt writes nothing
			// more: the file as this commit left it.
			c.setCommitted(stampOf(c.Path))
		} else if ran {
			c.mu.Lock()
			c.evict = true
			c.mu.Unlock()
			// bbolt's own error says nothing of the file ("no space
			// left on device").
			err = fmt.Errorf("store: catalog %s: commit: %w", c.Path, err)
		}
		return err
	})
}

// evictNow runs evictFailed at the end of every update, after bbolt
// closed the file and before the catalog lock is released: a commit that
// failed once its transaction ran has its pages dropped from the cache
// then, before any other reader in this process takes the lock, and not
// only before the next update, so that a process that opens the store
// after this one ends (a crash, or a Close that commits nothing more)
// reads what the disk holds too. (A create whose sync reported ENOSPC
// does not fail the store, and writes no RESYNC for that next Open to
// find.) Its error is dropped: the update returns its own. If the
// eviction fails (the sync fails again, or another process maps the
// file), the next update tries again before it writes anything.
func (c *Catalog) evictNow() { _ = c.evictFailed() }

// evictFile syncs the file at path and drops its pages from the page
// cache (mmapbits.Evicter); a variable for tests.
var evictFile = func(path string) error { return mmapbits.OS{}.Evict(path) }

// evictFailed runs before and after every update (evictNow),
// with the catalog lock held: if a commit of this Catalog failed and its
// pages were not dropped since, it drops the file's pages from the page
// cache. bbolt writes its pages with pwrite and then
// syncs; after a failed sync Linux keeps the pages in the cache, clean,
// though the disk does not hold them, and bbolt would read them back
// (the failed commit's meta page, say) and may write the same page ids
// again, where ext4 can lose the rewrite of a page whose write-back
// failed (see mmapbits.Evicter). Dropped, the file reads what the disk
// holds: the last commit that reached it. Before an update, its error (a
// failed sync, or pages another process maps: mmapbits.ErrBusy) fails
// the update before anything is written; after one (evictNow) it is
// dropped. Either way the flag stays set and the next update tries
// again.
func (c *Catalog) evictFailed() error {
	c.mu.Lock()
	need := c.evict
	c.mu.Unlock()
	if !need {
		return nil
	}
	if err := evictFile(c.Path); err != nil {
		return fmt.Errorf("store: catalog %s: dropping from the cache what a failed commit left there: %w", c.Path, err)
	}
	c.mu.Lock()
	c.evict = false
	c.mu.Unlock()
	return nil
}

// Create writes a new, empty catalog for the store id: built under a
// temporary name, synced, renamed into place, and the directory synced.
func (c *Catalog) Create(id uint64) error {
	tmp := filepath.Join(filepath.Dir(c.Path), format.CatalogTmpName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: catalog: %w", err)
	}
	err := withDB(tmp, false, true, nil, c.NoSync, func(db *bolt.DB) error {
		return db.Update(func(tx *bolt.Tx) error {
			if _, err := tx.CreateBucket(bucketMeta); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(bucketFilters); err != nil {
				return err
			}
			w := &writeTx{tx: tx} // nothing in it yet: the checksum of nothing
			for _, kv := range []struct {
				k []byte
				v []byte
			}{
				{keyFormat, binary.LittleEndian.AppendUint32(nil, format.CatalogFormat)},
				{keyStoreID, u64(id)}, {keyNextID, u64(1)}, {keyCheckpoint, u64(0)},
			} {
				if err := w.put(bucketMeta, kv.k, kv.v); err != nil {
					return err
				}
			}
			return w.seal()
		})
	})
	if err == nil {
		err = os.Rename(tmp, c.Path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(c.Path))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("store: create catalog %s: %w", c.Path, err)
	}
	return nil
}

// Load reads the whole catalog with bbolt's read-only mode: it never
// writes, even to a damaged or foreign file. A missing catalog is
// ErrNoCatalog.
func (c *Catalog) Load() (*State, error) {
	if err := c.existing(); err != nil {
		return nil, err
	}
	st := &State{Filters: make(map[string]*format.FilterMeta)}
	err := withDB(c.Path, true, false, nil, false, func(db *bolt.DB) error {
		return db.View(func(tx *bolt.Tx) error { return c.read(tx, st) })
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (c *Catalog) read(tx *bolt.Tx, st *State) error {
	st.TxID = uint64(tx.ID())
	meta, filters := tx.Bucket(bucketMeta), tx.Bucket(bucketFilters)
	if meta == nil || filters == nil {
		return fmt.Errorf("store: catalog %s: %w: not a filterstore catalog (buckets missing)", c.Path, fserr.ErrCorrupt)
	}
	f := meta.Get(keyFormat)
	version := uint32(0)
	if len(f) == 4 {
		version = binary.LittleEndian.Uint32(f)
	}
	if version < 1 || version > format.CatalogFormat {
		return fmt.Errorf("store: catalog %s: %w: format %x, this build reads 1 to %d", c.Path, fserr.ErrCorrupt, f, format.CatalogFormat)
	}
	if err := checkSum(tx, c.Path); err != nil {
		return err
	}
	var err error
	if version >= 2 {
		if st.StoreID, err = getU64(meta, keyStoreID, c.Path); err != nil {
			return err
		}
		if st.StoreID == 0 {
			return fmt.Errorf("store: catalog %s: %w: store id 0", c.Path, fserr.ErrCorrupt)
		}
	}
	if st.Checkpoint, err = getU64(meta, keyCheckpoint, c.Path); err != nil {
		return err
	}
	if st.NextID, err = getU64(meta, keyNextID, c.Path); err != nil {
		return err
	}
	if meta.Get(keyExternal) != nil {
		if st.External, err = getU64(meta, keyExternal, c.Path); err != nil {
			return err
		}
	}
	ids := make(map[uint64]string)
	return filters.ForEach(func(k, v []byte) error {
		name := string(k)
		if err := format.CheckName(name); err != nil {
			return fmt.Errorf("store: catalog %s: %w: bad filter name: %v", c.Path, fserr.ErrCorrupt, err)
		}
		m, err := format.DecodeFilterMeta(v, st.Checkpoint)
		if err != nil {
			return fmt.Errorf("store: catalog %s: filter %q: %w", c.Path, name, err)
		}
		if other, dup := ids[m.ID]; dup {
			return fmt.Errorf("store: catalog %s: %w: filters %q and %q have the same id %d", c.Path, fserr.ErrCorrupt, other, name, m.ID)
		}
		if m.ID == 0 || m.ID >= st.NextID {
			return fmt.Errorf("store: catalog %s: %w: filter %q has id %d, but ids run from 1 to below the catalog's next id, %d", c.Path, fserr.ErrCorrupt, name, m.ID, st.NextID)
		}
		if m.SyncedLSN > st.Checkpoint {
			return fmt.Errorf("store: catalog %s: %w: filter %q synced at LSN %d, after the checkpoint %d", c.Path, fserr.ErrCorrupt, name, m.SyncedLSN, st.Checkpoint)
		}
		ids[m.ID] = name
		st.Filters[name] = m
		return nil
	})
}

func getU64(b *bolt.Bucket, key []byte, path string) (uint64, error) {
	v := b.Get(key)
	if len(v) != 8 {
		return 0, fmt.Errorf("store: catalog %s: %w: meta %q is %d bytes, want 8", path, fserr.ErrCorrupt, key, len(v))
	}
	return binary.LittleEndian.Uint64(v), nil
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// SetStoreID upgrades a format 1 catalog: it records the store's new id
// and the format this build writes (CatalogFormat), with the content
// checksum that format has.
func (c *Catalog) SetStoreID(id uint64) error {
	return c.update(func(w *writeTx) error {
		if err := w.put(bucketMeta, keyStoreID, u64(id)); err != nil {
			return err
		}
		return w.put(bucketMeta, keyFormat, binary.LittleEndian.AppendUint32(nil, format.CatalogFormat))
	})
}

// PutFilters writes metas (and, if nextID > 0, the next id) in one
// transaction.
func (c *Catalog) PutFilters(nextID uint64, metas map[string]*format.FilterMeta) error {
	return c.put(keyNextID, nextID, metas)
}

// Checkpoint records lsn, every filter's counts and, unless it is 0, the
// highest external-log sequence number the checkpoint covers, in one
// transaction. Unless live is nil, the same transaction deletes the entry
// of every filter whose name live lacks, and Checkpoint returns their
// names: live holds every filter the store has open, and an entry beyond
// them is one that a create or an import reported as failed although its
// commit reached the file (a final fdatasync that failed), whose synced
// LSN the WAL this checkpoint truncates no longer covers.
func (c *Catalog) Checkpoint(lsn, external uint64, metas map[string]*format.FilterMeta, live map[string]bool) (gone []string, err error) {
	err = c.update(func(w *writeTx) error {
		if external > 0 {
			if err := w.put(bucketMeta, keyExternal, u64(external)); err != nil {
				return err
			}
		}
		if live != nil {
			var err error
			if gone, err = forgetOthers(w, live); err != nil {
				return err
			}
		}
		return putMetas(w, keyCheckpoint, lsn, metas)
	})
	if err != nil {
		return nil, err
	}
	return gone, nil
}

// Keep deletes, in one transaction, the entry of every filter whose name
// live lacks, and returns their names: Checkpoint's deletion alone, for
// a backup's copy of the catalog.
func (c *Catalog) Keep(live map[string]bool) (gone []string, err error) {
	err = c.update(func(w *writeTx) error {
		var err error
		gone, err = forgetOthers(w, live)
		return err
	})
	if err != nil {
		return nil, err
	}
	return gone, nil
}

// forgetOthers deletes the entry of every filter whose name live lacks
// and returns their names.
func forgetOthers(w *writeTx, live map[string]bool) ([]string, error) {
	var gone []string
	fb, err := w.bucket(bucketFilters)
	if err != nil {
		return nil, err
	}
	if err := fb.ForEach(func(k, _ []byte) error {
		if !live[string(k)] {
			gone = append(gone, string(k))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for _, name := range gone {
		if err := w.del(bucketFilters, []byte(name)); err != nil {
			return nil, err
		}
	}
	return gone, nil
}

// put writes metas and, unless v is 0, the meta key k = v, in one
// transaction. (A checkpoint LSN of 0 never needs writing: create wrote it.)
func (c *Catalog) put(k []byte, v uint64, metas map[string]*format.FilterMeta) error {
	return c.update(func(w *writeTx) error { return putMetas(w, k, v, metas) })
}

// putMetas is put's transaction body.
func putMetas(w *writeTx, k []byte, v uint64, metas map[string]*format.FilterMeta) error {
	if v > 0 {
		if err := w.put(bucketMeta, k, u64(v)); err != nil {
			return err
		}
	}
	for name, m := range metas {
		if err := w.put(bucketFilters, []byte(name), m.Append(nil)); err != nil {
			return err
		}
	}
	return nil
}

// DeleteFilter removes name from the catalog.
func (c *Catalog) DeleteFilter(name string) error {
	return c.update(func(w *writeTx) error { return w.del(bucketFilters, []byte(name)) })
}

// RenameFilter moves the entry of from to the name to, in one
// transaction: a filter to had is deleted with it (its files are then
// orphans, removed by the store). The entry's value does not hold the
// name, and its files are named by its id, so nothing else moves. A
// catalog without from is ErrNotFound and changes nothing.
func (c *Catalog) RenameFilter(from, to string) error {
	return c.update(func(w *writeTx) error {
		fb, err := w.bucket(bucketFilters)
		if err != nil {
			return err
		}
		v := fb.Get([]byte(from))
		if v == nil {
			return fmt.Errorf("store: catalog %s: rename %q: %w", c.Path, from, fserr.ErrNotFound)
		}
		// Get's value lives in the transaction's pages, which Put and
		// Delete may change: copy it first.
		v = append([]byte(nil), v...)
		if err := w.del(bucketFilters, []byte(from)); err != nil {
			return err
		}
		return w.put(bucketFilters, []byte(to), v)
	})
}

// syncDir fsyncs a directory (dirsync.Sync).
var syncDir = dirsync.Sync
