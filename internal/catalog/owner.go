package catalog

import (
	"encoding/binary"
	"fmt"
	"os"
	"syscall"

	bolt "go.etcd.io/bbolt"

	"github.com/filterstore/filterstore/internal/fserr"
)

// owner is what the writer knows of its catalog: the file (device and
// inode) it read at Open, the store id, and the next id and checkpoint
// LSN as of its last transaction. Nothing but the writer changes the
// file while it runs, so a transaction that finds another file, another
// store's id, or a next id or checkpoint below these found a catalog
// replaced from outside (a copy restored over it, another store's file):
// writing to it would record this store's filters in a catalog that does
// not match its files and WAL, and a checkpoint would then drop WAL
// segments on its word.
type owner struct {
	dev, ino              uint64
	storeID               uint64
	nextID, checkpointLSN uint64
}

// Own makes every later update of c check first that the catalog is
// still the file st was read from, unchanged by anyone else: the same
// device and inode, the same store id, a next id and a checkpoint LSN no
// lower than the writer's own last ones. An update that finds otherwise
// changes nothing and fails with an error wrapping fserr.ErrCorrupt. The
// writer calls Own once, right after reading the catalog at Open.
func (c *Catalog) Own(st *State) error {
	var fi syscall.Stat_t
	if err := syscall.Stat(c.Path, &fi); err != nil {
		return fmt.Errorf("store: catalog %s: %w", c.Path, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owned = &owner{dev: uint64(fi.Dev), ino: fi.Ino, storeID: st.StoreID, nextID: st.NextID, checkpointLSN: st.Checkpoint}
	return nil
}

// checkOwner returns an error wrapping fserr.ErrCorrupt if c is owned
// and file, open in tx, is not the catalog its owner knows (see owner).
func (c *Catalog) checkOwner(file *os.File, tx *bolt.Tx) error {
	c.mu.Lock()
	if c.owned == nil {
		c.mu.Unlock()
		return nil
	}
	o := *c.owned
	c.mu.Unlock()
	replaced := func(what string, args ...any) error {
		return fmt.Errorf("store: catalog %s: %w: changed from outside while this store was open (%s): not writing to it; close the store and put back the catalog it opened with",
			c.Path, fserr.ErrCorrupt, fmt.Sprintf(what, args...))
	}
	var fi syscall.Stat_t
	if err := syscall.Fstat(int(file.Fd()), &fi); err != nil {
		return fmt.Errorf("store: catalog %s: %w", c.Path, err)
	}
	if uint64(fi.Dev) != o.dev || fi.Ino != o.ino {
		return replaced("another file: device %d inode %d, opened as device %d inode %d", fi.Dev, fi.Ino, o.dev, o.ino)
	}
	now := c.ownerOf(tx)
	switch {
	case now.storeID != o.storeID:
		return replaced("store id %016x, opened as %016x", now.storeID, o.storeID)
	case now.nextID < o.nextID:
		return replaced("next filter id %d, below this store's %d", now.nextID, o.nextID)
	case now.checkpointLSN < o.checkpointLSN:
		return replaced("checkpoint at LSN %d, before this store's last, at %d", now.checkpointLSN, o.checkpointLSN)
	}
	return nil
}

// ownerOf reads tx's store id, next id and checkpoint LSN (0 where one
// is missing or malformed: read reports those when the catalog is
// loaded).
func (c *Catalog) ownerOf(tx *bolt.Tx) owner {
	var o owner
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return o
	}
	get := func(k []byte) uint64 {
		if v := meta.Get(k); len(v) == 8 {
			return binary.LittleEndian.Uint64(v)
		}
		return 0
	}
	o.storeID, o.nextID, o.checkpointLSN = get(keyStoreID), get(keyNextID), get(keyCheckpoint)
	return o
}

// advance records now, read at the end of an update that committed, as
// the owner's latest.
func (c *Catalog) advance(now owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.owned; o != nil {
		o.storeID, o.nextID, o.checkpointLSN = now.storeID, now.nextID, now.checkpointLSN
	}
}
