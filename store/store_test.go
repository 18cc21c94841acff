package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
)

// key returns the test key of i: "key-%08d", written out by hand (the
// tests make millions of keys, and fmt.Sprintf was a fifth of the store
// tests' CPU under the race detector).
func key(i int) []byte {
	if i < 0 {
		return []byte(fmt.Sprintf("key-%08d", i))
	}
	var d [20]byte
	n := len(d)
	for v := uint64(i); v > 0 || n > len(d)-8; v /= 10 {
		n--
		d[n] = byte('0' + v%10)
	}
	return append(append(make([]byte, 0, 4+len(d)-n), "key-"...), d[n:]...)
}

func mustOpen(t *testing.T, dir string, opts *Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBloomPersistsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{Sync: SyncInterval}) // a clean Close: no fsync per add needed
	b, err := s.CreateBloom("users", BloomConfig{Capacity: 1000, ErrorRate: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	// Three layers' worth: expansion happens while adding.
	for i := 0; i < 7000; i++ {
		if _, err := b.Add(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := b.Add(key(5)); n {
		t.Fatal("re-adding a key reported new")
	}
	card := b.Card()
	if card < 6900 || card > 7000 {
		t.Fatalf("Card = %d after 7000 distinct adds", card)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, nil)
	defer s.Close()
	b, err = s.Bloom("users")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 7000; i++ {
		if !b.Has(key(i)) {
			t.Fatalf("false negative for %s after reopen", key(i))
		}
	}
	if b.Card() != card {
		t.Fatalf("Card after reopen %d, want %d", b.Card(), card)
	}
	in := mustInfo(t, b)
	if in.Layers < 3 || in.Items != card || in.EstimatedFPR <= 0 || in.EstimatedFPR > 0.01 {
		t.Fatalf("Info = %+v", in)
	}
	if fill, err := b.Fill(); err != nil || fill.Ratio <= 0 || len(fill.Layers) != in.Layers {
		t.Fatalf("Fill = %+v, %v", fill, err)
	}
}

func TestRecoveryWithoutClose(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	b, _ := s.CreateBloom("b", BloomConfig{Capacity: 100})
	c, _ := s.CreateCuckoo("c", CuckooConfig{Capacity: 100, Expansion: 2})
	n, _ := s.CreateCounting("n", BloomConfig{Capacity: 1000})
	bm, _ := s.CreateBitmap("m", 1000)
	for i := 0; i < 500; i++ {
		must(t, second(b.Add(key(i))))
		must(t, c.Add(key(i)))
		must(t, n.Add(key(i%50)))
		must(t, second(bm.Set(uint64(i*2))))
	}
	for i := 0; i < 100; i++ {
		if ok, err := c.Delete(key(i)); !ok || err != nil {
			t.Fatalf("delete %d: %v %v", i, ok, err)
		}
		must(t, second(bm.Clear(uint64(i*2))))
	}
	// Abandon without Close: what a crash leaves (the page cache holds
	// the data, the WAL holds every record).
	s.abandonForTest()
	s = mustOpen(t, dir, nil)
	defer s.Close()
	b, _ = s.Bloom("b")
	c, _ = s.Cuckoo("c")
	n, _ = s.Counting("n")
	bm, _ = s.Bitmap("m")
	for i := 0; i < 500; i++ {
		if !b.Has(key(i)) {
			t.Fatalf("bloom lost %d", i)
		}
		if i >= 100 && !c.Has(key(i)) {
			t.Fatalf("cuckoo lost %d", i)
		}
		if got := bm.Get(uint64(i * 2)); got != (i >= 100) {
			t.Fatalf("bitmap bit %d = %v", i*2, got)
		}
	}
	if got := n.Count(key(7)); got < 10 {
		t.Fatalf("counting Count = %d, want >= 10", got)
	}
	if c.Items() != 400 || bm.Count() != 400 || n.Items() != 500 || b.Card() < 490 {
		t.Fatalf("counts after recovery: cuckoo %d bitmap %d counting %d bloom %d", c.Items(), bm.Count(), n.Items(), b.Card())
	}
}

func TestSecondWriterLocked(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	defer s.Close()
	if _, err := Open(dir, nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("second writer: %v, want ErrLocked", err)
	}
	b, _ := s.CreateBloom("x", BloomConfig{})
	b.Add([]byte("a"))
	ro, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only beside writer: %v", err)
	}
	defer ro.Close()
	rb, err := ro.Bloom("x")
	if err != nil {
		t.Fatal(err)
	}
	if !rb.Has([]byte("a")) {
		t.Fatal("read-only store misses a key logged after the checkpoint")
	}
	if _, err := rb.Add([]byte("b")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("add through read-only: %v", err)
	}
	if _, err := ro.CreateBloom("y", BloomConfig{}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("create through read-only: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	long := strings.Repeat("n", 201)
	for _, name := range []string{"", long, "a/b", "a\x00b", "\xff"} {
		if _, err := s.CreateBloom(name, BloomConfig{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	cases := map[string]error{
		"error rate": second(s.CreateBloom("a", BloomConfig{ErrorRate: 1.5})),
		"expansion":  second(s.CreateBloom("a", BloomConfig{Expansion: 1000})),
		"b*f":        second(s.CreateCuckoo("a", CuckooConfig{BucketSize: 8, FingerprintBits: 16})),
		"f":          second(s.CreateCuckoo("a", CuckooConfig{FingerprintBits: 3})),
		"bits":       second(s.CreateBitmap("a", 0)),
		"counting":   second(s.CreateCounting("a", BloomConfig{ErrorRate: -1})),
	}
	for what, err := range cases {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", what, err)
		}
	}
	if l, _ := s.List(); len(l) != 0 {
		t.Fatalf("bad creates left filters: %+v", l)
	}
	if files, _ := os.ReadDir(filepath.Join(dir, "filters")); len(files) != 0 {
		t.Fatalf("bad creates left files: %v", files)
	}
	s.CreateBloom("b", BloomConfig{})
	if _, err := s.CreateBloom("b", BloomConfig{}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := s.Cuckoo("b"); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("wrong kind: %v", err)
	}
	if _, err := s.Bloom("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	bm, _ := s.CreateBitmap("m", 10)
	if _, err := bm.Set(10); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bitmap offset: %v", err)
	}
	b, _ := s.Bloom("b")
	s.Close()
	if _, err := b.Add([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("add after close: %v", err)
	}
	if !b.Has([]byte("x")) {
		t.Fatal("a closed filter must answer maybe, never a false negative")
	}
	if _, err := s.CreateBloom("c", BloomConfig{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("create after close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("double close: %v", err)
	}
	if _, err := Open(dir, &Options{SyncEvery: -1, CheckpointBytes: 5, Sync: 7, CheckpointEvery: time.Nanosecond}); !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), "SyncEvery") || !strings.Contains(err.Error(), "CheckpointBytes") || !strings.Contains(err.Error(), "CheckpointEvery") {
		t.Fatalf("bad options: %v", err)
	}
}

func TestDropAndOrphans(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	b, _ := s.CreateBloom("a", BloomConfig{Capacity: 10})
	for i := 0; i < 100; i++ {
		b.Add(key(i))
	}
	if err := s.Drop("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Add(key(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("add to dropped filter: %v", err)
	}
	if err := s.Drop("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second drop: %v", err)
	}
	// Files the catalog does not know. Those whose header proves they are
	// this store's leftovers (a create a crash cut short: the next id,
	// all zero; an interrupted create's temporary file) are removed;
	// anything not provably this store's is left alone.
	orphan := s.layerPath(s.nextID, 0)
	tmpOrphan := s.layerPath(s.nextID+5, 0) + ".tmp"
	junk := filepath.Join(dir, "filters", "97-0.flt")
	m := &format.FilterMeta{ID: s.nextID, Kind: mmapbits.KindBitmap, Layers: []format.LayerMeta{{Size: 64, DataPages: 1}}}
	r, err := s.opts.mapper.Create(orphan, m.Header(0, s.id))
	must(t, err)
	r.Close()
	m.ID = s.nextID + 5
	r, err = s.opts.mapper.Create(s.layerPath(m.ID, 0), m.Header(0, s.id))
	must(t, err)
	r.Close()
	must(t, os.Rename(s.layerPath(m.ID, 0), tmpOrphan))
	must(t, os.WriteFile(junk, []byte("junk"), 0o644))
	s.Close()
	s = mustOpen(t, dir, nil)
	defer s.Close()
	for _, p := range []string{orphan, tmpOrphan} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("orphan %s survived: %v", p, err)
		}
	}
	if files, _ := os.ReadDir(filepath.Join(dir, "filters")); len(files) != 1 || files[0].Name() != filepath.Base(junk) {
		t.Fatalf("filters/ holds %v, want only the unprovable %s", files, filepath.Base(junk))
	}
	// The name can be reused, with a fresh filter.
	b, _ = s.CreateBloom("a", BloomConfig{})
	if b.Has(key(1)) && b.Has(key(2)) && b.Has(key(3)) {
		t.Fatal("re-created filter carries the dropped one's bits")
	}
}

// TestCorruptFilesReported: a damaged or missing layer file makes its
// filter broken, reported with ErrCorrupt naming the file.
func TestCorruptFilesReported(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	s.CreateBloom("a", BloomConfig{})
	s.Close()
	path := filepath.Join(dir, "filters", "1-0.flt")
	data, _ := os.ReadFile(path)
	data[40] ^= 1 // the salt: CRC no longer matches
	os.WriteFile(path, data, 0o644)
	check := func(what string) {
		t.Helper()
		s := mustOpen(t, dir, nil)
		defer s.Close()
		b, err := s.Bloom("a")
		must(t, err)
		if _, err := b.Info(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "1-0.flt") {
			t.Fatalf("%s: %v", what, err)
		}
	}
	check("flipped header byte")
	os.Remove(path)
	check("missing filter file")
}

func TestConcurrentAddsShareSyncs(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	b, _ := s.CreateBloom("b", BloomConfig{Capacity: 100000})
	c, _ := s.CreateCuckoo("c", CuckooConfig{Capacity: 100000})
	before := s.log.Stats()
	var wg sync.WaitGroup
	const workers, per = 32, 50
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				k := key(w*per + i)
				if _, err := b.Add(k); err != nil {
					t.Error(err)
				}
				if err := c.Add(k); err != nil {
					t.Error(err)
				}
			}
		}(w)
	}
	wg.Wait()
	st := s.log.Stats()
	records, syncs := st.Records-before.Records, st.Syncs-before.Syncs
	t.Logf("%d records, %d fsyncs", records, syncs)
	if records != 2*workers*per || syncs*2 > records {
		t.Fatalf("%d records took %d fsyncs: group commit is not sharing", records, syncs)
	}
	for i := 0; i < workers*per; i++ {
		if !b.Has(key(i)) || !c.Has(key(i)) {
			t.Fatalf("lost %d", i)
		}
	}
}

func TestLoadAndIncomplete(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	b, _ := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	keys := func(n int) func(func([]byte) bool) {
		return func(yield func([]byte) bool) {
			for i := 0; i < n; i++ {
				if !yield(key(i)) {
					return
				}
			}
		}
	}
	if err := b.Load(Keys(keys(5000))); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5000; i++ {
		if !b.Has(key(i)) {
			t.Fatalf("Load lost %d", i)
		}
	}
	// Interrupt a load: the catalog says loading when the process dies.
	c, _ := s.CreateCuckoo("c", CuckooConfig{Capacity: 100000})
	c.b.mu.Lock()
	c.b.loading = make(chan struct{})
	m := c.b.snapshotMeta(c.b.meta.SyncedLSN)
	c.b.mu.Unlock()
	if err := s.cat.PutFilters(0, map[string]*format.FilterMeta{"c": m}); err != nil {
		t.Fatal(err)
	}
	s.abandonForTest()
	s = mustOpen(t, dir, nil)
	defer s.Close()
	c, _ = s.Cuckoo("c")
	if err := c.Add(key(1)); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("add to incomplete: %v", err)
	}
	if !c.Has(key(123456)) {
		t.Fatal("an incomplete filter must answer maybe")
	}
	l, _ := s.List()
	states := []string{}
	for _, in := range l {
		states = append(states, in.Name+":"+in.State)
	}
	if !slices.Equal(states, []string{"b:ok", "c:incomplete"}) {
		t.Fatalf("states %v", states)
	}
	if err := s.Drop("c"); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestCuckooHotKeyDoesNotGrow(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	c, _ := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000, Expansion: 2})
	var err error
	n := 0
	for ; n < 100 && err == nil; n++ {
		err = c.Add([]byte("hot"))
	}
	if !errors.Is(err, ErrFull) || mustInfo(t, c).Layers != 1 {
		t.Fatalf("after %d adds of one key: err %v, layers %d", n, err, mustInfo(t, c).Layers)
	}
	if got := c.Count([]byte("hot")); got != uint64(n-1) {
		t.Fatalf("Count = %d, want %d", got, n-1)
	}
}

func TestCuckooDeleteRefusesCrossLayerMatch(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	c, _ := s.CreateCuckoo("c", CuckooConfig{Capacity: 64, Expansion: 2})
	must(t, c.Add([]byte("twice")))
	for i := 0; mustInfo(t, c).Layers < 2; i++ {
		must(t, c.Add(key(i)))
	}
	must(t, c.Add([]byte("twice"))) // into the new layer
	ok, err := c.Delete([]byte("twice"))
	if !errors.Is(err, ErrAmbiguous) || ok {
		t.Fatalf("Delete of a key matching in two layers = %v, %v; want false, ErrAmbiguous", ok, err)
	}
	if got := c.Count([]byte("twice")); got != 2 {
		t.Fatalf("Count after a refused delete = %d, want 2", got)
	}
	// A key in one layer deletes normally.
	ok, err = c.Delete(key(0))
	if err != nil || !ok || c.Has(key(0)) && c.Count(key(0)) != 0 {
		t.Fatalf("single-layer delete: %v %v, count %d", ok, err, c.Count(key(0)))
	}
}

// TestCorruptCatalogNeverPanics: random damage to the catalog's pages gives
// Open an error (or, where the damage misses everything read, success),
// never a crash, in both modes.
func TestCorruptCatalogNeverPanics(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	for i := 0; i < 20; i++ {
		s.CreateBloom(fmt.Sprintf("f%02d", i), BloomConfig{})
	}
	s.Close()
	path := filepath.Join(dir, format.CatalogName)
	good, _ := os.ReadFile(path)
	rng := newTestRand(testseed.Seed(t))
	failures := 0
	for round := 0; round < 200; round++ {
		bad := append([]byte(nil), good...)
		for n := 0; n < 1+rng.IntN(64); n++ {
			off := 2*4096 + rng.IntN(len(bad)-2*4096) // past the two meta pages
			bad[off] = byte(rng.Uint32())
		}
		os.WriteFile(path, bad, 0o644)
		for _, ro := range []bool{true, false} {
			s, err := Open(dir, &Options{ReadOnly: ro, CheckpointEvery: -1})
			if err != nil {
				failures++
				continue
			}
			s.List()
			s.Close()
		}
	}
	os.WriteFile(path, good, 0o644)
	t.Logf("%d of 400 opens of a damaged catalog failed cleanly", failures)
	if failures == 0 {
		t.Fatal("no damage was ever detected: the test does not reach the catalog")
	}
}

// TestReadOnlyWALCorruptionBeforeValidRecords: the read-only scan treats a
// bad record followed by valid ones as corruption, like wal.Open, not as a
// torn tail that would silently hide the records after it.
func TestReadOnlyWALCorruptionBeforeValidRecords(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	b, _ := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	for i := 0; i < 50; i++ {
		b.Add(key(i))
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.log"))
	data, _ := os.ReadFile(segs[len(segs)-1])
	// The records, without the space the writer reserved past them.
	data = data[:bytes.LastIndexFunc(data, func(r rune) bool { return r != 0 })+1]
	data[len(data)/2] ^= 0x55 // a record in the middle of the last segment
	os.WriteFile(segs[len(segs)-1], data, 0o644)
	if _, err := Open(dir, &Options{ReadOnly: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read-only open over a corrupt middle record: %v", err)
	}
	// A torn tail (the last record cut short) is not corruption.
	os.WriteFile(segs[len(segs)-1], append([]byte(nil), data[:len(data)/2]...), 0o644)
	ro, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open over a torn tail: %v", err)
	}
	ro.Close()
	s.abandonForTest()
}

func TestCuckooAddMany(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		dir := t.TempDir()
		s := mustOpen(t, dir, &Options{Sync: mode})
		c, _ := s.CreateCuckoo("c", CuckooConfig{Capacity: 500, Expansion: 2})
		keys := make([][]byte, 3000) // several expansions within batches
		for i := range keys {
			keys[i] = key(i)
		}
		before := s.log.Stats()
		for i := 0; i < len(keys); i += 1000 {
			if n, err := c.AddMany(keys[i : i+1000]); err != nil || n != 1000 {
				t.Fatalf("%v: AddMany = %d, %v", mode, n, err)
			}
		}
		if st := s.log.Stats(); mode == SyncAlways && st.Syncs-before.Syncs > 3*2 {
			t.Fatalf("3 batches took %d fsyncs", st.Syncs-before.Syncs)
		}
		s.abandonForTest()
		s = mustOpen(t, dir, nil)
		c, _ = s.Cuckoo("c")
		for i, k := range keys {
			if !c.Has(k) {
				t.Fatalf("%v: key %d lost after recovery", mode, i)
			}
		}
		if c.Items() != 3000 {
			t.Fatalf("%v: Items = %d", mode, c.Items())
		}
		s.Close()
	}
}
