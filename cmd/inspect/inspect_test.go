package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// result is one in-process run of the CLI.
type result struct {
	code           int
	stdout, stderr string
}

func runCLI(args ...string) result {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// mustRun runs the CLI and fails the test unless it exits with want.
func mustRun(t *testing.T, want int, args ...string) result {
	t.Helper()
	r := runCLI(args...)
	if r.code != want {
		t.Fatalf("inspect %s: want exit %d, got:\n%s", strings.Join(args, " "), want, r)
	}
	checkClean(t, args, r)
	return r
}

// checkClean fails if stderr shows a panic or a stack trace, or an error
// exit has anything but one line on stderr.
func checkClean(t *testing.T, args []string, r result) {
	t.Helper()
	for _, bad := range []string{"panic", "goroutine ", "internal error", ".go:"} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("inspect %s: stderr shows %q:\n%s", strings.Join(args, " "), bad, r)
		}
	}
	if r.code != 0 && strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("inspect %s: exit %d should print exactly one line on stderr:\n%s", strings.Join(args, " "), r.code, r)
	}
}

// golden compares got with testdata/NAME.golden, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/inspect -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update if the change is intended):\n--- got:\n%s\n--- want:\n%s", path, got, want)
	}
}

// The test store: four filters of every kind with fixed contents, a
// checkpoint, then a few changes logged after it, captured as a crash
// would leave them (the directory is copied while the writer is open and
// idle, so "needs recovery" shows).
var (
	templateOnce sync.Once
	templateDir  string
	templateErr  error
)

// testStore returns a private copy of the test store.
func testStore(t *testing.T) string {
	t.Helper()
	templateOnce.Do(func() {
		templateDir, templateErr = os.MkdirTemp("", "inspect-template-")
		if templateErr == nil {
			templateErr = buildStore(templateDir)
		}
	})
	if templateErr != nil {
		t.Fatal(templateErr)
	}
	dir := filepath.Join(t.TempDir(), "store")
	if err := copyDir(templateDir, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if templateDir != "" {
		os.RemoveAll(templateDir)
	}
	os.Exit(code)
}

// buildStore writes the test store into dir/.. : it builds in dir/live,
// copies the open store to dir, then closes the live one.
func buildStore(dir string) error {
	live := filepath.Join(dir, "..", filepath.Base(dir)+"-live")
	defer os.RemoveAll(live)
	s, err := store.Open(live, &store.Options{CheckpointEvery: -1})
	if err != nil {
		return err
	}
	defer s.Close()
	users, err := s.CreateBloom("users", store.BloomConfig{Capacity: 200, ErrorRate: 0.01})
	if err != nil {
		return err
	}
	for i := 0; i < 300; i++ { // grows a second layer
		if _, err := users.Add([]byte(fmt.Sprintf("user-%03d", i))); err != nil {
			return err
		}
	}
	seen, err := s.CreateCuckoo("seen", store.CuckooConfig{Capacity: 300, Expansion: 2})
	if err != nil {
		return err
	}
	for i := 0; i < 250; i++ {
		if err := seen.Add([]byte(fmt.Sprintf("seen-%03d", i))); err != nil {
			return err
		}
	}
	for i := 0; i < 20; i++ {
		if _, err := seen.Delete([]byte(fmt.Sprintf("seen-%03d", i))); err != nil {
			return err
		}
	}
	hits, err := s.CreateCounting("hits", store.BloomConfig{Capacity: 200, ErrorRate: 0.01})
	if err != nil {
		return err
	}
	for i := 0; i < 150; i++ {
		if err := hits.Add([]byte(fmt.Sprintf("hit-%03d", i%100))); err != nil {
			return err
		}
	}
	for i := 0; i < 10; i++ {
		if _, err := hits.Delete([]byte(fmt.Sprintf("hit-%03d", i))); err != nil {
			return err
		}
	}
	flags, err := s.CreateBitmap("flags", 10000)
	if err != nil {
		return err
	}
	for off := uint64(0); off < 700; off += 7 {
		if _, err := flags.Set(off); err != nil {
			return err
		}
	}
	if _, err := flags.Clear(14); err != nil {
		return err
	}
	if err := s.Checkpoint(); err != nil {
		return err
	}
	// Logged after the checkpoint: the copy needs recovery.
	for i := 0; i < 5; i++ {
		if _, err := users.Add([]byte(fmt.Sprintf("late-%d", i))); err != nil {
			return err
		}
	}
	for i := 0; i < 3; i++ {
		if err := seen.Add([]byte(fmt.Sprintf("late-%d", i))); err != nil {
			return err
		}
	}
	if _, err := flags.Set(9999); err != nil {
		return err
	}
	return copyDir(live, dir)
}

// copyDir copies a store directory (files and subdirectories; LOCK is
// skipped, as a crash would leave it unlocked).
func copyDir(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if info.Name() == "LOCK" {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// layerFile returns the path of a filter's layer in dir.
func layerFile(t *testing.T, dir, name string, layer int) string {
	t.Helper()
	cat, err := readCatalogGuarded(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range cat.Filters {
		if f.Name == name {
			return f.Layers[layer].Path
		}
	}
	t.Fatalf("no filter %q", name)
	return ""
}

// walSegment returns the path of the first WAL segment in dir.
func walSegment(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(walDir(dir))
	if err != nil || len(ents) == 0 {
		t.Fatalf("no WAL segment: %v", err)
	}
	return filepath.Join(walDir(dir), ents[0].Name())
}

func TestGolden(t *testing.T) {
	dir := testStore(t)
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"ls", []string{"ls", dir}, 0},
		{"info_users", []string{"info", dir, "users"}, 0},
		{"info_seen", []string{"info", dir, "seen"}, 0},
		{"info_hits", []string{"info", dir, "hits"}, 0},
		{"info_flags", []string{"info", dir, "flags"}, 0},
		{"check_users", []string{"check", dir, "users", "user-000", "user-299", "late-4", "nobody", "two words"}, 0},
		{"check_seen", []string{"check", dir, "seen", "seen-000", "seen-100", "late-0", "nobody"}, 0},
		{"check_hits", []string{"check", dir, "hits", "hit-000", "hit-042", "hit-099", "nobody"}, 0},
		{"check_flags", []string{"check", dir, "flags", "0", "14", "21", "9999", "10000"}, 0},
		{"verify", []string{"verify", dir}, 0},
		{"verify_seen", []string{"verify", dir, "seen"}, 0},
		{"wal", []string{"wal", dir}, 0},
		{"file_users", []string{"file", layerFile(t, dir, "users", 1)}, 0},
		{"file_seen", []string{"file", layerFile(t, dir, "seen", 0)}, 0},
		{"file_hits", []string{"file", layerFile(t, dir, "hits", 0)}, 0},
		{"file_flags", []string{"file", layerFile(t, dir, "flags", 0)}, 0},
		{"stats_users", []string{"stats", dir, "users"}, 0},
		{"stats_seen", []string{"stats", dir, "seen"}, 0},
		{"stats_hits", []string{"stats", dir, "hits"}, 0},
		{"stats_flags", []string{"stats", dir, "flags"}, 0},
		{"help", []string{"help"}, 0},
		{"help_check", []string{"help", "check"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mustRun(t, c.code, c.args...)
			if r.stderr != "" {
				t.Errorf("unexpected stderr: %s", r.stderr)
			}
			golden(t, c.name, normalize(t, r.stdout, dir))
		})
	}
}

// normalize makes output independent of where the test store lives and
// of its random store id.
func normalize(t *testing.T, out, dir string) string {
	t.Helper()
	cat, err := readCatalogGuarded(dir)
	if err != nil {
		t.Fatal(err)
	}
	out = strings.ReplaceAll(out, fmt.Sprintf("%#016x", cat.StoreID), "STOREID")
	return strings.ReplaceAll(out, dir, "DIR")
}

// TestGoldenDump pins wal --dump on a store small enough to print whole.
func TestGoldenDump(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	s, err := store.Open(dir, &store.Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 10})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 10})
	m, _ := s.CreateBitmap("m", 100)
	b.Add([]byte("x"))
	c.Add([]byte("x"))
	m.Set(3)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	b.Add([]byte("y"))
	c.Add([]byte("y"))
	c.Delete([]byte("x"))
	m.Set(99)
	// Dump beside the live writer: a checkpoint (Close included) starts a
	// new segment and deletes the records it covers, so only the four
	// records after the checkpoint are in the log.
	defer s.Close()
	r := mustRun(t, 0, "wal", "--dump", dir)
	golden(t, "wal_dump", r.stdout)
	if r.stderr != "" {
		t.Errorf("unexpected stderr: %s", r.stderr)
	}
	// --json --dump: one object per line.
	r = mustRun(t, 0, "wal", "--dump", "--json", dir)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 4 JSON lines, got %d:\n%s", len(lines), r.stdout)
	}
	for _, l := range lines {
		var d walDumpJSON
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
	}
}

// TestJSON: every command's --json output parses and carries the numbers
// the human output shows.
func TestJSON(t *testing.T) {
	dir := testStore(t)
	var ls lsOut
	decode(t, mustRun(t, 0, "ls", dir, "--json").stdout, &ls)
	if len(ls.Filters) != 4 || ls.Pending != 9 || ls.Filters[3].Name != "users" || ls.Filters[3].Items != 305 || ls.Filters[3].Pending != 5 {
		t.Errorf("ls --json: %+v", ls)
	}
	var in infoOut
	decode(t, mustRun(t, 0, "--json", "info", dir, "seen").stdout, &in)
	if in.Kind != "cuckoo" || in.Items != 233 || in.ItemsAtCheckpoint != 230 || in.Pending.Records != 3 || len(in.Layers) != 1 ||
		!in.Layers[0].HasHeader() || in.Layers[0].File != "filters/2-0.flt" {
		t.Errorf("info --json: %+v", in)
	}
	var ck checkOut
	decode(t, mustRun(t, 0, "check", "--json", dir, "seen", "seen-100", "nobody").stdout, &ck)
	if len(ck.Answers) != 2 || ck.Answers[0].Answer != "maybe" || ck.Answers[0].Count == nil || *ck.Answers[0].Count != 1 || ck.Answers[1].Answer != "no" {
		t.Errorf("check --json: %+v", ck)
	}
	var vf verifyOut
	decode(t, mustRun(t, 0, "verify", "--json", dir).stdout, &vf)
	if !vf.OK || vf.Filters != 4 || vf.LayerFiles != 5 || vf.WALRecords != 9 || !vf.CountsCheck {
		t.Errorf("verify --json: %+v", vf)
	}
	var wl walOut
	decode(t, mustRun(t, 0, "wal", "--json", dir).stdout, &wl)
	// The log holds only the 9 records after the checkpoint: a checkpoint
	// starts a new segment and deletes the one it covers. hits has none.
	if wl.Records != 9 || wl.Pending != 9 || len(wl.Segments) != 1 || len(wl.Filters) != 3 {
		t.Errorf("wal --json: %+v", wl)
	}
	var fo fileOut
	decode(t, mustRun(t, 0, "file", "--json", layerFile(t, dir, "hits", 0)).stdout, &fo)
	if fo.Header == nil || fo.Header.Kind != "counting" || fo.CounterSum == nil || *fo.CounterSum != 840 { // 140 items, k = 6
		t.Errorf("file --json: %+v", fo)
	}
	var st statsOut
	decode(t, mustRun(t, 0, "stats", "--json", dir, "users").stdout, &st)
	if len(st.Layers) != 2 || st.Layers[1].Pending != 5 || st.Layers[0].Units != 5 {
		t.Errorf("stats --json: %+v", st)
	}
}

func (l infoLayer) HasHeader() bool { return l.Header != nil && l.HeaderMatches }

func decode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v in:\n%s", err, s)
	}
}

// TestCheckKeys: keys from a file and from stdin, with the arguments.
func TestCheckKeys(t *testing.T) {
	dir := testStore(t)
	keys := filepath.Join(t.TempDir(), "keys.txt")
	os.WriteFile(keys, []byte("user-001\r\n\nnobody\nlate-0\n"), 0o644)
	r := mustRun(t, 0, "check", dir, "users", "user-002", "--keys", keys)
	want := "KEY       ANSWER\nuser-002  maybe\nuser-001  maybe\nnobody    no\nlate-0    maybe\n"
	if r.stdout != want {
		t.Errorf("--keys FILE:\n%s\nwant:\n%s", r.stdout, want)
	}
	old := stdin
	defer func() { stdin = old }()
	stdin = strings.NewReader("user-003\nnobody\n")
	r = mustRun(t, 0, "check", "--keys", "-", dir, "users")
	if r.stdout != "KEY       ANSWER\nuser-003  maybe\nnobody    no\n" {
		t.Errorf("--keys -:\n%s", r.stdout)
	}
	// -- ends the flags: a key may start with '-'.
	r = mustRun(t, 0, "check", dir, "users", "--", "-dash")
	if !strings.Contains(r.stdout, "-dash  no") {
		t.Errorf("-- keys:\n%s", r.stdout)
	}
}

// TestProgress: the bar appears only after the delay, only on a terminal,
// and is erased at the end.
func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	p := newProgressOn(&buf, "verify", 1000, true, clock, time.Second)
	p.add(100)
	if buf.Len() != 0 {
		t.Fatalf("drawn before the delay: %q", buf.String())
	}
	now = now.Add(1500 * time.Millisecond)
	p.setCurrent("filters/1-0.flt")
	p.add(400)
	if !strings.Contains(buf.String(), "verify [###############...............]  50% filters/1-0.flt") {
		t.Fatalf("bar: %q", buf.String())
	}
	p.finish()
	if !strings.HasSuffix(buf.String(), "\r") {
		t.Errorf("not erased: %q", buf.String())
	}
	buf.Reset()
	off := newProgressOn(&buf, "verify", 10, false, clock, 0)
	off.add(5)
	off.finish()
	if buf.Len() != 0 {
		t.Errorf("drawn when not a terminal: %q", buf.String())
	}
	// A pipe is not a terminal.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) {
		t.Error("a pipe is a terminal?")
	}
}

// TestIncomplete: a store copied while a bulk Load runs has an incomplete
// filter; ls shows it, check warns that every answer is maybe, verify
// notes it.
func TestIncomplete(t *testing.T) {
	live := filepath.Join(t.TempDir(), "live")
	s, err := store.Open(live, &store.Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.CreateBloom("bulk", store.BloomConfig{Capacity: 1000})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "crashed")
	copied := make(chan error, 1)
	err = b.Load(store.Keys(func(yield func([]byte) bool) {
		for i := 0; i < 500; i++ {
			if i == 250 {
				copied <- copyDir(live, dir)
			}
			if !yield([]byte(fmt.Sprint("k", i))) {
				return
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-copied; err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 0, "ls", dir)
	if !strings.Contains(r.stdout, "incomplete") {
		t.Errorf("ls:\n%s", r)
	}
	r = mustRun(t, 0, "check", dir, "bulk", "never-added")
	if !strings.Contains(r.stdout, "never-added  maybe") || !strings.Contains(r.stderr, "incomplete") {
		t.Errorf("check:\n%s", r)
	}
	r = mustRun(t, 0, "verify", dir)
	if !strings.Contains(r.stdout, "note     catalog.db: filter bulk is incomplete") {
		t.Errorf("verify:\n%s", r)
	}
}
