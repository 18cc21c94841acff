package catalog

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/filterstore/filterstore/internal/fserr"
)

// owner is what the writer knows of its catalog: the store id, and the
// bbolt transaction id of the catalog's last commit as the writer read
// or made it. bbolt raises the transaction id by one at each commit and
// keeps it in the file, so a copy of the catalog keeps the id it was
// taken at. Nothing but the writer changes the file while it runs, so a
// transaction that finds another store's id, or a last commit older than
// the writer's, found a catalog replaced from outside (a copy restored
// over it, renamed or written in place, another store's file): writing
// to it would record this store's filters in a catalog that does not
// match its files and WAL, and a checkpoint would then drop WAL segments
// on its word. (The file's device and inode are not compared: on
// overlayfs and some FUSE file systems they change under a file nobody
// replaced.)
type owner struct {
	storeID uint64
	txid    uint64
}

// Own makes every later update of c check first that the catalog is
// still the one st was read from, changed by no one else since: the same
// store id, and no commit older than the last this writer read or made.
// An update that finds otherwise changes nothing and fails with an error
// wrapping fserr.ErrCorrupt. The writer calls Own once, with the State
// its Open read.
func (c *Catalog) Own(st *State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owned = &owner{storeID: st.StoreID, txid: st.TxID}
}

// checkOwner returns an error wrapping fserr.ErrCorrupt if c is owned and
// the catalog open in tx, a read-write transaction, is not the one its
// owner knows (see owner).
func (c *Catalog) checkOwner(tx *bolt.Tx) error {
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
	storeID := storeIDOf(tx)
	// A read-write transaction's id is the last commit's plus one.
	switch last := uint64(tx.ID()) - 1; {
	case storeID != o.storeID:
		return replaced("store id %016x, opened as %016x", storeID, o.storeID)
	case last < o.txid:
		return replaced("its last commit is transaction %d, older than this store's last, %d", last, o.txid)
	}
	return nil
}

// advance records txid, the id of an update that committed, and the
// store id it left (a format 1 catalog's upgrade sets one), as the
// owner's latest.
func (c *Catalog) advance(txid, storeID uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.owned; o != nil {
		o.txid, o.storeID = txid, storeID
	}
}

// storeIDOf returns the store id tx's catalog holds, 0 if none (a format
// 1 catalog) or if it is malformed (read reports that at Load).
func storeIDOf(tx *bolt.Tx) uint64 {
	if meta := tx.Bucket(bucketMeta); meta != nil {
		if v := meta.Get(keyStoreID); len(v) == 8 {
			return binary.LittleEndian.Uint64(v)
		}
	}
	return 0
}
