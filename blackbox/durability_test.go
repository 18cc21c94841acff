package blackbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

// SyncInterval: "a process crash loses nothing"; a Close keeps every
// acknowledged change, for every kind, and reopening under SyncAlways reads
// them too.
func TestSyncIntervalCloseReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, &store.Options{Sync: store.SyncInterval, SyncEvery: time.Hour, CheckpointEvery: -1})
	b, _ := s.CreateBloom("b", store.BloomConfig{})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	n, _ := s.CreateCounting("n", store.BloomConfig{})
	m, _ := s.CreateBitmap("m", 100)
	ks := keys("si", 300)
	addToEach(t, ks, b, c, n)
	_, err := m.SetMany([]uint64{1, 2, 3})
	must(t, err)
	_, err = c.DeleteMany(ks[:10])
	must(t, err)
	// Lookups see overlay changes before sync.
	if c.Has(ks[0]) && c.Count(ks[0]) != 0 {
		t.Log("deleted key still maybe (fingerprint collision possible)")
	}
	if !c.Has(ks[20]) || !m.Get(2) {
		t.Error("SyncInterval changes not visible to lookups before the sync")
	}
	must(t, s.Close())
	s = openStore(t, dir, nil)
	defer s.Close()
	b2, _ := s.Bloom("b")
	c2, _ := s.Cuckoo("c")
	n2, _ := s.Counting("n")
	m2, _ := s.Bitmap("m")
	for i, k := range ks {
		if !b2.Has(k) || !n2.Has(k) || (i >= 10 && !c2.Has(k)) {
			t.Fatalf("lost %s over Close/reopen", k)
		}
	}
	if c2.Items() != 290 || m2.Count() != 3 || n2.Items() != 300 {
		t.Errorf("counts after reopen: cuckoo %d bitmap %d counting %d", c2.Items(), m2.Count(), n2.Items())
	}
}

// A read-only store opened beside a live writer sees the writer's later
// changes "as they happen" for changes written to the files (Options doc:
// "its lookups read the filter files as they are (the writer's later changes
// included)"). For a Bloom add the bits are set at once in the shared file.
func TestReadOnlySeesLaterBloomAdds(t *testing.T) {
	w, dir := newStore(t, nil)
	b, _ := w.CreateBloom("b", store.BloomConfig{Capacity: 1000})
	r := openStore(t, dir, &store.Options{ReadOnly: true})
	defer r.Close()
	rb, _ := r.Bloom("b")
	if rb.Has([]byte("later")) {
		t.Skip("false positive")
	}
	_, err := b.Add([]byte("later"))
	must(t, err)
	if !rb.Has([]byte("later")) {
		t.Error("read-only store does not see a Bloom add made after its Open (doc: the writer's later changes included)")
	}
	// A cuckoo add (SyncAlways: stored in the file after the fdatasync).
	c, _ := w.CreateCuckoo("c", store.CuckooConfig{})
	_ = c
	_, err = r.Cuckoo("c")
	wantIs(t, "ro sees later-created", err, store.ErrNotFound)
}

// ReadOnly Info item counts: "the numbers include those WAL records". After
// a crash-like state (writer still open, records after checkpoint), the
// read-only Info equals the writer's.
func TestReadOnlyInfoMatchesWriter(t *testing.T) {
	w, dir := newStore(t, &store.Options{CheckpointEvery: -1})
	c, _ := w.CreateCuckoo("c", store.CuckooConfig{})
	_, err := c.AddMany(keys("x", 100))
	must(t, err)
	_, err = c.Delete(keyN("x", 0))
	must(t, err)
	r := openStore(t, dir, &store.Options{ReadOnly: true})
	defer r.Close()
	ri := infoOf(t, r, "c")
	wi, _ := c.Info()
	if ri.Items != wi.Items {
		t.Errorf("read-only Items %d, writer %d", ri.Items, wi.Items)
	}
}

// Check: a clean store verifies; a flipped bit in a cuckoo layer file of a
// cleanly closed store is a *PageError wrapping ErrCorrupt, in both a writer
// and a read-only store; CheckFilter limits to one filter.
func TestCheckFindsDamage(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, nil)
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 50000})
	b, _ := s.CreateBloom("b", store.BloomConfig{})
	_, err := c.AddMany(keys("k", 20000))
	must(t, err)
	_, err = b.Add([]byte("x"))
	must(t, err)
	rep, err := s.Check()
	must(t, err)
	if rep.Filters != 2 || rep.Layers != 2 {
		t.Errorf("Check report %+v", rep)
	}
	must(t, s.Close())
	file := filepath.Join(dir, "filters", "1-0.flt")
	data, err := os.ReadFile(file)
	must(t, err)
	data[4096+77] ^= 0x10
	must(t, os.WriteFile(file, data, 0o644))
	for _, ro := range []bool{true, false} {
		x := openStore(t, dir, &store.Options{ReadOnly: ro})
		rep, err := x.Check()
		var pe *store.PageError
		if !errors.As(err, &pe) || !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("ReadOnly=%v: Check err %v, want *PageError", ro, err)
		} else if pe.Filter != "c" || pe.Page != 0 || pe.Offset != 4096 || pe.File != "filters/1-0.flt" || pe.Stored == pe.Computed {
			t.Errorf("PageError %+v", pe)
		}
		if rep == nil || len(rep.Problems) != 1 {
			t.Errorf("ReadOnly=%v: report %+v", ro, rep)
		}
		rep, err = x.CheckFilter("b")
		if err != nil || rep.Filters != 1 {
			t.Errorf("CheckFilter(b) = %+v, %v", rep, err)
		}
		_, err = x.CheckFilter("c")
		wantIs(t, "CheckFilter(c)", err, store.ErrCorrupt)
		x.Close()
	}
}

// "catalog.db missing ... Open fails with ErrCorrupt" (README fault table;
// store doc: "A missing, empty, damaged ... catalog ...: Open fails with
// ErrCorrupt and leaves every file as it was").
func TestMissingCatalogIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, nil)
	b, _ := s.CreateBloom("b", store.BloomConfig{})
	_, err := b.Add([]byte("x"))
	must(t, err)
	must(t, s.Close())
	must(t, os.Remove(filepath.Join(dir, "catalog.db")))
	for _, ro := range []bool{false, true} {
		x, err := store.Open(dir, &store.Options{ReadOnly: ro})
		if err == nil {
			x.Close()
			t.Errorf("ReadOnly=%v: Open without catalog succeeded", ro)
			continue
		}
		if !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("ReadOnly=%v: Open without catalog.db: %v, want ErrCorrupt", ro, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "catalog.db")); err == nil {
		t.Error("Open created a catalog in a directory holding filter files")
	}
	// Empty catalog.
	must(t, os.WriteFile(filepath.Join(dir, "catalog.db"), nil, 0o644))
	_, err = store.Open(dir, nil)
	wantIs(t, "Open with empty catalog", err, store.ErrCorrupt)
}

// A layer file missing: "the filter opens broken. Its lookups answer
// "maybe", its mutations and Info return an error wrapping ErrCorrupt that
// names the file, List shows it with State "broken" and the reason, and Drop
// removes it; every other filter works."
func TestBrokenFilter(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, nil)
	b, _ := s.CreateBloom("b", store.BloomConfig{})
	o, _ := s.CreateCuckoo("o", store.CuckooConfig{})
	_, err := b.Add([]byte("x"))
	must(t, err)
	must(t, o.Add([]byte("y")))
	must(t, s.Close())
	must(t, os.Rename(filepath.Join(dir, "filters", "1-0.flt"), filepath.Join(dir, "moved.flt")))
	s = openStore(t, dir, nil)
	defer s.Close()
	b2, err := s.Bloom("b")
	if err != nil {
		t.Fatalf("Bloom(broken): %v", err)
	}
	if !b2.Has([]byte("never")) {
		t.Error("broken filter must answer maybe")
	}
	_, err = b2.Add([]byte("z"))
	wantIs(t, "Add to broken", err, store.ErrCorrupt)
	in, err := b2.Info()
	wantIs(t, "Info of broken", err, store.ErrCorrupt)
	if in.State != "broken" || in.Reason == "" {
		t.Errorf("broken Info state %q reason %q", in.State, in.Reason)
	}
	if err != nil && !contains(err.Error(), "1-0.flt") {
		t.Errorf("error does not name the file: %v", err)
	}
	l, err := s.List()
	if err != nil {
		t.Logf("List with a broken filter: %v", err)
	}
	if len(l) != 2 || l[0].State != "broken" || l[1].State != "ok" {
		t.Errorf("List = %+v", l)
	}
	o2, _ := s.Cuckoo("o")
	if !o2.Has([]byte("y")) {
		t.Error("other filter broken too")
	}
	must(t, o2.Add([]byte("w")))
	if err := s.Drop("b"); err != nil {
		t.Errorf("Drop broken: %v", err)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s == sub || indexStr(s, sub) >= 0))
}

func indexStr(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// Stats: WAL records "one per change, AddMany chunk or Batch"; Syncs one per
// group commit under SyncAlways; CheckpointLSN moves at Checkpoint; WALSize
// comes down after a checkpoint.
func TestStatsCounters(t *testing.T) {
	s, _ := newStore(t, &store.Options{CheckpointEvery: -1})
	b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 100000})
	_, err := b.Add([]byte("first"))
	must(t, err)
	st0 := s.Stats()
	_, err = b.AddMany(keys("s", 1000))
	must(t, err)
	st1 := s.Stats()
	if st1.WAL.Records-st0.WAL.Records != 1 {
		t.Errorf("AddMany took %d records, want 1", st1.WAL.Records-st0.WAL.Records)
	}
	if st1.WAL.Syncs-st0.WAL.Syncs != 1 {
		t.Errorf("AddMany took %d syncs, want 1", st1.WAL.Syncs-st0.WAL.Syncs)
	}
	// A call that changes nothing: no record.
	_, err = b.Add([]byte("first"))
	must(t, err)
	if s.Stats().WAL.Records != st1.WAL.Records {
		t.Error("a no-op Add logged a record")
	}
	must(t, s.Checkpoint())
	st2 := s.Stats()
	if st2.CheckpointLSN < st1.WAL.Records {
		t.Logf("CheckpointLSN %d after %d records", st2.CheckpointLSN, st1.WAL.Records)
	}
	if st2.CheckpointLSN == st0.CheckpointLSN {
		t.Error("Checkpoint did not move CheckpointLSN")
	}
	t.Logf("WALSize before %d after checkpoint %d", st1.WALSize, st2.WALSize)
}
