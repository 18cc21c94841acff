package store

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// v1StoreCopy: testdata/v3store as a store from before store ids
// looks: format 1 catalog (no store id, no sum), version 1 layer files
// (no store id, no checksum pages), version 1 WAL segment headers.
func v1StoreCopy(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	copyTree(t, filepath.Join("testdata", "v3store"), dir)
	files, _ := filepath.Glob(filepath.Join(dir, "filters", "*.flt"))
	if len(files) != 6 {
		t.Fatalf("%d layer files", len(files))
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := mmapbits.DecodeHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		f1 := mmapbits.HeaderFields(1)
		crcAt := f1[len(f1)-1].Offset
		nb := make([]byte, mmapbits.HeaderSize+h.DataPages*mmapbits.PageSize)
		copy(nb, b[:crcAt])
		copy(nb[mmapbits.HeaderSize:], b[mmapbits.HeaderSize:len(nb)])
		copy(nb[mmapbits.SeqOffset:mmapbits.SeqOffset+16], b[mmapbits.SeqOffset:mmapbits.SeqOffset+16])
		binary.LittleEndian.PutUint32(nb[f1[1].Offset:], 1)
		binary.LittleEndian.PutUint32(nb[crcAt:], crc.Checksum(nb[:crcAt]))
		if g, _, err := mmapbits.DecodeHeader(nb); err != nil || g.Version != 1 || g.StoreID != 0 {
			t.Fatalf("rewritten v1 header: %+v %v", g, err)
		}
		if err := os.WriteFile(p, nb, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, err := bolt.Open(filepath.Join(dir, "catalog.db"), 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte(format.BucketMeta))
		meta.Delete([]byte(format.KeyStoreID))
		meta.Delete([]byte(format.KeySum))
		return meta.Put([]byte(format.KeyFormat), []byte{1, 0, 0, 0})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.log"))
	for _, p := range segs {
		b, _ := os.ReadFile(p)
		if binary.LittleEndian.Uint32(b[8:]) != 2 {
			t.Fatalf("segment version %d", binary.LittleEndian.Uint32(b[8:]))
		}
		v1 := make([]byte, 24)
		copy(v1, b[:8])
		binary.LittleEndian.PutUint32(v1[8:], 1)
		copy(v1[12:20], b[12:20])
		binary.LittleEndian.PutUint32(v1[20:], crc.Checksum(v1[:20]))
		if err := os.WriteFile(p, append(v1, b[32:]...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestPromiseOpensVersion1Store: "DecodeHeader reads all six versions", WAL
// "Version 1 ... still read", catalog formats 1..3, and "A store from
// before ids (a format 1 catalog) gets one at its first writer Open".
func TestPromiseOpensVersion1Store(t *testing.T) {
	dir := v1StoreCopy(t)
	if res, err := wal.Scan(filepath.Join(dir, "wal"), wal.ScanOptions{}, nil); err != nil {
		t.Fatalf("wal.Scan of the v1 segment: %v", err)
	} else {
		t.Logf("scan: %d segments", len(res.Segments))
	}
	ro, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open of a v1 store: %v", err)
	}
	checkV3Contents(t, ro, "read-only v1")
	if l, _ := ro.List(); true {
		for _, in := range l {
			if in.State != "ok" {
				t.Errorf("read-only: %s is %s: %s", in.Name, in.State, in.Reason)
			}
		}
	}
	ro.Close()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("writer Open of a v1 store: %v", err)
	}
	if s.ID() == 0 {
		t.Errorf("the upgrade gave no store id")
	}
	checkV3Contents(t, s, "writer v1")
	b, _ := s.Bloom("bloom")
	if _, err := b.Add([]byte("new-after-upgrade")); err != nil {
		t.Fatal(err)
	}
	c, _ := s.Cuckoo("cuckoo")
	if err := c.Add([]byte("new-after-upgrade")); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Check()
	if err != nil || len(rep.Problems) != 0 {
		t.Errorf("Check after upgrade: %+v %v", rep, err)
	}
	id := s.ID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatalf("second writer Open: %v", err)
	}
	defer s.Close()
	if s.ID() != id {
		t.Errorf("store id changed %d -> %d", id, s.ID())
	}
	checkV3Contents(t, s, "second open")
	b, _ = s.Bloom("bloom")
	c, _ = s.Cuckoo("cuckoo")
	if !b.Has([]byte("new-after-upgrade")) || !c.Has([]byte("new-after-upgrade")) {
		t.Errorf("key added after the upgrade is gone")
	}
	for _, in := range mustValue(s.List()) {
		if in.State != "ok" {
			t.Errorf("%s is %s: %s", in.Name, in.State, in.Reason)
		}
	}
}

func mustValue[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
