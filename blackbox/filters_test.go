package blackbox_test

import (
	"errors"
	"math"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// Bloom Add "reports whether it was new (no layer held it)"; Card counts adds
// that reported new; AddMany results[i] is Add's answer; Has false means
// certainly not; nil and empty keys are keys like any other.
func TestBloomAddHasCard(t *testing.T) {
	s, _ := newStore(t, nil)
	b, err := s.CreateBloom("b", store.BloomConfig{Capacity: 10000})
	must(t, err)
	isNew, err := b.Add([]byte("alice"))
	must(t, err)
	if !isNew {
		t.Error("first Add not new")
	}
	isNew, err = b.Add([]byte("alice"))
	must(t, err)
	if isNew {
		t.Error("second Add of the same key new")
	}
	if b.Card() != 1 {
		t.Errorf("Card = %d, want 1", b.Card())
	}
	// nil and empty key: the same key (both hash the empty byte string).
	isNew, err = b.Add(nil)
	must(t, err)
	if !isNew {
		t.Error("Add(nil) not new")
	}
	if !b.Has([]byte{}) || !b.Has(nil) {
		t.Error("nil / empty key not found")
	}
	isNew, _ = b.Add([]byte{})
	if isNew {
		t.Error("Add(empty) after Add(nil) new: nil and empty should be the same key")
	}
	if store.Hash(nil) != store.Hash([]byte{}) {
		t.Error("Hash(nil) != Hash(empty)")
	}
	h := store.Hash([]byte("hashed"))
	isNew, err = b.AddHash(h)
	must(t, err)
	if !isNew || !b.HasHash(h) || !b.Has([]byte("hashed")) {
		t.Error("AddHash/HasHash/Has disagree")
	}
	res, err := b.AddMany([][]byte{[]byte("x"), []byte("y"), []byte("x"), []byte("alice")})
	must(t, err)
	if len(res) != 4 || !res[0] || !res[1] || res[2] || res[3] {
		t.Errorf("AddMany = %v, want [true true false false]", res)
	}
	if b.Card() != 5 {
		t.Errorf("Card = %d, want 5", b.Card())
	}
	res, err = b.AddMany(nil)
	if err != nil || len(res) != 0 {
		t.Errorf("AddMany(nil) = %v, %v", res, err)
	}
	in, err := b.Info()
	must(t, err)
	if in.Items != 5 {
		t.Errorf("Info.Items = %d, want 5", in.Items)
	}
	// HasMany shapes.
	got := b.HasMany([][]byte{[]byte("x"), []byte("never-added-zzz")})
	if len(got) != 2 || !got[0] {
		t.Errorf("HasMany = %v", got)
	}
	if got := b.HasMany(nil); len(got) != 0 {
		t.Errorf("HasMany(nil) = %v", got)
	}
	hm := b.HasManyHash([]uint64{h, store.Hash([]byte("x"))})
	if len(hm) != 2 || !hm[0] || !hm[1] {
		t.Errorf("HasManyHash = %v", hm)
	}
	// HasManyInto: dst grown if short, returns dst[:len(keys)].
	dst := make([]bool, 10)
	out := b.HasManyInto(dst, [][]byte{[]byte("x")})
	if len(out) != 1 || &out[0] != &dst[0] || !out[0] {
		t.Errorf("HasManyInto did not reuse dst: len %d", len(out))
	}
	out = b.HasManyInto(nil, [][]byte{[]byte("x"), []byte("y")})
	if len(out) != 2 || !out[0] || !out[1] {
		t.Errorf("HasManyInto(nil) = %v", out)
	}
}

// "no allocation per Has/HasHash; none in HasMany given an output slice"
// (README targets, #7), for every kind.
func TestLookupAllocations(t *testing.T) {
	s, _ := newStore(t, nil)
	b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 10000})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 10000})
	n, _ := s.CreateCounting("n", store.BloomConfig{Capacity: 10000})
	m, _ := s.CreateBitmap("m", 1000)
	ks := keys("k", 300)
	_, err := b.AddMany(ks)
	must(t, err)
	_, err = c.AddMany(ks)
	must(t, err)
	_, err = n.AddMany(ks)
	must(t, err)
	dst := make([]bool, len(ks))
	hs := make([]uint64, len(ks))
	for i, k := range ks {
		hs[i] = store.Hash(k)
	}
	k := []byte("k-7")
	h := store.Hash(k)
	check := func(name string, f func()) {
		if a := testing.AllocsPerRun(50, f); a != 0 {
			t.Errorf("%s: %.1f allocations per run, want 0", name, a)
		}
	}
	check("Bloom.Has", func() { b.Has(k) })
	check("Bloom.HasHash", func() { b.HasHash(h) })
	check("Bloom.HasManyInto", func() { b.HasManyInto(dst, ks) })
	check("Bloom.HasManyHashInto", func() { b.HasManyHashInto(dst, hs) })
	check("Cuckoo.Has", func() { c.Has(k) })
	check("Cuckoo.HasManyInto", func() { c.HasManyInto(dst, ks) })
	check("Cuckoo.HasManyHashInto", func() { c.HasManyHashInto(dst, hs) })
	check("Counting.Has", func() { n.Has(k) })
	check("Counting.HasManyInto", func() { n.HasManyInto(dst, ks) })
	check("Counting.HasManyHashInto", func() { n.HasManyHashInto(dst, hs) })
	check("Bitmap.Get", func() { m.Get(5) })
}

// Scalable Bloom: grows layers past Capacity, answers every added key, and
// "the whole chain's compound rate stays at or below" ErrorRate.
func TestBloomScalableGrowthAndFPR(t *testing.T) {
	s, _ := newStore(t, nil)
	const rate = 0.05
	b, err := s.CreateBloom("s", store.BloomConfig{Capacity: 1000, ErrorRate: rate})
	must(t, err)
	ks := keys("grow", 8000)
	_, err = b.AddMany(ks)
	must(t, err)
	in, _ := b.Info()
	if in.Layers < 2 {
		t.Fatalf("8x capacity in %d layer(s)", in.Layers)
	}
	// Layer i rate = ErrorRate/2^(i+1); capacity Capacity*Expansion^i.
	for i, l := range in.LayerInfo {
		want := rate / math.Pow(2, float64(i+1))
		if math.Abs(l.ErrorRate-want) > want*1e-9 {
			t.Errorf("layer %d rate %g, want %g", i, l.ErrorRate, want)
		}
		if l.Capacity != 1000<<i {
			t.Errorf("layer %d capacity %d, want %d", i, l.Capacity, 1000<<i)
		}
	}
	var sum uint64
	for _, l := range in.LayerInfo {
		sum += l.Capacity
	}
	if in.Capacity != sum {
		t.Errorf("Info.Capacity %d != sum of layers %d", in.Capacity, sum)
	}
	for _, k := range ks {
		if !b.Has(k) {
			t.Fatalf("false negative %s", k)
		}
	}
	fp := 0
	const probes = 100000
	for i := range probes {
		if b.Has(keyN("absent", i)) {
			fp++
		}
	}
	measured := float64(fp) / probes
	t.Logf("layers %d, measured FPR %.4f, estimated %.4f", in.Layers, measured, in.EstimatedFPR)
	if measured > rate*1.1 {
		t.Errorf("measured FPR %.4f above ErrorRate %.2f", measured, rate)
	}
}

// NonScaling Bloom at capacity: ErrFull; AddMany returns results of the keys
// before the failing one, len(results) = failing key's index, and they are
// durable.
func TestBloomNonScalingFull(t *testing.T) {
	s, dir := newStore(t, nil)
	b, err := s.CreateBloom("ns", store.BloomConfig{Capacity: 100, NonScaling: true})
	must(t, err)
	ks := keys("full", 300)
	res, err := b.AddMany(ks)
	wantIs(t, "AddMany past capacity", err, store.ErrFull)
	if len(res) == 0 || len(res) >= len(ks) {
		t.Fatalf("len(results) = %d", len(res))
	}
	idx := len(res)
	in, _ := b.Info()
	if in.Items != 100 {
		t.Errorf("Items = %d at ErrFull, want capacity 100", in.Items)
	}
	if _, err := b.Add(keyN("another-new", 1)); !errors.Is(err, store.ErrFull) {
		// a false-positive key would be "not new" and succeed; try several.
		full := false
		for i := range 50 {
			if _, err := b.Add(keyN("another-new", i+2)); errors.Is(err, store.ErrFull) {
				full = true
				break
			}
		}
		if !full {
			t.Errorf("Add past capacity: %v, want ErrFull", err)
		}
	}
	// Adding a present key to a full filter is not an error: it changes nothing.
	if isNew, err := b.Add(ks[0]); err != nil || isNew {
		t.Errorf("Add(present) to full filter = %v, %v", isNew, err)
	}
	s.Close()
	s2 := openStore(t, dir, nil)
	defer s2.Close()
	b2, _ := s2.Bloom("ns")
	for i := range idx {
		if !b2.Has(ks[i]) {
			t.Errorf("key %d acknowledged before ErrFull lost after reopen", i)
		}
	}
}

// Bloom Expansion: "the capacity factor of each new layer".
func TestBloomExpansionFactor(t *testing.T) {
	s, _ := newStore(t, nil)
	b, err := s.CreateBloom("e", store.BloomConfig{Capacity: 100, Expansion: 4})
	must(t, err)
	_, err = b.AddMany(keys("e", 600))
	must(t, err)
	in, _ := b.Info()
	if in.Layers < 2 || in.LayerInfo[1].Capacity != 400 {
		t.Errorf("layers %+v, want layer 1 capacity 400", in.LayerInfo)
	}
}

// Cuckoo: Add stores copies, Count counts them, Delete removes one, false,nil
// when absent; AddNX; Items = adds - deletes.
func TestCuckooBasics(t *testing.T) {
	s, _ := newStore(t, nil)
	c, err := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 1000})
	must(t, err)
	k := []byte("k")
	must(t, c.Add(k))
	must(t, c.Add(k))
	if c.Count(k) != 2 || c.Items() != 2 {
		t.Errorf("Count %d Items %d, want 2 2", c.Count(k), c.Items())
	}
	ok, err := c.AddNX(k)
	if err != nil || ok {
		t.Errorf("AddNX(present) = %v, %v", ok, err)
	}
	ok, err = c.AddNX([]byte("other"))
	if err != nil || !ok {
		t.Errorf("AddNX(new) = %v, %v", ok, err)
	}
	del, err := c.Delete([]byte("never"))
	if err != nil || del {
		t.Errorf("Delete(absent) = %v, %v, want false, nil", del, err)
	}
	del, err = c.Delete(k)
	if err != nil || !del || c.Count(k) != 1 {
		t.Errorf("Delete = %v, %v; Count %d", del, err, c.Count(k))
	}
	if c.Items() != 2 {
		t.Errorf("Items = %d, want 2", c.Items())
	}
	n, err := c.AddMany(keys("m", 10))
	if err != nil || n != 10 {
		t.Errorf("AddMany = %d, %v", n, err)
	}
	dels, err := c.DeleteMany([][]byte{keyN("m", 0), []byte("never2"), keyN("m", 0)})
	if err != nil || len(dels) != 3 || !dels[0] || dels[1] || dels[2] {
		t.Errorf("DeleteMany = %v, %v, want [true false false]", dels, err)
	}
	if c.Items() != 11 {
		t.Errorf("Items = %d, want 11", c.Items())
	}
	in, _ := c.Info()
	if in.Items != 11 {
		t.Errorf("Info.Items = %d", in.Items)
	}
}

// Cuckoo NonScaling: ErrFull when no slot; AddMany returns the count added
// before the failing key.
func TestCuckooNonScalingFull(t *testing.T) {
	s, _ := newStore(t, nil)
	c, err := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 64, NonScaling: true})
	must(t, err)
	in, _ := c.Info()
	ks := keys("f", int(in.Capacity)*4)
	n, err := c.AddMany(ks)
	wantIs(t, "AddMany past capacity", err, store.ErrFull)
	if n == 0 || n >= len(ks) {
		t.Fatalf("added %d", n)
	}
	if c.Items() != uint64(n) {
		t.Errorf("Items %d != added %d", c.Items(), n)
	}
	for i := range n {
		if !c.Has(ks[i]) {
			t.Errorf("key %d lost", i)
		}
	}
	in, _ = c.Info()
	if in.Layers != 1 {
		t.Errorf("NonScaling grew to %d layers", in.Layers)
	}
}

// Cuckoo growth: "When no slot is found it grows a layer"; Expansion default
// 1: "layers of the first's size".
func TestCuckooGrows(t *testing.T) {
	s, _ := newStore(t, nil)
	c, err := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 256})
	must(t, err)
	ks := keys("g", 2000)
	n, err := c.AddMany(ks)
	if err != nil || n != len(ks) {
		t.Fatalf("AddMany = %d, %v", n, err)
	}
	in, _ := c.Info()
	if in.Layers < 2 {
		t.Fatalf("layers %d", in.Layers)
	}
	for i, l := range in.LayerInfo {
		if l.Capacity != in.LayerInfo[0].Capacity {
			t.Errorf("layer %d capacity %d != first %d (Expansion 1)", i, l.Capacity, in.LayerInfo[0].Capacity)
		}
	}
	for _, k := range ks {
		if !c.Has(k) {
			t.Fatalf("false negative %s", k)
		}
	}
}

// "a cuckoo key whose two buckets are full of its own copies" is ErrFull,
// even for a growing filter (package doc: does not grow a layer).
func TestCuckooSameKeyFull(t *testing.T) {
	s, _ := newStore(t, nil)
	c, err := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 1024, BucketSize: 4})
	must(t, err)
	k := []byte("dup")
	var last error
	added := 0
	for range 20 {
		if last = c.Add(k); last != nil {
			break
		}
		added++
	}
	wantIs(t, "Add of the same key past two buckets", last, store.ErrFull)
	if added != 8 {
		t.Errorf("added %d copies before ErrFull, want 8 (2 buckets x 4)", added)
	}
	in, _ := c.Info()
	if in.Layers != 1 {
		t.Errorf("grew to %d layers", in.Layers)
	}
	if c.Count(k) != uint64(added) {
		t.Errorf("Count %d", c.Count(k))
	}
}

// Counting: Count is the smallest counter (at least adds - deletes unless
// saturated at 15); Delete decrements "if all are above zero"; Items = adds
// minus successful deletes; NonScaling: ErrFull beyond Capacity.
func TestCountingBasics(t *testing.T) {
	s, _ := newStore(t, nil)
	n, err := s.CreateCounting("n", store.BloomConfig{Capacity: 1000})
	must(t, err)
	k := []byte("k")
	for range 3 {
		must(t, n.Add(k))
	}
	if n.Count(k) < 3 || n.Items() != 3 {
		t.Errorf("Count %d Items %d", n.Count(k), n.Items())
	}
	del, err := n.Delete(k)
	if err != nil || !del || n.Count(k) < 2 || n.Items() != 2 {
		t.Errorf("Delete = %v, %v; Count %d Items %d", del, err, n.Count(k), n.Items())
	}
	del, err = n.Delete([]byte("never-added"))
	if err != nil || del {
		t.Errorf("Delete(absent) = %v, %v", del, err)
	}
	if n.Items() != 2 {
		t.Errorf("Items after failed delete = %d", n.Items())
	}
	// Saturation at 15.
	sat := []byte("sat")
	for range 20 {
		must(t, n.Add(sat))
	}
	if got := n.Count(sat); got != 15 {
		t.Errorf("Count after 20 adds = %d, want 15 (saturated)", got)
	}
	added, err := n.AddMany(keys("m", 5))
	if err != nil || added != 5 {
		t.Errorf("AddMany = %d, %v", added, err)
	}
	ds, err := n.DeleteMany([][]byte{keyN("m", 0), []byte("nope")})
	if err != nil || len(ds) != 2 || !ds[0] || ds[1] {
		t.Errorf("DeleteMany = %v, %v", ds, err)
	}
	in, _ := n.Info()
	if in.Kind != "counting" || in.Layers != 1 || in.Items != n.Items() {
		t.Errorf("Info = %+v", in)
	}

	ns, err := s.CreateCounting("ns", store.BloomConfig{Capacity: 100, NonScaling: true})
	must(t, err)
	cnt, err := ns.AddMany(keys("ns", 200))
	wantIs(t, "counting NonScaling AddMany past capacity", err, store.ErrFull)
	if cnt != 100 {
		t.Errorf("added %d before ErrFull, want 100", cnt)
	}
	// Scaling counting: adds beyond capacity succeed, one layer.
	sc, err := s.CreateCounting("sc", store.BloomConfig{Capacity: 100})
	must(t, err)
	cnt, err = sc.AddMany(keys("sc", 300))
	if err != nil || cnt != 300 {
		t.Errorf("scaling counting AddMany = %d, %v", cnt, err)
	}
	in, _ = sc.Info()
	if in.Layers != 1 || in.Items != 300 {
		t.Errorf("counting past capacity Info layers %d items %d", in.Layers, in.Items)
	}
}

// Bitmap: Set/Clear report the change; Get out of range is clear; Set out of
// range ErrInvalid; Count; SetMany/ClearMany; Fill uses Count.
func TestBitmapBasics(t *testing.T) {
	s, _ := newStore(t, nil)
	m, err := s.CreateBitmap("m", 100)
	must(t, err)
	ch, err := m.Set(5)
	if err != nil || !ch {
		t.Errorf("Set = %v, %v", ch, err)
	}
	ch, _ = m.Set(5)
	if ch {
		t.Error("second Set reported clear")
	}
	if !m.Get(5) || m.Get(6) || m.Get(1000) || m.Get(math.MaxUint64) {
		t.Error("Get wrong")
	}
	_, err = m.Set(100)
	wantIs(t, "Set(100) of 100 bits", err, store.ErrInvalid)
	_, err = m.Clear(100)
	wantIs(t, "Clear(100) of 100 bits", err, store.ErrInvalid)
	ch, err = m.Clear(5)
	if err != nil || !ch || m.Get(5) {
		t.Errorf("Clear = %v, %v", ch, err)
	}
	ch, _ = m.Clear(5)
	if ch {
		t.Error("Clear of clear bit reported set")
	}
	res, err := m.SetMany([]uint64{1, 2, 99})
	if err != nil || len(res) != 3 || m.Count() != 3 {
		t.Errorf("SetMany = %v, %v; Count %d", res, err, m.Count())
	}
	res, err = m.ClearMany([]uint64{1, 150})
	wantIs(t, "ClearMany out of range", err, store.ErrInvalid)
	if len(res) != 1 || !res[0] {
		t.Errorf("ClearMany results = %v, want [true]", res)
	}
	got := m.GetMany([]uint64{2, 1, 500})
	if len(got) != 3 || !got[0] || got[1] || got[2] {
		t.Errorf("GetMany = %v", got)
	}
	fi, err := m.Fill()
	must(t, err)
	if fi.Used != m.Count() || fi.Total != 100 {
		t.Errorf("Fill = %+v, Count %d", fi, m.Count())
	}
	in, _ := m.Info()
	if in.Capacity != 100 || in.Items != m.Count() || in.EstimatedFPR != 0 || in.ErrorRate != 0 || in.Kind != "bitmap" {
		t.Errorf("bitmap Info = %+v", in)
	}
}

// Info fields: SizeBytes on disk, header pages included; BitsPerKey = data
// bits / Items, 0 with no items; LayerInfo per layer.
func TestInfoFields(t *testing.T) {
	s, dir := newStore(t, nil)
	b, err := s.CreateBloom("b", store.BloomConfig{Capacity: 1000})
	must(t, err)
	in, _ := b.Info()
	if in.BitsPerKey != 0 || in.Items != 0 {
		t.Errorf("empty Info BitsPerKey %g Items %d", in.BitsPerKey, in.Items)
	}
	if len(in.LayerInfo) != in.Layers {
		t.Errorf("LayerInfo len %d, Layers %d", len(in.LayerInfo), in.Layers)
	}
	_, err = b.AddMany(keys("i", 500))
	must(t, err)
	in, _ = b.Info()
	fi, err := b.Fill()
	must(t, err)
	want := float64(fi.Total) / float64(in.Items)
	if math.Abs(in.BitsPerKey-want) > 1e-9 {
		t.Logf("BitsPerKey %g, Fill.Total/Items %g (data bits: the doc's definition)", in.BitsPerKey, want)
	}
	st := statSize(t, dir+"/filters")
	if in.SizeBytes != st {
		t.Errorf("Info.SizeBytes %d, files on disk %d", in.SizeBytes, st)
	}
	l, err := s.List()
	must(t, err)
	if len(l) != 1 || l[0].Name != "b" || l[0].Items != in.Items {
		t.Errorf("List = %+v", l)
	}
}
