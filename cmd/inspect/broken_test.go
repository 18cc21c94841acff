package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/store"
	"github.com/filterstore/filterstore/wal"
)

// TestBrokenFilter deletes one layer file (an 8 KiB bitmap) of a store of
// ten filters of every kind. ls must list that filter as broken, with the
// reason naming the file, and the nine others as usual; info prints the
// reason, verify reports the file, check answers maybe; each exits 1, the
// data being corrupt.
func TestBrokenFilter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ten")
	s, err := store.Open(dir, &store.Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	items := map[string]uint64{}
	add := func(name string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		items[name]++
	}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("bloom%d", i)
		b, err := s.CreateBloom(name, store.BloomConfig{Capacity: 100})
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 10*(i+1); k++ {
			_, err := b.Add([]byte(fmt.Sprint(name, k)))
			add(name, err)
		}
	}
	for i := 0; i < 2; i++ {
		name := fmt.Sprintf("cuckoo%d", i)
		c, err := s.CreateCuckoo(name, store.CuckooConfig{Capacity: 100})
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 5*(i+1); k++ {
			add(name, c.Add([]byte(fmt.Sprint(name, k))))
		}
		n, err := s.CreateCounting("counting"+fmt.Sprint(i), store.BloomConfig{Capacity: 100})
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 7*(i+1); k++ {
			add("counting"+fmt.Sprint(i), n.Add([]byte(fmt.Sprint(name, k))))
		}
	}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("bitmap%d", i)
		m, err := s.CreateBitmap(name, 10000)
		if err != nil {
			t.Fatal(err)
		}
		for off := uint64(0); off < uint64(3*(i+1)); off++ {
			_, err := m.Set(off * 11)
			add(name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(items) != 10 {
		t.Fatalf("%d filters", len(items))
	}
	path := layerFile(t, dir, "bitmap1", 0)
	if st, err := os.Stat(path); err != nil || st.Size() != 3*mmapbits.PageSize { // header, data, checksum page
		t.Fatalf("bitmap1's layer file: %v, %v", st, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	rel := relPath(dir, path) // filters/<id>-0.flt

	r := mustRun(t, 1, "ls", dir)
	rows := map[string]string{}
	_, rest, _ := strings.Cut(r.stdout, "\n\n") // past the checkpoint line
	table, reasons, _ := strings.Cut(rest, "\n\n")
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 0 && items[f[0]] > 0 {
			rows[f[0]] = line
		}
	}
	for name, n := range items {
		row := rows[name]
		switch {
		case row == "":
			t.Errorf("ls: no row for %s:\n%s", name, r)
		case name == "bitmap1" && !strings.HasSuffix(row, "  broken"):
			t.Errorf("ls: %s should be broken: %q", name, row)
		case name != "bitmap1" && (!strings.HasSuffix(row, "  ok") || strings.Fields(row)[2] != fmt.Sprint(n)):
			t.Errorf("ls: %s should be ok with %d items: %q", name, n, row)
		}
	}
	if !strings.Contains(reasons, `filter "bitmap1" is broken`) || !strings.Contains(reasons, rel) || !strings.Contains(r.stderr, rel) {
		t.Errorf("ls should give the reason, naming %s:\n%s", rel, r)
	}

	var ls lsOut
	decode(t, mustRun(t, 1, "ls", "--json", dir).stdout, &ls)
	if len(ls.Filters) != 10 {
		t.Errorf("ls --json: %d filters", len(ls.Filters))
	}
	for _, f := range ls.Filters {
		broken := f.Name == "bitmap1"
		if (f.State == "broken") != broken || strings.Contains(f.Reason, rel) != broken || (!broken && f.Items != items[f.Name]) {
			t.Errorf("ls --json: %+v", f)
		}
	}

	r = mustRun(t, 1, "info", dir, "bitmap1")
	if !strings.Contains(r.stdout, "state           broken\n") || !strings.Contains(r.stdout, "reason ") || !strings.Contains(r.stderr, rel) {
		t.Errorf("info:\n%s", r)
	}
	r = mustRun(t, 1, "verify", dir)
	if !strings.Contains(r.stdout, "problem  "+rel+": ") || strings.Count(r.stdout, "problem  ") != 1 {
		t.Errorf("verify should report %s, and only it:\n%s", rel, r)
	}
	r = mustRun(t, 1, "check", dir, "bitmap1", "11", "12")
	if !strings.Contains(r.stdout, "11  maybe") || !strings.Contains(r.stdout, "12  maybe") || !strings.Contains(r.stderr, "broken") {
		t.Errorf("check of the broken filter:\n%s", r)
	}
	r = mustRun(t, 0, "check", dir, "bitmap2", "11", "12")
	if !strings.Contains(r.stdout, "11  yes") || !strings.Contains(r.stdout, "12  no") {
		t.Errorf("check of another filter:\n%s", r)
	}
}

// TestBrokenKeepsWAL: a filter that opens broken keeps the checkpoint its
// files reflect (SyncedLSN) while the store's moves on, and the WAL keeps
// its records after it. Those records are pending for it, and only for
// it: in ls, info and wal.
func TestBrokenKeepsWAL(t *testing.T) {
	live := filepath.Join(t.TempDir(), "live")
	s, err := store.Open(live, &store.Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.CreateBloom("a", store.BloomConfig{Capacity: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateBloom("b", store.BloomConfig{Capacity: 100}); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // after the checkpoint: a needs them replayed
		if _, err := a.Add([]byte(fmt.Sprint("a", i))); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "crashed")
	if err := copyDir(live, dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(layerFile(t, dir, "a", 0)); err != nil {
		t.Fatal(err)
	}
	// A writer recovers the crashed copy: a opens broken, b works and
	// checkpoints past a's records, which the WAL keeps for a.
	w, err := store.Open(dir, &store.Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	if wb, err := w.Bloom("b"); err != nil {
		t.Fatal(err)
	} else if _, err := wb.Add([]byte("b0")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cat, err := readCatalogGuarded(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := findFilter(dir, cat, "a"); f.SyncedLSN >= cat.CheckpointLSN {
		t.Fatalf("a synced at %d, the store's checkpoint is %d: want older", f.SyncedLSN, cat.CheckpointLSN)
	}

	var ls lsOut
	decode(t, mustRun(t, 1, "ls", "--json", dir).stdout, &ls)
	if len(ls.Filters) != 2 || ls.Filters[0].State != "broken" || ls.Filters[0].Pending != 3 ||
		ls.Filters[1].State != "ok" || ls.Filters[1].Pending != 0 || ls.Filters[1].Items != 1 {
		t.Errorf("ls --json: %+v", ls)
	}
	var in infoOut
	decode(t, mustRun(t, 1, "info", "--json", dir, "a").stdout, &in)
	if in.State != "broken" || in.Pending.Records != 3 || in.CheckpointLSN >= cat.CheckpointLSN || in.Reason == "" {
		t.Errorf("info --json: %+v", in)
	}
	var wl walOut
	decode(t, mustRun(t, 0, "wal", "--json", dir).stdout, &wl)
	if wl.Pending != 3 || len(wl.Filters) != 2 || wl.Filters[0].AfterCheckpoint != 3 || wl.Filters[1].AfterCheckpoint != 0 {
		t.Errorf("wal --json: %+v", wl)
	}
}

// rewriteHeader re-encodes the header of a layer file after edit, keeping
// its data, its move-sequence word and its checkpoint stamp.
func rewriteHeader(t *testing.T, path string, edit func(h *mmapbits.Header)) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := mmapbits.DecodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	edit(&h)
	seq := binary.LittleEndian.Uint64(b[mmapbits.SeqOffset:])
	stamp := binary.LittleEndian.Uint64(b[mmapbits.StampOffset:])
	copy(b, h.Append(nil))
	binary.LittleEndian.PutUint64(b[mmapbits.SeqOffset:], seq)
	binary.LittleEndian.PutUint64(b[mmapbits.StampOffset:], stamp)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHeaderStoreID: verify checks a version 2 header's store id against
// the catalog's (a mismatch is a problem naming the file and the field's
// offset), notes a version 1 header's lack of one, and does not take the
// live move-sequence word for a reserved byte.
func TestHeaderStoreID(t *testing.T) {
	storeIDAt := -1
	for _, f := range mmapbits.HeaderFields(mmapbits.FormatVersion) {
		if f.Name == "StoreID" {
			storeIDAt = f.Offset
		}
	}

	// A file of another store.
	dir := testStore(t)
	p := layerFile(t, dir, "seen", 0)
	rewriteHeader(t, p, func(h *mmapbits.Header) { h.StoreID ^= 0x5a5a })
	r := mustRun(t, 1, "verify", dir, "seen")
	if !strings.Contains(r.stdout, fmt.Sprintf("problem  filters/2-0.flt offset %d: header field store id: file has ", storeIDAt)) {
		t.Errorf("foreign store id:\n%s", r)
	}
	r = mustRun(t, 1, "ls", dir)
	if !strings.Contains(r.stdout, "broken") || !strings.Contains(r.stderr, "filters/2-0.flt") {
		t.Errorf("ls of a foreign file:\n%s", r)
	}

	// A live move-sequence word, and a version 1 header (re-encoded with
	// the version 1 layout from mmapbits' own field table). The bitmap's:
	// a Bloom or counting layer this build made has the mul derivation,
	// which a version 1 file cannot say (TestOldHeaderDerivation).
	dir = testStore(t)
	p = layerFile(t, dir, "flags", 0)
	b := rewriteHeader(t, p, func(*mmapbits.Header) {})
	binary.LittleEndian.PutUint64(b[mmapbits.SeqOffset:], 12345)
	v1 := mmapbits.HeaderFields(1)
	crcField := v1[len(v1)-1]
	clear(b[crcField.Offset:mmapbits.SeqOffset])
	binary.LittleEndian.PutUint32(b[v1[1].Offset:], 1) // Version
	binary.LittleEndian.PutUint32(b[crcField.Offset:], crc.Checksum(b[:crcField.Offset]))
	// Version 1 has no checksum pages.
	h, _, err := mmapbits.DecodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	b = b[:h.FileSize()]
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, 0, "verify", dir)
	if !strings.Contains(r.stdout, "note     filters/4-0.flt: format version 1 header") || strings.Contains(r.stdout, "reserved") ||
		!strings.Contains(r.stdout, "note     data of 1 layer file not verified: format versions 1 and 2 keep no data checksums") {
		t.Errorf("version 1 header with a live seq word:\n%s", r)
	}
	r = mustRun(t, 0, "file", p)
	if !strings.Contains(r.stdout, "version 1, CRC-32C ok") || !strings.Contains(r.stdout, "move seq    12345") {
		t.Errorf("file of a version 1 header:\n%s", r)
	}
}

// TestHeaderErrorRate: file reports a Bloom or counting layer whose
// header, CRC valid, holds an error rate outside (0, 1), NaN included, as
// a problem at the field's offset (before, it left the line out and said
// "invariants ok").
func TestHeaderErrorRate(t *testing.T) {
	at := fieldOffset("ErrorRate")
	for _, rate := range []float64{math.NaN(), 0, -1, 1, 1.5, math.Inf(1)} {
		for _, name := range []string{"users", "hits"} {
			dir := testStore(t)
			p := layerFile(t, dir, name, 0)
			rewriteHeader(t, p, func(h *mmapbits.Header) { h.ErrorRate = rate })
			r := mustRun(t, 1, "file", p)
			if want := fmt.Sprintf("offset %d: the header's error rate %g is outside (0, 1)", at, rate); !strings.Contains(r.stdout, want) {
				t.Errorf("%s with error rate %g: want %q in\n%s", name, rate, want, r)
			}
			// -json too (before, NaN and infinities failed to encode:
			// exit 2 and no findings).
			r = mustRun(t, 1, "file", "--json", p)
			if !strings.Contains(r.stdout, "is outside (0, 1)") || !strings.Contains(r.stdout, `"error_rate"`) {
				t.Errorf("%s with error rate %g, --json: want the finding and the field in\n%s", name, rate, r)
			}
		}
	}
}

// TestDamagedLayoutExitsOneEverywhere: a store whose layout is damaged (a
// layer file that is a symlink loop, the filters directory a regular
// file or missing) is corrupt data, exit status 1, from every command
// that reads the filter, as the store's Open finds the filter broken.
// (stats exited 2 for the symlink loop and verify for the filters file,
// where ls, info and check exited 1; an adversarial review found it.)
func TestDamagedLayoutExitsOneEverywhere(t *testing.T) {
	damages := map[string]func(t *testing.T, dir string){
		"a layer file that is a symlink loop": func(t *testing.T, dir string) {
			p := layerFile(t, dir, "users", 0)
			must(t, os.Remove(p))
			must(t, os.Symlink(filepath.Base(p), p))
		},
		"the filters directory a regular file": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "filters")
			must(t, os.RemoveAll(p))
			must(t, os.WriteFile(p, []byte("not a directory"), 0o644))
		},
		"the filters directory missing": func(t *testing.T, dir string) {
			must(t, os.RemoveAll(filepath.Join(dir, "filters")))
		},
	}
	for what, damage := range damages {
		dir := testStore(t)
		damage(t, dir)
		for _, args := range [][]string{
			{"ls", dir},
			{"info", dir, "users"},
			{"check", dir, "users", "user-001"},
			{"verify", dir},
			{"stats", dir, "users"},
		} {
			r := runCLI(args...)
			checkClean(t, args, r)
			if r.code != exitProblems {
				t.Errorf("%s: %s: exit %d, want %d (corrupt):\n%s", what, strings.Join(args[:1], " "), r.code, exitProblems, r)
			}
		}
	}
}

// TestNewerThanWALBrokenEverywhere: a crashed store (a copy of one open
// and idle) whose WAL then lost its last records, while the layer files
// hold the changes they made: the writer's Open opens the bitmap broken
// (its file is newer than the WAL), and so do ls, info and check, each
// with exit status 1 and check answering maybe. Before, they read the
// WAL's older after-images over the file's newer words, said "needs
// recovery" with exit 0, and check answered "no" for acknowledged
// offsets (an adversarial review).
func TestNewerThanWALBrokenEverywhere(t *testing.T) {
	live := filepath.Join(t.TempDir(), "live")
	s, err := store.Open(live, nil)
	must(t, err)
	defer s.Close()
	m, err := s.CreateBitmap("flags", 100_000)
	must(t, err)
	const before, after = 100, 300
	for i := range before + after {
		if i == before {
			must(t, s.Checkpoint())
		}
		_, err := m.Set(uint64(7 * i))
		must(t, err)
	}
	dir := filepath.Join(t.TempDir(), "crashed")
	must(t, copyDir(live, dir))
	walDir := filepath.Join(dir, "wal")
	var recs []wal.Position
	_, err = wal.Scan(walDir, wal.ScanOptions{}, func(pos wal.Position, _ []byte) error {
		recs = append(recs, pos)
		return nil
	})
	must(t, err)
	cut := recs[len(recs)-after/2]
	must(t, os.Truncate(filepath.Join(walDir, cut.Segment), cut.Offset))
	last := fmt.Sprint(7 * (before + after - 1)) // set by a record the WAL lost
	for _, args := range [][]string{
		{"ls", dir},
		{"info", dir, "flags"},
		{"check", dir, "flags", "0", last},
	} {
		r := runCLI(args...)
		checkClean(t, args, r)
		if r.code != exitProblems || !strings.Contains(r.stdout+r.stderr, "newer than the WAL") {
			t.Errorf("%s: exit %d, want %d naming the file newer than the WAL:\n%s", args[0], r.code, exitProblems, r)
		}
		if args[0] == "check" && (strings.Contains(r.stdout, " no") || !strings.Contains(r.stdout, "maybe")) {
			t.Errorf("check of a broken filter: want every answer maybe:\n%s", r)
		}
	}
}
