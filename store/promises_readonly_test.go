package store_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// TestPromiseReadOnlyRefusesEveryMutation: "ErrReadOnly: a mutation through a
// store opened with ReadOnly", and a read-only Open writes nothing.
func TestPromiseReadOnlyRefusesEveryMutation(t *testing.T) {
	dir := t.TempDir()
	w := openPromise(t, dir, nil)
	b, _ := w.CreateBloom("b", store.BloomConfig{})
	c, _ := w.CreateCuckoo("c", store.CuckooConfig{})
	n, _ := w.CreateCounting("n", store.BloomConfig{})
	m, _ := w.CreateBitmap("m", 100)
	b.Add([]byte("x"))
	c.Add([]byte("x"))
	n.Add([]byte("x"))
	m.Set(3)
	var export bytes.Buffer
	if _, err := b.WriteTo(&export); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	snap := dirSnapshot(t, dir)

	ro := openPromise(t, dir, &store.Options{ReadOnly: true})
	rb, err := ro.Bloom("b")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := ro.Cuckoo("c")
	rn, _ := ro.Counting("n")
	rm, _ := ro.Bitmap("m")
	keys := store.Keys(slices.Values([][]byte{[]byte("y")}))
	errs := map[string]error{}
	_, errs["bloom Add"] = rb.Add([]byte("y"))
	_, errs["bloom AddHash"] = rb.AddHash(1)
	_, errs["bloom AddMany"] = rb.AddMany([][]byte{[]byte("y")})
	errs["bloom Load"] = rb.Load(keys)
	errs["cuckoo Add"] = rc.Add([]byte("y"))
	_, errs["cuckoo AddNX"] = rc.AddNX([]byte("y"))
	_, errs["cuckoo AddMany"] = rc.AddMany([][]byte{[]byte("y")})
	_, errs["cuckoo Delete"] = rc.Delete([]byte("x"))
	_, errs["cuckoo DeleteMany"] = rc.DeleteMany([][]byte{[]byte("x")})
	errs["cuckoo Load"] = rc.Load(keys)
	errs["counting Add"] = rn.Add([]byte("y"))
	_, errs["counting AddMany"] = rn.AddMany([][]byte{[]byte("y")})
	_, errs["counting Delete"] = rn.Delete([]byte("x"))
	_, errs["counting DeleteMany"] = rn.DeleteMany([][]byte{[]byte("x")})
	errs["counting Load"] = rn.Load(keys)
	_, errs["bitmap Set"] = rm.Set(4)
	_, errs["bitmap Clear"] = rm.Clear(3)
	_, errs["bitmap SetMany"] = rm.SetMany([]uint64{4})
	_, errs["bitmap ClearMany"] = rm.ClearMany([]uint64{3})
	_, errs["CreateBloom"] = ro.CreateBloom("new", store.BloomConfig{})
	_, errs["CreateCuckoo"] = ro.CreateCuckoo("new", store.CuckooConfig{})
	_, errs["CreateCounting"] = ro.CreateCounting("new", store.BloomConfig{})
	_, errs["CreateBitmap"] = ro.CreateBitmap("new", 10)
	_, errs["EnsureCuckoo missing"] = ro.EnsureCuckoo("new", store.CuckooConfig{})
	_, errs["EnsureCounting missing"] = ro.EnsureCounting("new", store.BloomConfig{})
	_, errs["EnsureBitmap missing"] = ro.EnsureBitmap("new", 10)
	errs["Drop"] = ro.Drop("b")
	errs["Rename"] = ro.Rename("b", "b2")
	errs["Import"] = ro.Import("imp", bytes.NewReader(export.Bytes()))
	errs["Checkpoint"] = ro.Checkpoint()
	errs["Backup"] = ro.Backup(filepath.Join(t.TempDir(), "bk"))
	bt := ro.NewBatch()
	bt.BloomAdd(rb, []byte("z"))
	bt.BitmapSet(rm, 5)
	_, errs["Batch"] = bt.Commit()
	for name, err := range errs {
		if !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("read-only %s: %v, want ErrReadOnly", name, err)
		}
	}
	// Ensure of an existing filter of its kind returns it.
	if f, err := ro.EnsureBloom("b", store.BloomConfig{}); err != nil || !f.Has([]byte("x")) {
		t.Errorf("read-only EnsureBloom of existing: %v", err)
	}
	if !rb.Has([]byte("x")) || !rc.Has([]byte("x")) || rn.Count([]byte("x")) < 1 || !rm.Get(3) {
		t.Errorf("read-only lookups lost an item")
	}
	if rm.Get(4) || rm.Count() != 1 {
		t.Errorf("read-only bitmap changed: Get(4)=%v Count=%d", rm.Get(4), rm.Count())
	}
	if _, err := ro.Check(); err != nil {
		t.Errorf("read-only Check: %v", err)
	}
	if cerr := ro.Close(); cerr != nil {
		t.Errorf("read-only Close returned %v", cerr)
	}
	if after := dirSnapshot(t, dir); !maps2Equal(snap, after) {
		t.Errorf("read-only open changed files:\nbefore %v\nafter  %v", keysOf(snap), keysOf(after))
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), "bk")); err == nil {
		t.Errorf("read-only Backup made a directory")
	}
}

func dirSnapshot(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if info.IsDir() {
			out[p] = "dir"
			return nil
		}
		b, _ := os.ReadFile(p)
		out[p] = string(b) + info.Mode().String()
		return nil
	})
	return out
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func keysOf(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
