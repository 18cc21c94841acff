package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The catalog is DIR/catalog.db, a bbolt database:
//
//	bucket "meta":    "format" -> u32 catalogFormat
//	                  "checkpoint" -> u64 LSN: every WAL record <= it is
//	                                  reflected in the synced filter files
//	                  "nextid" -> u64 next filter id (ids are never reused)
//	bucket "filters": name -> filterMeta (see meta.go)
//
// The writer opens the database only for the length of one transaction, so
// read-only openers (a ReadOnly store, cmd/inspect) can take bbolt's shared
// lock between the writer's catalog changes, which are rare: create, drop,
// a new layer, a checkpoint.
const (
	catalogFile   = "catalog.db"
	catalogFormat = 1
	// catalogWait bounds how long an open waits for another process's
	// bbolt lock.
	catalogWait = 5 * time.Second
)

var (
	bucketMeta    = []byte("meta")
	bucketFilters = []byte("filters")
	keyFormat     = []byte("format")
	keyCheckpoint = []byte("checkpoint")
	keyNextID     = []byte("nextid")
)

type catalog struct {
	path     string
	readOnly bool
}

// catalogState is everything the catalog holds.
type catalogState struct {
	checkpoint uint64
	nextID     uint64
	filters    map[string]*filterMeta
}

func (c *catalog) open() (*bolt.DB, error) {
	db, err := bolt.Open(c.path, 0o644, &bolt.Options{Timeout: catalogWait, ReadOnly: c.readOnly})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("store: catalog %s: still locked by another process after %v: %w", c.path, catalogWait, err)
		}
		if errors.Is(err, bolt.ErrInvalid) || errors.Is(err, bolt.ErrChecksum) || errors.Is(err, bolt.ErrVersionMismatch) {
			return nil, fmt.Errorf("store: catalog %s: %w: %v", c.path, ErrCorrupt, err)
		}
		return nil, fmt.Errorf("store: catalog %s: %w", c.path, err)
	}
	return db, nil
}

// update runs fn in one read-write transaction, committed durably.
func (c *catalog) update(fn func(tx *bolt.Tx) error) (err error) {
	defer c.guard(&err, guardFaults())
	if c.readOnly {
		return fmt.Errorf("store: catalog: %w", ErrReadOnly)
	}
	db, err := c.open()
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("store: catalog %s: close: %w", c.path, cerr)
		}
	}()
	return db.Update(fn)
}

// init creates the buckets of a new catalog, or checks an existing one's
// format. It is the only write a fresh Open makes to the catalog.
func (c *catalog) init() (err error) {
	defer c.guard(&err, guardFaults())
	db, err := c.open()
	if err != nil {
		return err
	}
	ready := false
	func() {
		defer db.Close()
		db.View(func(tx *bolt.Tx) error {
			ready = tx.Bucket(bucketMeta) != nil
			return nil
		})
	}()
	if ready {
		return nil // reopening writes nothing
	}
	return c.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			var err error
			if meta, err = tx.CreateBucket(bucketMeta); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(bucketFilters); err != nil {
				return err
			}
			if err := meta.Put(keyFormat, binary.LittleEndian.AppendUint32(nil, catalogFormat)); err != nil {
				return err
			}
			if err := meta.Put(keyNextID, u64(1)); err != nil {
				return err
			}
			return meta.Put(keyCheckpoint, u64(0))
		}
		return nil
	})
}

// guard turns a panic or memory fault inside bbolt, which a corrupt
// catalog file can cause (it follows page pointers read from the file),
// into an error wrapping ErrCorrupt. Call it deferred, with fault handling
// enabled for the goroutine by guardFaults.
func (c *catalog) guard(err *error, restore func()) {
	restore()
	if r := recover(); r != nil {
		*err = fmt.Errorf("store: catalog %s: %w: bbolt failed reading it: %v", c.path, ErrCorrupt, r)
	}
}

// guardFaults makes a memory fault in this goroutine a recoverable panic
// and returns the function that restores the previous setting.
func guardFaults() func() {
	old := debug.SetPanicOnFault(true)
	return func() { debug.SetPanicOnFault(old) }
}

// load reads the whole catalog.
func (c *catalog) load() (st *catalogState, err error) {
	defer c.guard(&err, guardFaults())
	db, err := c.open()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	st = &catalogState{filters: make(map[string]*filterMeta)}
	err = db.View(func(tx *bolt.Tx) error {
		meta, filters := tx.Bucket(bucketMeta), tx.Bucket(bucketFilters)
		if meta == nil || filters == nil {
			return fmt.Errorf("store: catalog %s: %w: buckets missing", c.path, ErrCorrupt)
		}
		if f := meta.Get(keyFormat); len(f) != 4 || binary.LittleEndian.Uint32(f) != catalogFormat {
			return fmt.Errorf("store: catalog %s: %w: format %x, this build reads %d", c.path, ErrCorrupt, f, catalogFormat)
		}
		var err error
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
			ids[m.ID] = name
			st.filters[name] = m
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

func getU64(b *bolt.Bucket, key []byte, path string) (uint64, error) {
	v := b.Get(key)
	if len(v) != 8 {
		return 0, fmt.Errorf("store: catalog %s: %w: meta %q is %d bytes, want 8", path, ErrCorrupt, key, len(v))
	}
	return binary.LittleEndian.Uint64(v), nil
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

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
// transaction. (A checkpoint LSN of 0 never needs writing: init wrote it.)
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
