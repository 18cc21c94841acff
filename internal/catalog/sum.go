package catalog

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/fserr"
)

// keySum is the meta key of the catalog's content checksum (format 3).
var keySum = []byte(format.KeySum)

// The content checksum. bbolt checks only its meta pages: a flipped bit
// in a branch or leaf page that leaves every page well formed (verify.go
// checks the form) reads as other content. Such flips made a bucket's
// entries vanish (a leaf's element count lowered: with every filter gone,
// a writer's Open removed their files as dropped filters' orphans) or
// renamed a filter ("users" read as "tsers"), with Check and inspect
// verify clean, an adversarial review found. Every commit of a format 3
// catalog stores, under meta "sum", the XOR of the hashes of every entry
// of every root bucket (entrySum; the sum's own entry left out), and
// every read recomputes it: a mismatch is ErrCorrupt. Being an XOR, a
// commit updates it from the entries it replaces and writes (writeTx),
// at a cost that follows the commit's size, not the catalog's; and damage
// a commit does not overwrite stays a mismatch after it, not sealed.
//
// What it does not cover: whether a catalog has a checksum at all is read
// from the catalog. Damage that both hides the "sum" entry (a meta leaf's
// element count one lower drops it, the last key) and turns the format
// value 3 into 2 (one bit) reads as a format 2 catalog, which has none,
// and any further damage then reads as sound (a fuzzing review built
// such a file, three bytes changed, in which a filter read under another
// name, and a writer's Open then removed a vanished filter's file). The
// checksum is for damage at random (any one flipped bit, TestCatalogBitFlips;
// a torn or lost page, which changes many), not for damage aimed at it.

// entrySum is the hash of one entry: xxHash64 of the bucket's name, the
// key and the value, each preceded by its length as a uvarint. A nested
// bucket (v nil), which no catalog has, counts with a marker length that
// no value can have.
func entrySum(bucket, k, v []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	var buf [binary.MaxVarintLen64]byte
	part := func(b []byte) {
		d.Write(binary.AppendUvarint(buf[:0], uint64(len(b))))
		d.Write(b)
	}
	part(bucket)
	part(k)
	if v == nil {
		d.Write(binary.AppendUvarint(buf[:0], 1<<62))
	} else {
		part(v)
	}
	return d.Sum64()
}

// contentSum is the checksum of everything tx reads, computed anew.
func contentSum(tx *bolt.Tx) (uint64, error) {
	var sum uint64
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		meta := string(name) == format.BucketMeta
		return b.ForEach(func(k, v []byte) error {
			if !meta || string(k) != format.KeySum {
				sum ^= entrySum(name, k, v)
			}
			return nil
		})
	})
	return sum, err
}

// formatOf is the catalog format tx's meta bucket records (0: none
// readable).
func formatOf(tx *bolt.Tx) uint32 {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0
	}
	if f := meta.Get(keyFormat); len(f) == 4 {
		return binary.LittleEndian.Uint32(f)
	}
	return 0
}

// storedSum returns the checksum tx's catalog stores, and whether it
// has one: a catalog of format 3 or later must, and one of format 1 or 2
// has none, since no build writes one there, so one found there says the
// format value is what changed (3 is 1 or 2 with one bit flipped) and is
// checked all the same.
func storedSum(tx *bolt.Tx, path string) (sum uint64, ok bool, err error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, false, fmt.Errorf("store: catalog %s: %w: not a filterstore catalog (buckets missing)", path, fserr.ErrCorrupt)
	}
	stored := meta.Get(keySum)
	switch {
	case stored == nil && formatOf(tx) < 3:
		return 0, false, nil
	case len(stored) != 8:
		return 0, false, fmt.Errorf("store: catalog %s: %w: its content checksum (meta %q) is %d bytes, want 8: the file is damaged", path, fserr.ErrCorrupt, format.KeySum, len(stored))
	}
	return binary.LittleEndian.Uint64(stored), true, nil
}

// checkSum verifies the content checksum of a catalog that has one.
func checkSum(tx *bolt.Tx, path string) error {
	want, ok, err := storedSum(tx, path)
	if err != nil || !ok {
		return err
	}
	sum, err := contentSum(tx)
	if err != nil {
		return err
	}
	if sum != want {
		return fmt.Errorf("store: catalog %s: %w: its content does not match its checksum (stored %016x, computed %016x): the file was damaged at rest, or changed by hand", path, fserr.ErrCorrupt, want, sum)
	}
	return nil
}

// writeTx is a read-write transaction whose writes keep the content
// checksum: every write of an update goes through put and del.
type writeTx struct {
	tx  *bolt.Tx
	sum uint64 // of the content as the writes so far left it
}

// beginWrite starts the checksum's bookkeeping for tx: from the stored
// checksum, or, in a catalog without one (format 1 or 2, which seal
// upgrades), from the content.
func beginWrite(tx *bolt.Tx, path string) (*writeTx, error) {
	sum, ok, err := storedSum(tx, path)
	if err == nil && !ok {
		sum, err = contentSum(tx)
	}
	if err != nil {
		return nil, err
	}
	return &writeTx{tx: tx, sum: sum}, nil
}

// bucket returns the root bucket name, or an error wrapping ErrCorrupt
// if the catalog lacks it.
func (w *writeTx) bucket(name []byte) (*bolt.Bucket, error) {
	b := w.tx.Bucket(name)
	if b == nil {
		return nil, fmt.Errorf("store: catalog: %w: not a filterstore catalog (bucket %q missing)", fserr.ErrCorrupt, name)
	}
	return b, nil
}

// put writes k = v in bucket.
func (w *writeTx) put(bucket, k, v []byte) error {
	b, err := w.bucket(bucket)
	if err != nil {
		return err
	}
	if old := b.Get(k); old != nil {
		w.sum ^= entrySum(bucket, k, old)
	}
	w.sum ^= entrySum(bucket, k, v)
	return b.Put(k, v)
}

// del deletes k from bucket, if it is there.
func (w *writeTx) del(bucket, k []byte) error {
	b, err := w.bucket(bucket)
	if err != nil {
		return err
	}
	if old := b.Get(k); old != nil {
		w.sum ^= entrySum(bucket, k, old)
	}
	return b.Delete(k)
}

// seal stores the checksum the writes left. A format 2 catalog becomes
// format 3 with it; a format 1 catalog (no store id yet) stays as it is,
// without one, until SetStoreID upgrades it.
func (w *writeTx) seal() error {
	switch f := formatOf(w.tx); {
	case f < 2:
		return nil
	case f < 3:
		if err := w.put(bucketMeta, keyFormat, binary.LittleEndian.AppendUint32(nil, format.CatalogFormat)); err != nil {
			return err
		}
	}
	b, err := w.bucket(bucketMeta)
	if err != nil {
		return err
	}
	return b.Put(keySum, u64(w.sum))
}

// Seal stores the content checksum of what tx holds, computed anew,
// upgrading a format 2 catalog to format 3 as every update does: for
// tests that change a catalog's values through bbolt directly and want
// it read as sound.
func Seal(tx *bolt.Tx) error {
	sum, err := contentSum(tx)
	if err != nil {
		return err
	}
	return (&writeTx{tx: tx, sum: sum}).seal()
}
