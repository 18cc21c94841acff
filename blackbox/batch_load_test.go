package blackbox_test

import (
	"errors"
	"iter"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// Batch: results as the single calls; ops see earlier ops; an op that cannot
// apply fails the whole batch before anything changes, with an error naming
// the op; empty batch (nil, nil); second Commit ErrInvalid; Len.
func TestBatchSemantics(t *testing.T) {
	s, dir := newStore(t, nil)
	b, _ := s.CreateBloom("b", store.BloomConfig{})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	n, _ := s.CreateCounting("n", store.BloomConfig{})
	m, _ := s.CreateBitmap("m", 64)
	bt := s.NewBatch()
	if res, err := bt.Commit(); res != nil || err != nil {
		t.Errorf("empty batch Commit = %v, %v, want nil, nil", res, err)
	}
	_, err := bt.Commit()
	if err == nil {
		t.Log("second Commit of an empty batch: nil (doc: a batch commits once: a second Commit returns ErrInvalid)")
	}
	bt = s.NewBatch()
	bt.BloomAdd(b, []byte("a"))
	bt.BloomAdd(b, []byte("a"))
	bt.CuckooAdd(c, []byte("a"))
	bt.CuckooDelete(c, []byte("a"))
	bt.CuckooDelete(c, []byte("a"))
	bt.CountingAdd(n, []byte("a"))
	bt.CountingDelete(n, []byte("zz"))
	bt.BitmapSet(m, 3)
	bt.BitmapSet(m, 3)
	bt.BitmapClear(m, 3)
	bt.BitmapSet(m, 4)
	if bt.Len() != 11 {
		t.Errorf("Len = %d", bt.Len())
	}
	res, err := bt.Commit()
	must(t, err)
	want := []bool{true, false, true, true, false, true, false, true, false, true, true}
	if !slices.Equal(res, want) {
		t.Errorf("results %v, want %v", res, want)
	}
	_, err = bt.Commit()
	wantIs(t, "second Commit", err, store.ErrInvalid)
	if !b.Has([]byte("a")) || c.Has([]byte("a")) || n.Count([]byte("a")) < 1 || m.Get(3) || !m.Get(4) {
		t.Error("batch effects wrong")
	}

	// Failing op: nothing changes; error names the op.
	bt = s.NewBatch()
	bt.BloomAdd(b, []byte("new-in-failed"))
	bt.CuckooAdd(c, []byte("c-new"))
	bt.BitmapSet(m, 64)
	_, err = bt.Commit()
	wantIs(t, "batch with bad offset", err, store.ErrInvalid)
	if err != nil && !strings.Contains(err.Error(), "batch op 2") {
		t.Errorf("error does not name op 2: %v", err)
	}
	if b.Has([]byte("new-in-failed")) || c.Has([]byte("c-new")) {
		t.Error("failed batch changed a filter")
	}

	// A handle of another store.
	s2, _ := newStore(t, nil)
	ob, _ := s2.CreateBloom("b", store.BloomConfig{})
	bt = s.NewBatch()
	bt.BloomAdd(ob, []byte("x"))
	_, err = bt.Commit()
	wantIs(t, "batch with another store's handle", err, store.ErrInvalid)

	// Durable: reopen.
	must(t, s.Close())
	s = openStore(t, dir, nil)
	defer s.Close()
	m2, _ := s.Bitmap("m")
	c2, _ := s.Cuckoo("c")
	if !m2.Get(4) || m2.Get(3) || c2.Has([]byte("a")) || c2.Items() != 0 {
		t.Error("batch not durable as committed")
	}
}

// Batch on a NonScaling full filter: ErrFull fails the whole batch.
func TestBatchFullFailsWhole(t *testing.T) {
	s, _ := newStore(t, nil)
	full, _ := s.CreateCuckoo("full", store.CuckooConfig{Capacity: 8, NonScaling: true, BucketSize: 1, FingerprintBits: 8})
	other, _ := s.CreateBloom("o", store.BloomConfig{})
	bt := s.NewBatch()
	bt.BloomAdd(other, []byte("x"))
	for i := range 200 {
		bt.CuckooAdd(full, keyN("f", i))
	}
	_, err := bt.Commit()
	wantIs(t, "batch past full", err, store.ErrFull)
	if other.Has([]byte("x")) || full.Items() != 0 {
		t.Errorf("failed batch changed filters: bloom %v cuckoo items %d", other.Has([]byte("x")), full.Items())
	}
}

// Load: every key, Items as Add in a loop (Bloom: adds that were new), state
// ok; a failing source leaves the filter incomplete: Has true, changes
// ErrIncomplete, Info State "incomplete", Drop recovers; reopen keeps it
// incomplete.
func TestLoadSemantics(t *testing.T) {
	s, dir := newStore(t, nil)
	for _, kind := range []string{"bloom", "cuckoo", "counting"} {
		ks := keys(kind, 5000)
		var load func(iter.Seq2[[]byte, error]) error
		var has func([]byte) bool
		var items func() uint64
		switch kind {
		case "bloom":
			f, _ := s.CreateBloom(kind, store.BloomConfig{Capacity: 10000})
			load, has, items = f.Load, f.Has, f.Card
		case "cuckoo":
			f, _ := s.CreateCuckoo(kind, store.CuckooConfig{Capacity: 10000})
			load, has, items = f.Load, f.Has, f.Items
		case "counting":
			f, _ := s.CreateCounting(kind, store.BloomConfig{Capacity: 10000})
			load, has, items = f.Load, f.Has, f.Items
		}
		must(t, load(store.Keys(slices.Values(ks))))
		for _, k := range ks {
			if !has(k) {
				t.Fatalf("%s: Load lost %s", kind, k)
			}
		}
		if kind != "bloom" && items() != 5000 {
			t.Errorf("%s: Items after Load = %d", kind, items())
		}
		if kind == "bloom" && (items() > 5000 || items() < 4900) {
			t.Errorf("bloom Card after Load = %d", items())
		}
	}
	// Failing source.
	errSrc := errors.New("src broke")
	f, _ := s.CreateCuckoo("inc", store.CuckooConfig{})
	err := f.Load(func(yield func([]byte, error) bool) {
		yield([]byte("one"), nil)
		yield(nil, errSrc)
	})
	if !errors.Is(err, errSrc) || !errors.Is(err, store.ErrIncomplete) {
		t.Errorf("Load err = %v, want source error and ErrIncomplete", err)
	}
	if !f.Has([]byte("never")) || f.Count([]byte("never")) == 0 {
		t.Error("incomplete filter must answer maybe")
	}
	wantIs(t, "Add to incomplete", f.Add([]byte("x")), store.ErrIncomplete)
	in, err := f.Info()
	if err != nil || in.State != "incomplete" {
		t.Errorf("Info = %+v, %v", in.State, err)
	}
	if _, err := f.Fill(); err != nil {
		t.Errorf("Fill of incomplete: %v (doc: Info, Fill and CheckFilter report on it)", err)
	}
	if _, err := s.CheckFilter("inc"); err != nil {
		t.Errorf("CheckFilter of incomplete: %v", err)
	}
	wantIs(t, "second Load of incomplete", f.Load(store.Keys(slices.Values([][]byte{[]byte("z")}))), store.ErrIncomplete)
	// Rename over another: ErrIncomplete; to a free name: fine.
	wantIs(t, "Rename incomplete over bloom", s.Rename("inc", "bloom"), store.ErrIncomplete)
	must(t, s.Rename("inc", "inc2"))
	must(t, s.Close())
	s = openStore(t, dir, nil)
	defer s.Close()
	f2, err := s.Cuckoo("inc2")
	must(t, err)
	in, _ = f2.Info()
	if in.State != "incomplete" || !f2.Has([]byte("never")) {
		t.Errorf("after reopen state %q", in.State)
	}
	l, _ := s.List()
	for _, i := range l {
		if i.Name == "inc2" && i.State != "incomplete" {
			t.Errorf("List state %q", i.State)
		}
	}
	must(t, s.Drop("inc2"))
}

// A panicking source: the panic propagates (doc: Load "may panic: the filter
// is then left incomplete and the store goes on").
func TestLoadSourcePanics(t *testing.T) {
	s, _ := newStore(t, nil)
	f, _ := s.CreateBloom("p", store.BloomConfig{})
	func() {
		defer func() { recover() }()
		_ = f.Load(func(yield func([]byte, error) bool) {
			yield([]byte("a"), nil)
			panic("boom")
		})
	}()
	in, _ := f.Info()
	if in.State != "incomplete" {
		t.Errorf("after panicking source: state %q, want incomplete", in.State)
	}
	if _, err := s.CreateBloom("other", store.BloomConfig{}); err != nil {
		t.Errorf("store did not go on: %v", err)
	}
}

// LoadParallel: "No source, or a nil one, is ErrInvalid. With one source it
// is Load." A failing source: error names its index, incomplete.
func TestLoadParallel(t *testing.T) {
	s, _ := newStore(t, nil)
	f, _ := s.CreateBloom("p", store.BloomConfig{Capacity: 10000})
	wantIs(t, "LoadParallel()", f.LoadParallel(), store.ErrInvalid)
	wantIs(t, "LoadParallel(nil)", f.LoadParallel(nil), store.ErrInvalid)
	in, _ := f.Info()
	if in.State != "ok" {
		t.Errorf("refused LoadParallel left state %q", in.State)
	}
	src := func(lo, hi int) iter.Seq2[[]byte, error] {
		return func(yield func([]byte, error) bool) {
			for i := lo; i < hi; i++ {
				if !yield(keyN("lp", i), nil) {
					return
				}
			}
		}
	}
	must(t, f.LoadParallel(src(0, 3000), src(3000, 6000)))
	for i := range 6000 {
		if !f.Has(keyN("lp", i)) {
			t.Fatalf("lost lp-%d", i)
		}
	}
	g, _ := s.CreateCounting("q", store.BloomConfig{Capacity: 10000})
	errSrc := errors.New("shard 1 broke")
	err := g.LoadParallel(src(0, 100), func(yield func([]byte, error) bool) {
		yield([]byte("x"), nil)
		yield(nil, errSrc)
	})
	if !errors.Is(err, errSrc) || !errors.Is(err, store.ErrIncomplete) {
		t.Errorf("LoadParallel err %v", err)
	}
	if err != nil && !strings.Contains(err.Error(), "1") {
		t.Errorf("error does not name source index 1: %v", err)
	}
}

// Load into a NonScaling filter past its capacity: "a key cannot be added
// (ErrFull)" leaves it incomplete.
func TestLoadFullIncomplete(t *testing.T) {
	s, _ := newStore(t, nil)
	f, _ := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 64, NonScaling: true})
	err := f.Load(store.Keys(slices.Values(keys("x", 1000))))
	wantIs(t, "Load past full", err, store.ErrFull)
	wantIs(t, "Load past full", err, store.ErrIncomplete)
	b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 100, NonScaling: true})
	err = b.Load(store.Keys(slices.Values(keys("x", 1000))))
	wantIs(t, "Bloom Load past full", err, store.ErrFull)
	in, _ := b.Info()
	if in.State != "incomplete" {
		t.Errorf("state %q", in.State)
	}
}

// Rename over another filter of an incomplete (failed rebuild) filter is
// refused and the working filter keeps answering.
func TestRebuildRenameFlow(t *testing.T) {
	s, _ := newStore(t, nil)
	u, _ := s.CreateBloom("users", store.BloomConfig{})
	_, err := u.Add([]byte("alice"))
	must(t, err)
	next, _ := s.CreateBloom("users.next", store.BloomConfig{})
	_ = next.Load(func(yield func([]byte, error) bool) { yield(nil, os.ErrClosed) })
	wantIs(t, "Rename failed rebuild", s.Rename("users.next", "users"), store.ErrIncomplete)
	u2, err := s.Bloom("users")
	must(t, err)
	if !u2.Has([]byte("alice")) || u2.Has([]byte("nobody-zz")) {
		t.Error("working filter changed")
	}
}
