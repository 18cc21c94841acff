package store

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// The catalog is DIR/catalog.db, a bbolt database:
//
//	bucket "meta":    "format" -> u32 catalogFormat
//	                  "storeid" -> u64 the store's identity (format 2)
//	                  "checkpoint" -> u64 LSN of the latest checkpoint
//	                  "nextid" -> u64 next filter id (ids are never reused)
//	bucket "filters": name -> filterMeta (see meta.go)
//
// The store id is random, never 0, and also written into every filter
// file header and every WAL segment header: Open refuses a WAL or a filter
// file of another store, and deletes only files whose header proves they
// are this store's orphans.
//
// A new catalog is written as catalog.db.tmp and renamed into place once
// complete and synced, so catalog.db either does not exist or is whole:
// an empty or unreadable one is corruption, never a fresh start.
//
// The writer opens the database only for the length of one transaction, so
// read-only openers (a ReadOnly store, cmd/inspect) can take bbolt's shared
// lock between the writer's catalog changes, which are rare: create, drop,
// a new layer, a checkpoint.
const (
	catalogFile = "catalog.db"
	catalogTmp  = "catalog.db.tmp"
	// catalogFormat 2 added the store id and version 2 filter values;
	// format 1 catalogs are read and upgraded by the first writer Open.
	catalogFormat = 2
	// catalogWait bounds how long an open waits for another process's
	// bbolt lock.
	catalogWait = 5 * time.Second
)

var (
	bucketMeta    = []byte("meta")
	bucketFilters = []byte("filters")
	keyFormat     = []byte("format")
	keyStoreID    = []byte("storeid")
	keyCheckpoint = []byte("checkpoint")
	keyNextID     = []byte("nextid")
)

// errNoCatalog reports a directory without catalog.db.
var errNoCatalog = errors.New("store: no catalog")

type catalog struct {
	path string
}

// catalogState is everything the catalog holds.
type catalogState struct {
	storeID    uint64 // 0 in a format 1 catalog
	checkpoint uint64
	nextID     uint64
	filters    map[string]*filterMeta
}

// newStoreID returns a random store identity, never 0.
func newStoreID() (uint64, error) {
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

// catalogLocks holds one mutex per catalog file: this process opens a
// catalog with bbolt one transaction at a time, so that the clean-up after
// a fault inside bolt.Open can tell the mapping bbolt left behind from any
// other. Files are told apart by device and inode, so two paths to one
// file (a symlink, a bind mount) share a mutex.
var catalogLocks sync.Map // fileKey -> *sync.Mutex

type fileKey struct {
	dev, ino uint64
	path     string // for a file that does not exist yet
}

func catalogLock(path string) *sync.Mutex {
	key := fileKey{path: path}
	if abs, err := filepath.Abs(path); err == nil {
		key.path = abs
	}
	var st syscall.Stat_t
	if syscall.Stat(path, &st) == nil {
		key = fileKey{dev: uint64(st.Dev), ino: st.Ino}
	}
	mu, _ := catalogLocks.LoadOrStore(key, new(sync.Mutex))
	return mu.(*sync.Mutex)
}

// withDB opens the bbolt file at path, runs fn on it and closes it. It
// never creates the file unless create is set. A failure to open it is
// ErrCorrupt unless it is a lock timeout, a missing file or a permission
// problem. bbolt follows page pointers read from the file and can fault or
// panic on a damaged one: both become errors wrapping ErrCorrupt, and the
// descriptor, lock and mapping bbolt held are released.
func withDB(path string, readOnly, create bool, fn func(db *bolt.DB) error) (err error) {
	mu := catalogLock(path)
	mu.Lock()
	defer mu.Unlock()
	var file *os.File
	opts := &bolt.Options{Timeout: catalogWait, ReadOnly: readOnly,
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
			err = fmt.Errorf("store: catalog %s: %w: bbolt failed reading it: %v", path, ErrCorrupt, r)
		}
	}()
	db, err = bolt.Open(path, 0o644, opts)
	if err != nil {
		db = nil
		return openError(path, err)
	}
	err = fn(db)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("store: catalog %s: close: %w", path, cerr)
	}
	return err
}

// openError classifies an error of bolt.Open.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return fmt.Errorf("store: catalog %s: still locked by another process after %v: %w", path, catalogWait, err)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("store: catalog %s: %w", path, err)
	}
	return fmt.Errorf("store: catalog %s: %w: %v", path, ErrCorrupt, err)
}

// existing checks that the catalog file exists and is not empty: bbolt
// would make an empty file a new database, and a store never leaves one.
func (c *catalog) existing() error {
	st, err := os.Stat(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s does not exist: %w", errNoCatalog, c.path, err)
	}
	if err != nil {
		return fmt.Errorf("store: catalog %s: %w", c.path, err)
	}
	if st.Size() == 0 {
		return fmt.Errorf("store: catalog %s: %w: the file is empty", c.path, ErrCorrupt)
	}
	return nil
}

// update runs fn in one read-write transaction, committed durably.
func (c *catalog) update(fn func(tx *bolt.Tx) error) error {
	if err := c.existing(); err != nil {
		return err
	}
	return withDB(c.path, false, false, func(db *bolt.DB) error { return db.Update(fn) })
}

// create writes a new, empty catalog for the store id: built under a
// temporary name, synced, renamed into place, and the directory synced.
func (c *catalog) create(id uint64) error {
	tmp := filepath.Join(filepath.Dir(c.path), catalogTmp)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: catalog: %w", err)
	}
	err := withDB(tmp, false, true, func(db *bolt.DB) error {
		return db.Update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			if _, err := tx.CreateBucket(bucketFilters); err != nil {
				return err
			}
			for _, kv := range []struct {
				k []byte
				v []byte
			}{
				{keyFormat, binary.LittleEndian.AppendUint32(nil, catalogFormat)},
				{keyStoreID, u64(id)}, {keyNextID, u64(1)}, {keyCheckpoint, u64(0)},
			} {
				if err := meta.Put(kv.k, kv.v); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err == nil {
		err = os.Rename(tmp, c.path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(c.path))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("store: create catalog %s: %w", c.path, err)
	}
	return nil
}

// load reads the whole catalog with bbolt's read-only mode: it never
// writes, even to a damaged or foreign file.
func (c *catalog) load() (*catalogState, error) {
	if err := c.existing(); err != nil {
		return nil, err
	}
	st := &catalogState{filters: make(map[string]*filterMeta)}
	err := withDB(c.path, true, false, func(db *bolt.DB) error {
		return db.View(func(tx *bolt.Tx) error { return c.read(tx, st) })
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (c *catalog) read(tx *bolt.Tx, st *catalogState) error {
	meta, filters := tx.Bucket(bucketMeta), tx.Bucket(bucketFilters)
	if meta == nil || filters == nil {
		return fmt.Errorf("store: catalog %s: %w: not a filterstore catalog (buckets missing)", c.path, ErrCorrupt)
	}
	f := meta.Get(keyFormat)
	format := uint32(0)
	if len(f) == 4 {
		format = binary.LittleEndian.Uint32(f)
	}
	if format != 1 && format != catalogFormat {
		return fmt.Errorf("store: catalog %s: %w: format %x, this build reads 1 and %d", c.path, ErrCorrupt, f, catalogFormat)
	}
	var err error
	if format >= 2 {
		if st.storeID, err = getU64(meta, keyStoreID, c.path); err != nil {
			return err
		}
		if st.storeID == 0 {
			return fmt.Errorf("store: catalog %s: %w: store id 0", c.path, ErrCorrupt)
		}
	}
	if st.checkpoint, err = getU64(meta, keyCheckpoint, c.path); err != nil {
		return err
	}
	if st.nextID, err = getU64(meta, keyNextID, c.path); err != nil {
		return err
	}
	ids := make(map[uint64]string)
	return filters.ForEach(func(k, v []byte) error {
		name := string(k)
		if err := checkName(name); err != nil {
			return fmt.Errorf("store: catalog %s: %w: bad filter name: %v", c.path, ErrCorrupt, err)
		}
		m, err := decodeMeta(v)
		if err != nil {
			return fmt.Errorf("store: catalog %s: filter %q: %w", c.path, name, err)
		}
		if other, dup := ids[m.ID]; dup || m.ID == 0 || m.ID >= st.nextID {
			return fmt.Errorf("store: catalog %s: %w: filter %q has id %d (next id %d, also used by %q)", c.path, ErrCorrupt, name, m.ID, st.nextID, other)
		}
		if m.v1 {
			m.SyncedLSN = st.checkpoint
		}
		if m.SyncedLSN > st.checkpoint {
			return fmt.Errorf("store: catalog %s: %w: filter %q synced at LSN %d, after the checkpoint %d", c.path, ErrCorrupt, name, m.SyncedLSN, st.checkpoint)
		}
		ids[m.ID] = name
		st.filters[name] = m
		return nil
	})
}

func getU64(b *bolt.Bucket, key []byte, path string) (uint64, error) {
	v := b.Get(key)
	if len(v) != 8 {
		return 0, fmt.Errorf("store: catalog %s: %w: meta %q is %d bytes, want 8", path, ErrCorrupt, key, len(v))
	}
	return binary.LittleEndian.Uint64(v), nil
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// setStoreID upgrades a format 1 catalog: it records the store's new id
// and format 2.
func (c *catalog) setStoreID(id uint64) error {
	return c.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyStoreID, u64(id)); err != nil {
			return err
		}
		return meta.Put(keyFormat, binary.LittleEndian.AppendUint32(nil, catalogFormat))
	})
}

// putFilters writes metas (and, if nextID > 0, the next id) in one
// transaction.
func (c *catalog) putFilters(nextID uint64, metas map[string]*filterMeta) error {
	return c.put(keyNextID, nextID, metas)
}

// checkpoint records lsn and every filter's counts in one transaction.
func (c *catalog) checkpoint(lsn uint64, metas map[string]*filterMeta) error {
	return c.put(keyCheckpoint, lsn, metas)
}

// put writes metas and, unless v is 0, the meta key k = v, in one
// transaction. (A checkpoint LSN of 0 never needs writing: create wrote it.)
func (c *catalog) put(k []byte, v uint64, metas map[string]*filterMeta) error {
	return c.update(func(tx *bolt.Tx) error {
		if v > 0 {
			if err := tx.Bucket(bucketMeta).Put(k, u64(v)); err != nil {
				return err
			}
		}
		fb := tx.Bucket(bucketFilters)
		for name, m := range metas {
			if err := fb.Put([]byte(name), m.append(nil)); err != nil {
				return err
			}
		}
		return nil
	})
}

// deleteFilter removes name from the catalog.
func (c *catalog) deleteFilter(name string) error {
	return c.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketFilters).Delete([]byte(name)) })
}

// syncDir fsyncs a directory, making the creations, renames and removals
// of its entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// isNoSpace reports a full disk.
func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
