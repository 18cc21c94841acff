package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// TestPromiseNothingPanics: "Nothing a caller passes ... can panic the store".
func TestPromiseNothingPanics(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	s := openPromise(t, dir, &store.Options{CheckpointEvery: -1})
	defer s.Close()
	b, _ := s.CreateBloom("b", store.BloomConfig{})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	n, _ := s.CreateCounting("n", store.BloomConfig{})
	m, _ := s.CreateBitmap("m", 10)
	try := func(name string, f func() error, want error) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s panicked: %v", name, r)
			}
		}()
		err := f()
		if want != nil && !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
		if want == nil && err != nil {
			t.Logf("%s: %v", name, err)
		}
	}
	try("bloom Add nil", func() error { _, err := b.Add(nil); return err }, nil)
	try("bloom AddMany nil", func() error { _, err := b.AddMany(nil); return err }, nil)
	try("bloom AddMany [nil]", func() error { _, err := b.AddMany([][]byte{nil, {}}); return err }, nil)
	try("bloom HasManyInto small dst", func() error { b.HasManyInto(make([]bool, 0, 1), [][]byte{nil, {1}, {2}}); return nil }, nil)
	try("bloom HasManyHashInto nil", func() error { b.HasManyHashInto(nil, nil); return nil }, nil)
	try("cuckoo AddMany nil", func() error { _, err := c.AddMany(nil); return err }, nil)
	try("cuckoo DeleteMany nil", func() error { _, err := c.DeleteMany(nil); return err }, nil)
	try("cuckoo Delete absent", func() error { _, err := c.Delete([]byte("absent")); return err }, nil)
	try("counting DeleteMany nil", func() error { _, err := n.DeleteMany(nil); return err }, nil)
	try("counting Delete absent", func() error { _, err := n.Delete([]byte("absent")); return err }, nil)
	try("bitmap GetMany nil", func() error { m.GetMany(nil); return nil }, nil)
	try("bitmap SetMany nil", func() error { _, err := m.SetMany(nil); return err }, nil)
	try("bitmap ClearMany nil", func() error { _, err := m.ClearMany(nil); return err }, nil)
	try("ApplyExternal nil", func() error { _, err := s.ApplyExternal(nil); return err }, nil)
	try("ApplyExternal junk", func() error { _, err := s.ApplyExternal([]byte("junkjunkjunkjunkjunk")); return err }, nil)
	try("AbortExternal nil", func() error { return s.AbortExternal(nil) }, nil)
	try("AbortExternal junk", func() error { return s.AbortExternal([]byte{1, 2, 3}) }, nil)
	try("CheckFilter missing", func() error { _, err := s.CheckFilter("missing"); return err }, store.ErrNotFound)
	try("CheckFilter empty", func() error { _, err := s.CheckFilter(""); return err }, store.ErrInvalid)
	try("Backup to self", func() error { return s.Backup(dir) }, nil)
	try("Backup into store", func() error { return s.Backup(filepath.Join(dir, "filters", "bk")) }, nil)
	try("Backup to existing file", func() error {
		p := filepath.Join(t.TempDir(), "f")
		os.WriteFile(p, []byte("x"), 0o644)
		return s.Backup(p)
	}, nil)
	try("Backup to existing empty dir", func() error { return s.Backup(t.TempDir()) }, nil)
	try("Load nil", func() error { return b.Load(nil) }, store.ErrInvalid)
	try("NewBatch many ops", func() error {
		bt := s.NewBatch()
		bt.BloomAdd(b, nil)
		bt.CuckooDelete(c, []byte("zzz"))
		bt.CountingDelete(n, []byte("zzz"))
		bt.BitmapClear(m, 9)
		_, err := bt.Commit()
		return err
	}, nil)
	// the store still works and checks clean
	if _, err := b.Add([]byte("after")); err != nil {
		t.Errorf("store after odd calls: %v", err)
	}
	rep, err := s.Check()
	if err != nil || len(rep.Problems) != 0 {
		t.Errorf("Check: %+v %v", rep, err)
	}
	fents, _ := os.ReadDir(filepath.Join(dir, "filters"))
	for _, e := range fents {
		if e.IsDir() || filepath.Ext(e.Name()) != ".flt" {
			t.Errorf("filters/ holds %s after Backup into the store", e.Name())
		}
	}
}
