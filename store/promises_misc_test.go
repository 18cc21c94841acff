package store_test

import (
	"errors"
	"math"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// TestPromiseEnsureIgnoresConfig: "Ensure{Bloom,Cuckoo,Counting,Bitmap} of an
// existing filter of its kind return it and ignore the configuration passed".
func TestPromiseEnsureIgnoresConfig(t *testing.T) {
	s := openPromise(t, t.TempDir(), &store.Options{CheckpointEvery: -1})
	defer s.Close()
	s.CreateBloom("b", store.BloomConfig{})
	s.CreateCuckoo("c", store.CuckooConfig{})
	s.CreateCounting("n", store.BloomConfig{})
	s.CreateBitmap("m", 10)
	if _, err := s.EnsureBloom("b", store.BloomConfig{ErrorRate: math.NaN(), Expansion: 1000}); err != nil {
		t.Errorf("EnsureBloom existing with a bad config: %v", err)
	}
	if _, err := s.EnsureCuckoo("c", store.CuckooConfig{BucketSize: -1}); err != nil {
		t.Errorf("EnsureCuckoo existing with a bad config: %v", err)
	}
	if _, err := s.EnsureCounting("n", store.BloomConfig{ErrorRate: 7}); err != nil {
		t.Errorf("EnsureCounting existing with a bad config: %v", err)
	}
	if _, err := s.EnsureBitmap("m", 0); err != nil {
		t.Errorf("EnsureBitmap existing with bits 0: %v", err)
	}
	if m, err := s.EnsureBitmap("m", 999); err != nil || m.Bits() != 10 {
		t.Errorf("EnsureBitmap existing with another size: %v", err)
	}
}

// TestPromiseBatchForeignAndDead: Commit's documented ErrInvalid for a handle
// of another store; dropped filter ErrClosed; closed store ErrClosed; a
// failed batch changes nothing.
func TestPromiseBatchForeignAndDead(t *testing.T) {
	s1 := openPromise(t, t.TempDir(), &store.Options{CheckpointEvery: -1})
	defer s1.Close()
	s2 := openPromise(t, t.TempDir(), &store.Options{CheckpointEvery: -1})
	b1, _ := s1.CreateBloom("b", store.BloomConfig{})
	m1, _ := s1.CreateBitmap("m", 10)
	b2, _ := s2.CreateBloom("b", store.BloomConfig{})
	bt := s1.NewBatch()
	bt.BitmapSet(m1, 1)
	bt.BloomAdd(b2, []byte("x"))
	if _, err := bt.Commit(); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("batch with another store's handle: %v, want ErrInvalid", err)
	}
	if m1.Get(1) {
		t.Errorf("failed batch set a bit")
	}
	if _, err := bt.Commit(); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("second Commit: %v, want ErrInvalid", err)
	}
	d, _ := s1.CreateCuckoo("d", store.CuckooConfig{})
	s1.Drop("d")
	bt = s1.NewBatch()
	bt.BitmapSet(m1, 2)
	bt.CuckooAdd(d, []byte("x"))
	if _, err := bt.Commit(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("batch with a dropped filter: %v, want ErrClosed", err)
	}
	if m1.Get(2) {
		t.Errorf("failed batch set a bit")
	}
	bt = s2.NewBatch()
	bt.BloomAdd(b2, []byte("y"))
	s2.Close()
	if _, err := bt.Commit(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("batch on a closed store: %v, want ErrClosed", err)
	}
	var nb *store.Batch
	if _, err := nb.Commit(); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("nil batch Commit: %v", err)
	}
	bt = s1.NewBatch()
	var nilBloom *store.Bloom
	bt.BloomAdd(nilBloom, []byte("x"))
	if _, err := bt.Commit(); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("batch with nil handle: %v, want ErrInvalid", err)
	}
	_ = b1
}

// TestPromiseRenameEdges: Rename to its own name is a no-op; missing source
// ErrNotFound; replaces a filter of any kind; renamed handles keep working.
func TestPromiseRenameEdges(t *testing.T) {
	dir := t.TempDir()
	s := openPromise(t, dir, &store.Options{CheckpointEvery: -1})
	b, _ := s.CreateBloom("b", store.BloomConfig{})
	b.Add([]byte("x"))
	m, _ := s.CreateBitmap("m", 10)
	if err := s.Rename("b", "b"); err != nil {
		t.Errorf("rename to itself: %v", err)
	}
	if err := s.Rename("missing", "q"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("rename missing: %v", err)
	}
	if err := s.Rename("missing", "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("rename missing to itself: %v, want ErrNotFound", err)
	}
	if err := s.Rename("b", "m"); err != nil {
		t.Fatalf("rename over a bitmap: %v", err)
	}
	if _, err := m.Set(1); !errors.Is(err, store.ErrClosed) {
		t.Errorf("replaced handle Set: %v, want ErrClosed", err)
	}
	if !m.Get(5) {
		t.Errorf("replaced handle must answer maybe")
	}
	if _, err := b.Add([]byte("y")); err != nil {
		t.Errorf("renamed handle Add: %v", err)
	}
	if in, _ := b.Info(); in.Name != "m" {
		t.Errorf("renamed handle Info name %q", in.Name)
	}
	if _, err := s.Bitmap("m"); !errors.Is(err, store.ErrWrongKind) {
		t.Errorf("Bitmap(m) after rename: %v", err)
	}
	s.Close()
	s = openPromise(t, dir, nil)
	defer s.Close()
	nb, err := s.Bloom("m")
	if err != nil || !nb.Has([]byte("x")) || !nb.Has([]byte("y")) {
		t.Errorf("after reopen: %v", err)
	}
	if _, err := s.Bloom("b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old name after reopen: %v", err)
	}
}
