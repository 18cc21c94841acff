package blackbox2_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// TestInspectOddDirectories checks inspect's "Exit status: ... 2 usage error,
// or something could not be read (missing directory, not a store ...)" for
// an empty directory, a regular file and a missing path, under every command
// that takes DIR.
func TestInspectOddDirectories(t *testing.T) {
	tmp := t.TempDir()
	empty := filepath.Join(tmp, "empty")
	os.Mkdir(empty, 0o755)
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, []byte("hi\n"), 0o644)
	missing := filepath.Join(tmp, "missing")
	for _, d := range []string{empty, file, missing} {
		for _, args := range [][]string{{"ls", d}, {"verify", d}, {"wal", d}, {"info", d, "x"}, {"check", d, "x", "k"}, {"stats", d, "x"}} {
			r := inspect(t, args...)
			if r.code != 2 || r.err == "" || r.out != "" {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 with a message", args, r.code, r.out, r.err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(empty, "catalog.db")); err == nil {
		t.Error("inspect wrote into an empty directory")
	}
}

// TestInspectFileOddInputs checks inspect file's "A file that is not a filter
// file at all (empty, text, another format such as a bbolt catalog, shorter
// than the 4096-byte header page, or no file at all: a directory, a FIFO, a
// device) is reported in one line with exit status 2" and "A file that fails
// any check is reported with its offset, and the exit status is 1".
func TestInspectFileOddInputs(t *testing.T) {
	dir := fixture(t)
	tmp := t.TempDir()
	w := func(name string, b []byte) string {
		p := filepath.Join(tmp, name)
		must(t, os.WriteFile(p, b, 0o644))
		return p
	}
	fifo := filepath.Join(tmp, "fifo")
	must(t, syscall.Mkfifo(fifo, 0o644))
	flt, err := os.ReadFile(filepath.Join(dir, "filters", "1-0.flt"))
	must(t, err)
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.log"))
	for _, p := range append([]string{tmp, fifo, "/dev/null", w("empty", nil), w("text", []byte("hello\n")), w("short.flt", flt[:4000]),
		filepath.Join(dir, "catalog.db"), filepath.Join(tmp, "missing.flt")}, segs...) {
		r := inspect(t, "file", p)
		if r.code != 2 || strings.Count(strings.TrimSpace(r.err), "\n") != 0 || r.err == "" {
			t.Errorf("file %s: exit %d, stderr %q", p, r.code, r.err)
		}
	}
	trunc := w("trunc.flt", flt[:len(flt)-4096])
	if r := inspect(t, "file", trunc); r.code != 1 || !strings.Contains(r.err, "offset") {
		t.Errorf("truncated: exit %d %q", r.code, r.err)
	}
	crc := append([]byte(nil), flt...)
	crc[20] ^= 7
	if r := inspect(t, "file", w("crc.flt", crc)); r.code != 1 || !strings.Contains(r.err, "offset 92") {
		t.Errorf("header CRC: exit %d %q", r.code, r.err)
	}
	res := append([]byte(nil), flt...)
	res[500] = 1
	r := inspect(t, "file", "--json", w("res.flt", res))
	var out struct {
		Findings []struct {
			Severity string
			Offset   int64
		}
	}
	if r.code != 1 || json.Unmarshal([]byte(r.out), &out) != nil || len(out.Findings) != 1 || out.Findings[0].Offset != 500 || out.Findings[0].Severity != "problem" {
		t.Errorf("reserved byte: exit %d, %s", r.code, r.out)
	}
	seq := append([]byte(nil), flt...)
	seq[2048] = 9
	if r := inspect(t, "file", w("seq.flt", seq)); r.code != 0 {
		t.Errorf("seq word (live state) made file fail: %d %s", r.code, r.err)
	}
	if r := inspect(t, "file", filepath.Join(dir, "filters", "1-0.flt")); r.code != 0 || !strings.Contains(r.out, "version 6") {
		t.Errorf("good file: %d %s", r.code, r.out)
	}
}

// TestInspectFileJSONOnHeaderFailure checks "Every command takes --json for
// scripts" for inspect file on a file whose header CRC fails: a script gets
// JSON (as it does for a reserved-byte problem, listed in "findings"). It
// gets nothing on stdout, only a text line on stderr.
func TestInspectFileJSONOnHeaderFailure(t *testing.T) {
	dir := fixture(t)
	flt, _ := os.ReadFile(filepath.Join(dir, "filters", "1-0.flt"))
	flt[20] ^= 7
	p := filepath.Join(t.TempDir(), "crc.flt")
	os.WriteFile(p, flt, 0o644)
	r := inspect(t, "file", "--json", p)
	var v map[string]any
	if err := json.Unmarshal([]byte(r.out), &v); err != nil {
		t.Errorf("file --json on a CRC failure: exit %d, stdout %q (not JSON), stderr %q", r.code, r.out, r.err)
	}
}

// TestInspectCheckInputs checks check's key sources and forms: "--keys FILE
// (one key per line, "-" for stdin; empty lines are skipped)", "--hex" (bad
// hex is a usage error), a bitmap's "decimal bit offsets" (answers yes/no;
// a non-number is a usage error), "Put "--" before keys that start with
// "-"", and JSON's "key_hex" for keys that are not valid UTF-8.
func TestInspectCheckInputs(t *testing.T) {
	dir := fixture(t)
	r := run(t, "inspect", []byte("k-1\n\nnope\n"), "check", "--keys", "-", dir, "n")
	if r.code != 0 || !strings.Contains(r.out, "k-1") || !strings.Contains(r.out, "nope") || strings.Count(r.out, "\n") != 3 {
		t.Errorf("--keys -: %d %q %q", r.code, r.out, r.err)
	}
	if r := inspect(t, "check", "--hex", dir, "b", "6b2d31", "zz"); r.code != 2 {
		t.Errorf("bad hex: exit %d", r.code)
	}
	r = inspect(t, "check", "--hex", "--json", dir, "b", "6b2d31")
	if r.code != 0 || !strings.Contains(r.out, `"maybe"`) {
		t.Errorf("--hex 6b2d31 (k-1): %s", r.out)
	}
	if r := inspect(t, "check", dir, "m", "3", "abc"); r.code != 2 {
		t.Errorf("bitmap non-number: exit %d", r.code)
	}
	r = inspect(t, "check", "--json", dir, "m", "3", "4", "99999999")
	var out struct {
		State   string
		Answers []struct{ Key, Answer string }
	}
	if r.code != 0 || json.Unmarshal([]byte(r.out), &out) != nil || len(out.Answers) != 3 || out.Answers[0].Answer != "yes" || out.Answers[1].Answer != "no" || out.Answers[2].Answer != "no" || out.State != "ok" {
		t.Errorf("bitmap check: %d %s %s", r.code, r.out, r.err)
	}
	r = inspect(t, "check", dir, "b", "--", "-dash")
	if r.code != 0 || !strings.Contains(r.out, "-dash") {
		t.Errorf("-- key: %d %q %q", r.code, r.out, r.err)
	}
	r = inspect(t, "check", "--json", dir, "b", "a\xffb")
	if !strings.Contains(r.out, `"key_hex": "61ff62"`) {
		t.Errorf("non-UTF-8 key: %s", r.out)
	}
	r = inspect(t, "check", "--json", dir, "c", "k-1", "zz-none")
	var cu struct {
		Answers []struct {
			Answer string
			Count  *uint64
		}
	}
	if json.Unmarshal([]byte(r.out), &cu) != nil || len(cu.Answers) != 2 || cu.Answers[0].Count == nil || *cu.Answers[0].Count != 1 || cu.Answers[1].Answer != "no" {
		t.Errorf("cuckoo counts: %s", r.out)
	}
	if r := inspect(t, "check", dir, "b"); r.code != 2 {
		t.Errorf("no keys: exit %d", r.code)
	}
	if r := inspect(t, "check", dir, "nosuch", "k"); r.code != 2 {
		t.Errorf("unknown filter: exit %d", r.code)
	}
}

// TestInspectDuringLoad checks the "incomplete" state of ls/check/verify/wal
// on a store whose bulk Load is running: "incomplete  a bulk Load is
// running", check's "An incomplete filter ... answers "maybe" for every key",
// verify's "Notes are not problems: ... incomplete filters", and wal --dump's
// "op=load ... pending".
func TestInspectDuringLoad(t *testing.T) {
	dir := fixture(t)
	s, err := store.Open(dir, nil)
	must(t, err)
	defer s.Close()
	b, err := s.CreateBloom("L", store.BloomConfig{Capacity: 100000})
	must(t, err)
	started, release, done := make(chan bool), make(chan bool), make(chan error)
	go func() {
		done <- b.Load(func(yield func([]byte, error) bool) {
			for i := range 10000 {
				if i == 5000 {
					close(started)
					<-release
				}
				if !yield(keyN("L", i), nil) {
					return
				}
			}
		})
	}()
	<-started
	r := inspect(t, "ls", "--json", dir)
	if r.code != 0 || !strings.Contains(r.out, `"incomplete"`) {
		t.Errorf("ls: %d %s", r.code, r.out)
	}
	r = inspect(t, "check", dir, "L", "L-1", "never-added")
	if r.code != 0 || strings.Count(r.out, "maybe") != 2 {
		t.Errorf("check: %d %q", r.code, r.out)
	}
	r = inspect(t, "verify", dir)
	if r.code != 0 || !strings.Contains(r.out, "incomplete") {
		t.Errorf("verify: %d %q %q", r.code, r.out, r.err)
	}
	r = inspect(t, "wal", "--dump", dir)
	if r.code != 0 || !strings.Contains(r.out, "op=load pending") {
		t.Errorf("wal --dump: %d %q", r.code, r.out)
	}
	close(release)
	must(t, <-done)
	r = inspect(t, "check", dir, "L", "never-added")
	if strings.Contains(r.out, "maybe") {
		t.Errorf("after the Load: %q", r.out)
	}
}

// TestInspectWALDumpJSON checks "With --json --dump, one JSON object per
// line" with the fields of the text form (lsn, op, pending), on a store left
// with records after its checkpoint.
func TestInspectWALDumpJSON(t *testing.T) {
	dir := fixture(t)
	s, err := store.Open(dir, nil)
	must(t, err)
	b, _ := s.Bloom("b")
	c, _ := s.Cuckoo("c")
	b.Add([]byte("p1"))
	c.Add([]byte("p2"))
	r := inspect(t, "wal", "--dump", "--json", dir)
	s.Close()
	sc := bufio.NewScanner(strings.NewReader(r.out))
	n := 0
	for sc.Scan() {
		var v struct {
			LSN     uint64 `json:"lsn"`
			Op      string `json:"op"`
			Filter  string `json:"filter"`
			Pending bool   `json:"pending"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if v.LSN == 0 || v.Op == "" || !v.Pending {
			t.Errorf("record %s", sc.Text())
		}
		n++
	}
	if r.code != 0 || n != 2 {
		t.Errorf("exit %d, %d lines: %s", r.code, n, r.out)
	}
}

// TestInspectVersion checks version's "the range of each on-disk format
// version it reads: filter file headers, WAL segment headers, the catalog,
// and its values", against the packages' own constants.
func TestInspectVersion(t *testing.T) {
	r := inspect(t, "version", "--json")
	var v struct {
		Module string
		Go     string
		Filter struct{ Oldest, Newest int } `json:"filter_header_format"`
		WAL    struct{ Oldest, Newest int } `json:"wal_segment_format"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.out), &v) != nil {
		t.Fatalf("%d %q", r.code, r.out)
	}
	if v.Module != "github.com/filterstore/filterstore" || v.Filter.Oldest != 1 || v.Filter.Newest != 6 || v.WAL.Oldest != 1 || v.WAL.Newest != 2 {
		t.Errorf("version: %+v", v)
	}
}

// TestInspectStatsPNGRefusals checks stats --png: "FILE must be a regular file
// or a new name, and must not lie inside the store directory (through a
// symlink either): inspect refuses it with exit status 2 and writes
// nothing", and the flag's "not a file inside DIR or another store, nor a
// directory, device or FIFO".
func TestInspectStatsPNGRefusals(t *testing.T) {
	dir := fixture(t)
	other := fixture(t)
	tmp := t.TempDir()
	link := filepath.Join(tmp, "link")
	os.Symlink(dir, link)
	fileLink := filepath.Join(tmp, "cat.png")
	os.Symlink(filepath.Join(dir, "catalog.db"), fileLink)
	before, _ := os.ReadFile(filepath.Join(dir, "catalog.db"))
	for _, p := range []string{tmp, "/dev/null", filepath.Join(dir, "x.png"), filepath.Join(link, "x.png"), filepath.Join(other, "filters", "x.png"), fileLink} {
		r := inspect(t, "stats", dir, "n", "--png", p)
		if r.code != 2 {
			t.Errorf("--png %s: exit %d %q", p, r.code, r.err)
		}
	}
	after, _ := os.ReadFile(filepath.Join(dir, "catalog.db"))
	if string(before) != string(after) {
		t.Error("catalog changed")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.png*")); len(m) != 0 {
		t.Errorf("files written into the store: %v", m)
	}
	good := filepath.Join(tmp, "ok.png")
	os.WriteFile(good, []byte("old"), 0o644)
	if r := inspect(t, "stats", dir, "n", "--png", good); r.code != 0 {
		t.Errorf("good png: %d %s", r.code, r.err)
	}
	if b, _ := os.ReadFile(good); len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Error("png not written")
	}
}

// TestInspectDamagedCatalog checks "1 the data is corrupt" for a catalog.db
// that is empty, garbage or a directory, for ls, verify and wal: never 0, and
// the cause named.
func TestInspectDamagedCatalog(t *testing.T) {
	for name, damage := range map[string]func(string){
		"empty":   func(p string) { os.WriteFile(p, nil, 0o644) },
		"garbage": func(p string) { os.WriteFile(p, []byte(strings.Repeat("garbage!", 1000)), 0o644) },
		"dir":     func(p string) { os.Remove(p); os.Mkdir(p, 0o755) },
	} {
		dir := fixture(t)
		damage(filepath.Join(dir, "catalog.db"))
		for _, c := range []string{"ls", "verify", "wal"} {
			r := inspect(t, c, dir)
			if r.code != 1 || !strings.Contains(r.err, "catalog") {
				t.Errorf("%s catalog, %s: exit %d %q", name, c, r.code, r.err)
			}
		}
	}
}

// TestInspectWALDirIsAFile checks that a store whose wal/ is a regular file
// fails every command (non-zero, the cause named), and that a writer's
// store.Open names the cause rather than a permission problem: running as
// the owner (root here), the writer Open reports "cannot be written (or
// read) by this process ... access /…/wal: permission denied" for a wal
// path that is a regular file, where inspect says "not a directory".
func TestInspectWALDirIsAFile(t *testing.T) {
	dir := fixture(t)
	wd := filepath.Join(dir, "wal")
	os.RemoveAll(wd)
	os.WriteFile(wd, []byte("x"), 0o644)
	for _, c := range []string{"ls", "verify", "wal"} {
		r := inspect(t, c, dir)
		if r.code == 0 || !strings.Contains(r.err, "not a directory") {
			t.Errorf("%s: exit %d %q", c, r.code, r.err)
		}
	}
	_, err := store.Open(dir, nil)
	if err == nil || strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("store.Open with wal/ a regular file: %v", err)
	}
}

// TestDemoFlagValidation checks demo's flag ranges from -h: "-error ... in
// (0, 1)", "-durable ... 0 skips them", "-pending ... needs -dir and -keep",
// and a usage error for a stray argument.
func TestDemoFlagValidation(t *testing.T) {
	for _, a := range [][]string{{"-error", "0"}, {"-error", "1"}, {"-error", "NaN"}, {"-keys", "0"}, {"-keys", "-5"}, {"-durable", "-1"},
		{"-pending", "5", "-keys", "10"}, {"-pending", "-1", "-keys", "10"}, {"-dir", "/dev/null", "-keys", "10", "-durable", "0", "-absent", "10"}} {
		r := run(t, "demo", nil, a...)
		if r.code == 0 || r.err == "" {
			t.Errorf("demo %v: exit %d %q", a, r.code, r.err)
		}
	}
	if r := run(t, "demo", nil, "stray"); r.code != 2 {
		t.Errorf("stray argument: exit %d", r.code)
	}
	r := run(t, "demo", nil, "-keys", "2000", "-durable", "10", "-absent", "100")
	if r.code != 0 || !strings.Contains(r.out, "no false negative") || !strings.Contains(r.out, "measured FPR") {
		t.Errorf("small demo: %d %q %q", r.code, r.out, r.err)
	}
}

// TestDemoPending checks demo's "-pending int: after the report, add this
// many keys with one durable AddMany and exit without closing the store, as
// a crashed writer would: the WAL then holds one batch record of the keys
// that were new (try cmd/inspect on it: its PENDING column counts them)"
// and "The filter is sized for -keys plus -durable, so room is left only
// by the adds that were false positives (about 1 in 100 at the default
// rate): more pending keys than that fail with ErrFull". At -keys 100000
// about a thousand adds are false positives: 50 pending keys fit, 5000 do
// not.
func TestDemoPending(t *testing.T) {
	full := filepath.Join(t.TempDir(), "full")
	r := run(t, "demo", nil, "-keys", "100000", "-durable", "0", "-absent", "10", "-pending", "5000", "-dir", full, "-keep")
	if r.code == 0 || !strings.Contains(r.err, "filter is full") {
		t.Errorf("demo -pending 5000 past the room: exit %d, stderr %q; want the filter full", r.code, r.err)
	}
	dir := filepath.Join(t.TempDir(), "d")
	r = run(t, "demo", nil, "-keys", "100000", "-durable", "0", "-absent", "10", "-pending", "50", "-dir", dir, "-keep")
	if r.code != 0 {
		t.Fatalf("demo -pending 50: exit %d, stderr %q", r.code, r.err)
	}
	if r := inspect(t, "ls", dir); !strings.Contains(r.out, "needs recovery") {
		t.Errorf("ls after -pending: %q", r.out)
	}
}
