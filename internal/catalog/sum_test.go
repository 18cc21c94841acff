package catalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/fserr"
	"github.com/filterstore/filterstore/internal/testseed"
)

// sumTestCatalog makes a catalog through a few commits (creates, a
// checkpoint, a rename, a delete) and returns it with the state each
// commit left, oldest first.
func sumTestCatalog(t *testing.T) (*Catalog, []*State) {
	t.Helper()
	c := New(t.TempDir())
	var states []*State
	step := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Load()
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, st)
	}
	step(c.Create(0x1234_5678_9abc_def0))
	step(c.PutFilters(5, map[string]*format.FilterMeta{"users": testMeta(1), "seen": testMeta(2), "hits": testMeta(3), "n": testMeta(4)}))
	_, err := c.Checkpoint(9, 3, map[string]*format.FilterMeta{"users": testMeta(1), "seen": testMeta(2)}, nil)
	step(err)
	step(c.RenameFilter("hits", "hits.old"))
	step(c.DeleteFilter("hits.old"))
	return c, states
}

// TestCatalogBitFlips: every single flipped bit of a catalog's file
// either fails its read or reads as a state some commit left (a damaged
// newest meta page makes bbolt read the commit before it, as designed).
// Before format 3's content checksum, 211 of this catalog's 3336 flips
// read as content no commit wrote: a leaf's element count lowered, so
// that filters vanished (with all of them gone, a writer's Open removed
// every filter's files as orphans), or a filter under another name ("n"
// as "o", "users" as "tsers"), with Check and inspect verify clean (an
// adversarial review found them). A flip of the format (3 is 1 or 2 with
// one bit flipped) must not turn the check off either.
func TestCatalogBitFlips(t *testing.T) {
	c, states := sumTestCatalog(t)
	orig, err := os.ReadFile(c.Path)
	if err != nil {
		t.Fatal(err)
	}
	flipped := New(t.TempDir())
	b := make([]byte, len(orig))
	var reads, failed, other int
	for i, v := range orig {
		if v == 0 {
			// The zero bytes are free space and padding, and flipping one
			// sets a bit where the format wants none; the nonzero ones
			// hold every page header, element, key and value.
			continue
		}
		for bit := range 8 {
			copy(b, orig)
			b[i] ^= 1 << bit
			if err := os.WriteFile(flipped.Path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			reads++
			st, err := flipped.Load()
			if err != nil {
				if !errors.Is(err, fserr.ErrCorrupt) {
					t.Errorf("byte %d bit %d: %v, want an error wrapping ErrCorrupt", i, bit, err)
				}
				failed++
				continue
			}
			known := false
			for _, s := range states {
				if reflect.DeepEqual(st, s) {
					known = true
					break
				}
			}
			if !known {
				other++
				if other <= 5 {
					t.Errorf("byte %d (page %d offset %d) bit %d: read as a state no commit left: %+v, filters %v; the last commit left %+v", i, i/4096, i%4096, bit, *st, filterNames(st), *states[len(states)-1])
				}
			}
		}
	}
	t.Logf("%d single-bit flips of the %d-byte file: %d failed the read, %d read as another state", reads, len(orig), failed, other)
	if other > 0 {
		t.Errorf("%d flips read as content no commit wrote", other)
	}
}

// filterNames lists st's filters with their ids.
func filterNames(st *State) []string {
	var out []string
	for name, m := range st.Filters {
		out = append(out, fmt.Sprintf("%q=%d", name, m.ID))
	}
	return out
}

// TestCatalogChangedBehindTheSum: content changed through bbolt without
// the checksum (as a flip that leaves every page well formed reads) is
// ErrCorrupt at Load, and stays so after an update that does not
// overwrite it (the update keeps the checksum from the entries it
// writes: it does not seal the damage); Seal makes it sound again.
func TestCatalogChangedBehindTheSum(t *testing.T) {
	c, _ := sumTestCatalog(t)
	edit := func(fn func(tx *bolt.Tx) error) {
		t.Helper()
		db, err := bolt.Open(c.Path, 0o644, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	edit(func(tx *bolt.Tx) error { return tx.Bucket(bucketFilters).Delete([]byte("users")) })
	if _, err := c.Load(); !errors.Is(err, fserr.ErrCorrupt) {
		t.Fatalf("Load of a catalog whose entry went without its checksum: %v, want ErrCorrupt", err)
	}
	if err := c.PutFilters(0, map[string]*format.FilterMeta{"seen": testMeta(2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(); !errors.Is(err, fserr.ErrCorrupt) {
		t.Fatalf("Load after an update beside the damage: %v, want ErrCorrupt", err)
	}
	edit(Seal)
	st, err := c.Load()
	if err != nil {
		t.Fatalf("Load after Seal: %v", err)
	}
	if _, ok := st.Filters["users"]; ok || len(st.Filters) != 2 {
		t.Fatalf("after Seal: filters %v, want seen and n", filterNames(st))
	}
	// A checksum of the wrong length, or none, in a format 3 catalog.
	edit(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySum, []byte{1, 2, 3}) })
	if _, err := c.Load(); !errors.Is(err, fserr.ErrCorrupt) {
		t.Fatalf("Load with a 3-byte checksum: %v, want ErrCorrupt", err)
	}
	edit(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keySum) })
	if _, err := c.Load(); !errors.Is(err, fserr.ErrCorrupt) {
		t.Fatalf("Load of a format 3 catalog without its checksum: %v, want ErrCorrupt", err)
	}
}

// TestCatalogFormat2Upgrade: a format 2 catalog (no checksum, as builds
// before format 3 wrote it) reads, and its first commit makes it format 3
// with its checksum.
func TestCatalogFormat2Upgrade(t *testing.T) {
	c, _ := sumTestCatalog(t)
	db, err := bolt.Open(c.Path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Delete(keySum); err != nil {
			return err
		}
		return meta.Put(keyFormat, binary.LittleEndian.AppendUint32(nil, 2))
	})
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(); err != nil {
		t.Fatalf("Load of a format 2 catalog: %v", err)
	}
	if err := c.PutFilters(0, map[string]*format.FilterMeta{"seen": testMeta(2)}); err != nil {
		t.Fatal(err)
	}
	db, err = bolt.Open(c.Path, 0o644, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		if f := formatOf(tx); f != format.CatalogFormat {
			return fmt.Errorf("format %d after a commit, want %d", f, format.CatalogFormat)
		}
		return checkSum(tx, filepath.Base(c.Path))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCatalogSumKeptByEveryWrite: random creates, checkpoints (with and
// without forgetting entries, with external seqs), renames and deletes;
// after each, the checksum the commit kept from its own writes is the one
// computed anew over the whole content (Load checks it), so no write of
// an update slips past the bookkeeping.
func TestCatalogSumKeptByEveryWrite(t *testing.T) {
	rng := testseed.New(t)
	c := New(t.TempDir())
	must(t, c.Create(7))
	names := map[string]uint64{}
	next := uint64(1)
	name := func() string { return fmt.Sprintf("f%03d", rng.IntN(60)) }
	for step := range 300 {
		switch op := rng.IntN(5); op {
		case 0, 1: // creates and updates, several at once
			metas := map[string]*format.FilterMeta{}
			for range 1 + rng.IntN(4) {
				n := name()
				if _, ok := names[n]; !ok {
					names[n] = next
					next++
				}
				m := testMeta(names[n])
				m.Layers[0].Items = rng.Uint64N(64)
				metas[n] = m
			}
			must(t, c.PutFilters(next, metas))
		case 2: // a checkpoint, forgetting a few entries
			live := map[string]bool{}
			for n := range names {
				if rng.IntN(8) != 0 {
					live[n] = true
				} else {
					delete(names, n)
				}
			}
			_, err := c.Checkpoint(uint64(step+1), rng.Uint64N(3), nil, live)
			must(t, err)
		case 3:
			from, to := name(), name()
			if id, ok := names[from]; ok && from != to {
				must(t, c.RenameFilter(from, to))
				delete(names, from)
				names[to] = id
			}
		case 4:
			n := name()
			must(t, c.DeleteFilter(n))
			delete(names, n)
		}
		st, err := c.Load()
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if len(st.Filters) != len(names) {
			t.Fatalf("step %d: %d filters read, %d written", step, len(st.Filters), len(names))
		}
	}
}
