package catalog

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// FuzzVerifyCatalog damages a healthy catalog at fuzzed offsets (5 bytes
// per change: a little-endian uint32 offset into the pages after the two
// meta pages, and the byte to write) and requires that a file the check
// accepts is one bbolt reads, and writes, without a panic or a fault: no
// recover() runs here, so one would end the fuzzer with the input.
func FuzzVerifyCatalog(f *testing.F) {
	c := bigCatalog(f, f.TempDir())
	good, err := os.ReadFile(c.Path)
	if err != nil {
		f.Fatal(err)
	}
	ps := os.Getpagesize()
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0xFF})
	f.Add([]byte{10, 0, 0, 0, 0, 8, 16, 0, 0, 7})
	// CI's finding: the freelist's second id made equal to its third (the
	// low byte of each suffices in this small file).
	m, ok := readMeta(good, 0)
	if m1, ok1 := readMeta(good, ps); ok1 && (!ok || m1.txid > m.txid) {
		m = m1
	}
	if m.freelist != noFreelist {
		second := int(m.freelist)*ps + pageHeaderSize + 8 - 2*ps
		f.Add(append(binary.LittleEndian.AppendUint32(nil, uint32(second)), good[second+2*ps+8]))
	}
	f.Fuzz(func(t *testing.T, changes []byte) {
		bad := append([]byte(nil), good...)
		for ; len(changes) >= 5; changes = changes[5:] {
			off := 2*ps + int(binary.LittleEndian.Uint32(changes)%uint32(len(bad)-2*ps))
			bad[off] = changes[4]
		}
		if checkPages(bad, ps) != nil {
			return
		}
		path := filepath.Join(t.TempDir(), "catalog.db")
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		db, err := bolt.Open(path, 0o644, &bolt.Options{NoSync: true})
		if err != nil {
			return
		}
		defer db.Close()
		db.View(func(tx *bolt.Tx) error { return readAll(tx.Cursor(), 0) })
		db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketFilters)
			if b == nil || b.Put([]byte("fuzz"), make([]byte, 100)) != nil {
				return nil
			}
			return b.Delete([]byte("filter-with-a-long-name-0001"))
		})
	})
}

// readAll reads every key and value under the cursor, descending into
// buckets.
func readAll(c *bolt.Cursor, depth int) error {
	for k, v := c.First(); k != nil; k, v = c.Next() {
		_ = append(append([]byte(nil), k...), v...)
		if v == nil && depth < 8 {
			if b := c.Bucket().Bucket(k); b != nil {
				readAll(b.Cursor(), depth+1)
			}
		}
	}
	return nil
}
