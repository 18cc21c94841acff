package blackbox_test

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// Close: "Handles answer lookups with "maybe present" afterwards and
// mutations with ErrClosed"; Count returns math.MaxUint64; Stats works after
// Close. Close twice: the doc does not say; it must not panic.
func TestUseAfterClose(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, nil)
	b, _ := s.CreateBloom("b", store.BloomConfig{})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	n, _ := s.CreateCounting("n", store.BloomConfig{})
	m, _ := s.CreateBitmap("m", 64)
	_, err := b.Add([]byte("x"))
	must(t, err)
	st := s.Stats()
	must(t, s.Close())
	if !b.Has([]byte("never")) || !c.Has([]byte("never")) || !n.Has([]byte("never")) || !m.Get(3) {
		t.Error("closed handles must answer maybe")
	}
	if got := b.HasMany([][]byte{[]byte("never")}); !got[0] {
		t.Error("closed Bloom HasMany must answer maybe")
	}
	if c.Count([]byte("never")) != math.MaxUint64 || n.Count([]byte("never")) != math.MaxUint64 {
		t.Error("closed Count must be MaxUint64")
	}
	_, err = b.Add([]byte("y"))
	wantIs(t, "Bloom.Add after Close", err, store.ErrClosed)
	wantIs(t, "Cuckoo.Add after Close", c.Add([]byte("y")), store.ErrClosed)
	wantIs(t, "Counting.Add after Close", n.Add([]byte("y")), store.ErrClosed)
	_, err = m.Set(1)
	wantIs(t, "Bitmap.Set after Close", err, store.ErrClosed)
	_, err = s.CreateBloom("z", store.BloomConfig{})
	wantIs(t, "CreateBloom after Close", err, store.ErrClosed)
	_, err = s.Bloom("b")
	wantIs(t, "Bloom after Close", err, store.ErrClosed)
	wantIs(t, "Checkpoint after Close", s.Checkpoint(), store.ErrClosed)
	_, err = s.Check()
	wantIs(t, "Check after Close", err, store.ErrClosed)
	wantIs(t, "Backup after Close", s.Backup(t.TempDir()+"/bk"), store.ErrClosed)
	wantIs(t, "Drop after Close", s.Drop("b"), store.ErrClosed)
	wantIs(t, "Rename after Close", s.Rename("b", "q"), store.ErrClosed)
	_, err = s.List()
	wantIs(t, "List after Close", err, store.ErrClosed)
	var buf bytes.Buffer
	_, err = b.WriteTo(&buf)
	wantIs(t, "WriteTo after Close", err, store.ErrClosed)
	wantIs(t, "Import after Close", s.Import("imp", &buf), store.ErrClosed)
	_, err = s.NewBatch().Commit()
	if err != nil {
		// an empty batch commits to (nil, nil) per doc; either is defensible
		t.Logf("empty batch Commit after Close: %v", err)
	}
	bt := s.NewBatch()
	bt.BloomAdd(b, []byte("q"))
	_, err = bt.Commit()
	wantIs(t, "Batch.Commit after Close", err, store.ErrClosed)
	if s.Stats().WAL.Records < st.WAL.Records {
		t.Error("Stats after Close went back")
	}
	wantIs(t, "a second Close", s.Close(), store.ErrClosed)
	_, err = b.Info()
	wantIs(t, "Info after Close", err, store.ErrClosed)
}

// Drop: handles answer "maybe" and ErrClosed; name is free again; a new
// filter of that name is empty.
func TestDropSemantics(t *testing.T) {
	s, _ := newStore(t, nil)
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	must(t, c.Add([]byte("k")))
	must(t, s.Drop("c"))
	if !c.Has([]byte("never")) || c.Count([]byte("never")) != math.MaxUint64 {
		t.Error("dropped handle must answer maybe")
	}
	wantIs(t, "Add after Drop", c.Add([]byte("k")), store.ErrClosed)
	_, err := c.Delete([]byte("k"))
	wantIs(t, "Delete after Drop", err, store.ErrClosed)
	_, err = s.Cuckoo("c")
	wantIs(t, "Cuckoo after Drop", err, store.ErrNotFound)
	c2, err := s.CreateCuckoo("c", store.CuckooConfig{})
	must(t, err)
	if c2.Has([]byte("k")) || c2.Items() != 0 {
		t.Error("re-created filter holds the dropped one's keys")
	}
	wantIs(t, "Drop twice", s.Drop("nope"), store.ErrNotFound)
}

// Rename: handles of from keep working; old name ErrNotFound; to replaced
// (its handles maybe/ErrClosed); self rename no-op; any kind over any kind.
func TestRenameSemantics(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, nil)
	a, _ := s.CreateBloom("a", store.BloomConfig{})
	_, err := a.Add([]byte("ka"))
	must(t, err)
	must(t, s.Rename("a", "a"))
	must(t, s.Rename("a", "b"))
	if _, err := a.Add([]byte("kb")); err != nil {
		t.Errorf("renamed handle Add: %v", err)
	}
	in, _ := a.Info()
	if in.Name != "b" {
		t.Errorf("renamed handle's Info.Name = %q, want b", in.Name)
	}
	_, err = s.Bloom("a")
	wantIs(t, "Bloom(old name)", err, store.ErrNotFound)
	// A cuckoo over the bloom "b".
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	must(t, c.Add([]byte("kc")))
	must(t, s.Rename("c", "b"))
	if !a.Has([]byte("never")) {
		t.Error("replaced handle must answer maybe")
	}
	_, err = a.Add([]byte("x"))
	wantIs(t, "Add to replaced", err, store.ErrClosed)
	_, err = s.Bloom("b")
	wantIs(t, "Bloom(b) now cuckoo", err, store.ErrWrongKind)
	must(t, s.Close())
	s = openStore(t, dir, nil)
	defer s.Close()
	c2, err := s.Cuckoo("b")
	must(t, err)
	if !c2.Has([]byte("kc")) {
		t.Error("renamed filter lost its key over reopen")
	}
	if l, _ := s.List(); len(l) != 1 {
		t.Errorf("List after rename-over = %d filters", len(l))
	}
}

// "A nil or zero handle ... every call that returns an error returns one
// wrapping ErrInvalid that names the handle; lookups answer "maybe"; ID,
// Stats, Card, Items are zero."
func TestNilAndZeroHandles(t *testing.T) {
	var s *store.Store
	_, err := s.CreateBloom("x", store.BloomConfig{})
	wantIs(t, "nil Store CreateBloom", err, store.ErrInvalid)
	wantIs(t, "nil Store Close", s.Close(), store.ErrInvalid)
	wantIs(t, "nil Store Checkpoint", s.Checkpoint(), store.ErrInvalid)
	if s.ID() != 0 || s.ExternalDurable() != 0 || s.Stats().CheckpointLSN != 0 {
		t.Error("nil Store ID/ExternalDurable/Stats not zero")
	}
	_, err = s.NewBatch().Commit()
	wantIs(t, "nil Store's batch Commit", err, store.ErrInvalid)
	var z store.Store
	_, err = z.List()
	wantIs(t, "zero Store List", err, store.ErrInvalid)
	var bt *store.Batch
	if bt.Len() != 0 {
		t.Error("nil Batch Len")
	}
	bt.BloomAdd(nil, []byte("x")) // takes no ops, must not panic
	_, err = bt.Commit()
	wantIs(t, "nil Batch Commit", err, store.ErrInvalid)
	_, err = bt.Encode()
	wantIs(t, "nil Batch Encode", err, store.ErrInvalid)
	var zb store.Batch
	_, err = zb.Commit()
	wantIs(t, "zero Batch Commit", err, store.ErrInvalid)

	var b *store.Bloom
	_, err = b.Add([]byte("x"))
	wantIs(t, "nil Bloom Add", err, store.ErrInvalid)
	if got := b.HasMany([][]byte{[]byte("x")}); len(got) != 1 || !got[0] {
		t.Error("nil Bloom HasMany must answer maybe")
	}
	if b.Card() != 0 {
		t.Error("nil Bloom Card")
	}
	var c *store.Cuckoo
	if c.Count([]byte("x")) != math.MaxUint64 || c.Items() != 0 {
		t.Error("nil Cuckoo Count/Items")
	}
	wantIs(t, "nil Cuckoo Add", c.Add([]byte("x")), store.ErrInvalid)
	var zc store.Counting
	if zc.Count([]byte("x")) != math.MaxUint64 {
		t.Error("zero Counting Count")
	}
	_, err = zc.Info()
	wantIs(t, "zero Counting Info", err, store.ErrInvalid)
	var m *store.Bitmap
	if !m.Get(1) || m.Bits() != 0 || m.Count() != 0 {
		t.Error("nil Bitmap Get/Bits/Count")
	}
	_, err = m.Set(1)
	wantIs(t, "nil Bitmap Set", err, store.ErrInvalid)

	// A real store: a nil handle in a batch is ErrInvalid for the whole batch.
	rs, _ := newStore(t, nil)
	real, _ := rs.CreateBloom("r", store.BloomConfig{})
	bb := rs.NewBatch()
	bb.BloomAdd(real, []byte("ok"))
	bb.BloomAdd(nil, []byte("x"))
	_, err = bb.Commit()
	wantIs(t, "batch with nil handle", err, store.ErrInvalid)
	if real.Has([]byte("ok")) {
		t.Error("failed batch changed a filter")
	}
}

// Panics documented for Has/HasHash of nil Bloom, Cuckoo, Counting.
func TestNilHasPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"Bloom":    func() { var b *store.Bloom; b.Has(nil) },
		"Cuckoo":   func() { var c *store.Cuckoo; c.HasHash(1) },
		"Counting": func() { var c *store.Counting; c.Has(nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("nil %s Has did not panic (doc: panics)", name)
				}
			}()
			f()
		}()
	}
}

// A second writer Open of a directory is ErrLocked; a read-only one is not.
func TestSecondWriterLocked(t *testing.T) {
	s, dir := newStore(t, nil)
	_ = s
	s2, err := store.Open(dir, nil)
	if err == nil {
		s2.Close()
		t.Fatal("second writer Open succeeded")
	}
	wantIs(t, "second writer Open", err, store.ErrLocked)
	r, err := store.Open(dir, &store.Options{ReadOnly: true})
	must(t, err)
	must(t, r.Close())
}

// Read-only: ErrReadOnly for every mutation (filters, create, drop, rename,
// checkpoint?, Backup, Import, batch); sees the writer's filters as of Open;
// filters created after Open are not in it; never absent for an item
// acknowledged before Open.
func TestReadOnlyBesideWriter(t *testing.T) {
	w, dir := newStore(t, nil)
	b, _ := w.CreateBloom("b", store.BloomConfig{Capacity: 10000})
	c, _ := w.CreateCuckoo("c", store.CuckooConfig{})
	n, _ := w.CreateCounting("n", store.BloomConfig{})
	m, _ := w.CreateBitmap("m", 100)
	ks := keys("ro", 200)
	addToEach(t, ks, b, c, n)
	_, err := m.Set(7)
	must(t, err)
	r := openStore(t, dir, &store.Options{ReadOnly: true})
	defer r.Close()
	rb, err := r.Bloom("b")
	must(t, err)
	rc, _ := r.Cuckoo("c")
	rn, _ := r.Counting("n")
	rm, _ := r.Bitmap("m")
	for _, k := range ks {
		if !rb.Has(k) || !rc.Has(k) || !rn.Has(k) {
			t.Fatalf("read-only open misses acknowledged key %s", k)
		}
	}
	if !rm.Get(7) {
		t.Error("read-only bitmap misses bit 7")
	}
	// Mutations.
	_, err = rb.Add([]byte("x"))
	wantIs(t, "ro Bloom Add", err, store.ErrReadOnly)
	wantIs(t, "ro Cuckoo Add", rc.Add([]byte("x")), store.ErrReadOnly)
	_, err = rc.Delete(ks[0])
	wantIs(t, "ro Cuckoo Delete", err, store.ErrReadOnly)
	_, err = rm.Set(1)
	wantIs(t, "ro Bitmap Set", err, store.ErrReadOnly)
	wantIs(t, "ro Drop", r.Drop("b"), store.ErrReadOnly)
	wantIs(t, "ro Rename", r.Rename("b", "z"), store.ErrReadOnly)
	wantIs(t, "ro Backup", r.Backup(t.TempDir()+"/bk"), store.ErrReadOnly)
	wantIs(t, "ro Import", r.Import("imp", bytes.NewReader(nil)), store.ErrReadOnly)
	_, err = r.EnsureBloom("new", store.BloomConfig{})
	wantIs(t, "ro EnsureBloom new", err, store.ErrReadOnly)
	if _, err := r.EnsureBloom("b", store.BloomConfig{}); err != nil {
		t.Errorf("ro EnsureBloom of existing: %v", err)
	}
	bt := r.NewBatch()
	bt.BloomAdd(rb, []byte("x"))
	_, err = bt.Commit()
	wantIs(t, "ro Batch Commit", err, store.ErrReadOnly)
	err = rb.Load(store.Keys(func(yield func([]byte) bool) {}))
	wantIs(t, "ro Load", err, store.ErrReadOnly)
	var buf bytes.Buffer
	_, err = rb.WriteTo(&buf)
	wantIs(t, "ro WriteTo", err, store.ErrReadOnly)
	if err := r.Checkpoint(); !errors.Is(err, store.ErrReadOnly) {
		t.Logf("ro Checkpoint: %v (doc silent)", err)
	}
	// Created after Open: not in it.
	_, err = w.CreateBloom("later", store.BloomConfig{})
	must(t, err)
	_, err = r.Bloom("later")
	wantIs(t, "ro sees filter created after Open", err, store.ErrNotFound)
	// Stats: zero WAL in a read-only store.
	if st := r.Stats(); st.WAL.Records != 0 || st.WALSize != 0 {
		t.Errorf("read-only Stats = %+v, want zero WAL", st)
	}
	// Info from read-only.
	in, err := rb.Info()
	must(t, err)
	if in.Items != 200 {
		t.Errorf("read-only Info.Items = %d, want 200", in.Items)
	}
}

// Read-only open of a directory that is not a store: "Open opens the store
// in dir, creating it if needed (unless ReadOnly)".
func TestReadOnlyOpenOfMissingStore(t *testing.T) {
	dir := t.TempDir() + "/nope"
	r, err := store.Open(dir, &store.Options{ReadOnly: true})
	if err == nil {
		r.Close()
		t.Fatal("read-only Open of a missing directory succeeded")
	}
	t.Logf("read-only Open(missing): %v", err)
	empty := t.TempDir()
	r, err = store.Open(empty, &store.Options{ReadOnly: true})
	if err == nil {
		l, _ := r.List()
		r.Close()
		t.Logf("read-only Open(empty dir) succeeded with %d filters", len(l))
	} else {
		t.Logf("read-only Open(empty dir): %v", err)
	}
}

// EnsureX: existing keeps its config; missing creates.
func TestEnsure(t *testing.T) {
	s, _ := newStore(t, nil)
	c, err := s.EnsureCuckoo("c", store.CuckooConfig{Capacity: 5000})
	must(t, err)
	must(t, c.Add([]byte("k")))
	c2, err := s.EnsureCuckoo("c", store.CuckooConfig{Capacity: 10, BucketSize: 2})
	must(t, err)
	if !c2.Has([]byte("k")) {
		t.Error("EnsureCuckoo returned another filter")
	}
	in, _ := c2.Info()
	if in.Capacity < 5000 {
		t.Errorf("EnsureCuckoo changed config: capacity %d", in.Capacity)
	}
	m, err := s.EnsureBitmap("m", 100)
	must(t, err)
	m2, err := s.EnsureBitmap("m", 5)
	must(t, err)
	if m2.Bits() != 100 || m.Bits() != 100 {
		t.Errorf("EnsureBitmap size %d", m2.Bits())
	}
	n, err := s.EnsureCounting("n", store.BloomConfig{Capacity: 50, NonScaling: true})
	must(t, err)
	n2, err := s.EnsureCounting("n", store.BloomConfig{})
	must(t, err)
	in, _ = n2.Info()
	if !in.NonScaling || in.Capacity != 50 {
		t.Errorf("EnsureCounting changed config: %+v", in)
	}
	_ = n
	// Invalid config for an existing filter: ignored, not compared.
	if _, err := s.EnsureBloom("bb", store.BloomConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsureBloom("bb", store.BloomConfig{ErrorRate: 7}); err != nil {
		t.Logf("EnsureBloom(existing, invalid cfg): %v (doc: cfg is ignored, not compared)", err)
	}
}
