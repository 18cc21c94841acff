package blackbox_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/filterstore/filterstore/store"
)

var (
	inspectOnce sync.Once
	inspectBin  string
	inspectErr  error
)

func inspect(t *testing.T) string {
	t.Helper()
	inspectOnce.Do(func() {
		d, err := os.MkdirTemp("", "blackbox-inspect-")
		if err != nil {
			inspectErr = err
			return
		}
		inspectBin = filepath.Join(d, "inspect")
		out, err := exec.Command("go", "build", "-o", inspectBin, "github.com/filterstore/filterstore/cmd/inspect").CombinedOutput()
		if err != nil {
			inspectErr = err
			t.Logf("%s", out)
		}
	})
	if inspectErr != nil {
		t.Fatalf("building inspect: %v", inspectErr)
	}
	return inspectBin
}

// run runs inspect and returns stdout, stderr and the exit status.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(inspect(t), args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return so.String(), se.String(), code
}

func cliStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := openStore(t, dir, nil)
	b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 1000})
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 1000})
	n, _ := s.CreateCounting("n", store.BloomConfig{Capacity: 1000})
	m, _ := s.CreateBitmap("m", 100)
	_, err := b.AddMany([][]byte{[]byte("alice"), []byte("bob")})
	must(t, err)
	must(t, c.Add([]byte("alice")))
	must(t, c.Add([]byte("alice")))
	must(t, n.Add([]byte("alice")))
	_, err = m.Set(42)
	must(t, err)
	must(t, s.Close())
	return dir
}

// "inspect help lists the commands, and inspect help CMD or inspect CMD -h
// explains one (all on stdout, exit status 0)".
func TestInspectHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"help", "ls"}, {"ls", "-h"}, {"check", "-h"}, {"help", "stats"}, {"version", "-h"}, {"wal", "--help"}} {
		so, se, code := run(t, args...)
		if code != 0 || so == "" {
			t.Errorf("inspect %v: exit %d, stdout %d bytes, stderr %q", args, code, len(so), se)
		}
	}
	_, _, code := run(t, "nosuchcmd")
	if code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
	_, _, code = run(t)
	if code != 2 {
		t.Errorf("no command: exit %d, want 2", code)
	}
	_, _, code = run(t, "help", "nosuchcmd")
	if code != 2 {
		t.Errorf("help of unknown command: exit %d, want 2", code)
	}
}

// Exit statuses: 0 success; 2 missing directory, not a store, unknown filter,
// a file that is not a filter file; 1 corrupt.
func TestInspectExitCodes(t *testing.T) {
	dir := cliStore(t)
	for _, args := range [][]string{
		{"ls", dir}, {"info", dir, "b"}, {"check", dir, "b", "alice"}, {"verify", dir}, {"wal", dir},
		{"file", filepath.Join(dir, "filters", "1-0.flt")}, {"stats", dir, "c"}, {"version"}, {"verify", dir, "c"},
	} {
		so, se, code := run(t, args...)
		if code != 0 {
			t.Errorf("inspect %v: exit %d\n%s%s", args, code, so, se)
		}
	}
	missing := filepath.Join(t.TempDir(), "nope")
	empty := t.TempDir()
	for _, args := range [][]string{
		{"ls", missing}, {"ls", empty}, {"info", dir, "nosuch"}, {"check", dir, "nosuch", "k"}, {"stats", dir, "nosuch"},
		{"file", filepath.Join(dir, "catalog.db")}, {"file", dir}, {"file", missing}, {"verify", missing},
		{"ls"}, {"info", dir}, {"check"},
	} {
		_, se, code := run(t, args...)
		if code != 2 {
			t.Errorf("inspect %v: exit %d, want 2 (stderr %q)", args, code, se)
		}
		if strings.Count(strings.TrimSpace(se), "\n") > 2 {
			t.Logf("inspect %v stderr: %q", args, se)
		}
	}
}

// check: bloom answers maybe/no; cuckoo and counting print a count; bitmap
// takes decimal offsets and answers yes/no; --json; --keys -; --hex.
func TestInspectCheck(t *testing.T) {
	dir := cliStore(t)
	so, _, code := run(t, "check", dir, "b", "alice", "zzz-never")
	if code != 0 || !strings.Contains(so, "maybe") || !strings.Contains(so, " no") {
		t.Errorf("check bloom: %d %q", code, so)
	}
	so, _, _ = run(t, "check", dir, "c", "alice")
	if !strings.Contains(so, "2") {
		t.Errorf("check cuckoo shows no count 2: %q", so)
	}
	so, _, code = run(t, "check", dir, "m", "42", "43")
	if code != 0 || !strings.Contains(so, "yes") || !strings.Contains(so, "no") {
		t.Errorf("check bitmap: %d %q", code, so)
	}
	_, se, code := run(t, "check", dir, "m", "notanumber")
	if code != 2 {
		t.Errorf("check bitmap with a non-number: exit %d %q", code, se)
	}
	_, se, code = run(t, "check", dir, "m", "100")
	t.Logf("check bitmap offset past size: exit %d %q", code, se)
	so, _, code = run(t, "check", "--json", dir, "b", "alice")
	var js struct {
		Filter, Kind, State string
		Answers             []struct{ Key, Answer string }
	}
	if err := json.Unmarshal([]byte(so), &js); err != nil || code != 0 || js.Kind != "bloom" || js.State != "ok" || len(js.Answers) != 1 || js.Answers[0].Answer != "maybe" {
		t.Errorf("check --json: %d %v %q", code, err, so)
	}
	so, _, code = run(t, "check", "--hex", dir, "b", "616c696365")
	if code != 0 || !strings.Contains(so, "maybe") {
		t.Errorf("check --hex alice: %d %q", code, so)
	}
	_, _, code = run(t, "check", "--hex", dir, "b", "zz")
	if code != 2 {
		t.Errorf("check --hex with bad hex: exit %d, want 2", code)
	}
	// flags after args.
	so, _, code = run(t, "check", dir, "b", "alice", "--json")
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(so), "{") {
		t.Errorf("flags after args: %d %q", code, so)
	}
	// --keys from a file.
	kf := filepath.Join(t.TempDir(), "keys.txt")
	must(t, os.WriteFile(kf, []byte("alice\n\nbob\n"), 0o644))
	so, _, code = run(t, "check", "--keys", kf, dir, "b")
	if code != 0 || strings.Count(so, "maybe") != 2 {
		t.Errorf("--keys: %d %q", code, so)
	}
	// "--" before keys starting with '-'.
	_, _, code = run(t, "check", dir, "b", "--", "-dash")
	if code != 0 {
		t.Errorf("check -- -dash: exit %d", code)
	}
}

// verify: a flipped bit in a data page is a problem: exit 1.
func TestInspectVerifyDamage(t *testing.T) {
	dir := cliStore(t)
	f := filepath.Join(dir, "filters", "2-0.flt") // the cuckoo filter
	data, err := os.ReadFile(f)
	must(t, err)
	data[4096+5] ^= 1
	must(t, os.WriteFile(f, data, 0o644))
	so, se, code := run(t, "verify", dir)
	if code != 1 || !strings.Contains(so+se, "2-0.flt") {
		t.Errorf("verify damaged: exit %d\n%s%s", code, so, se)
	}
	so, _, code = run(t, "verify", "--json", dir)
	if code != 1 || !json.Valid([]byte(so)) {
		t.Errorf("verify --json damaged: exit %d valid %v", code, json.Valid([]byte(so)))
	}
}

// ls: a broken filter (its layer file missing) makes the exit status 1; the
// other filters are listed as usual; its reason is printed.
func TestInspectLsBroken(t *testing.T) {
	dir := cliStore(t)
	must(t, os.Remove(filepath.Join(dir, "filters", "1-0.flt")))
	so, se, code := run(t, "ls", dir)
	if code != 1 || !strings.Contains(so, "broken") || !strings.Contains(so, "c ") {
		t.Errorf("ls with broken filter: exit %d\n%s%s", code, so, se)
	}
	so, _, code = run(t, "check", dir, "b", "alice")
	if code != 1 || !strings.Contains(so, "maybe") {
		t.Errorf("check of broken filter: exit %d %q (doc: maybe, exit 1)", code, so)
	}
	_, _, code = run(t, "info", dir, "b")
	t.Logf("info of broken filter: exit %d", code)
}

// stats --png: refuses a FILE inside the store dir (exit 2, nothing
// written) and a directory; writes a PNG elsewhere.
func TestInspectStatsPNG(t *testing.T) {
	dir := cliStore(t)
	cat := filepath.Join(dir, "catalog.db")
	before, _ := os.ReadFile(cat)
	_, _, code := run(t, "stats", dir, "b", "--png", cat)
	if code != 2 {
		t.Errorf("--png over catalog.db: exit %d, want 2", code)
	}
	after, _ := os.ReadFile(cat)
	if !bytes.Equal(before, after) {
		t.Fatal("--png changed catalog.db")
	}
	_, _, code = run(t, "stats", dir, "b", "--png", filepath.Join(dir, "new.png"))
	if code != 2 {
		t.Errorf("--png inside store dir: exit %d, want 2", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.png")); err == nil {
		t.Error("--png wrote inside the store")
	}
	_, _, code = run(t, "stats", dir, "b", "--png", t.TempDir())
	if code != 2 {
		t.Errorf("--png to a directory: exit %d, want 2", code)
	}
	out := filepath.Join(t.TempDir(), "s.png")
	_, se, code := run(t, "stats", dir, "n", "--png", out)
	if code != 0 {
		t.Fatalf("--png: exit %d %q", code, se)
	}
	b, _ := os.ReadFile(out)
	if !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Error("--png wrote no PNG")
	}
}

// --json on every command produces valid JSON.
func TestInspectJSON(t *testing.T) {
	dir := cliStore(t)
	for _, args := range [][]string{
		{"ls", "--json", dir}, {"info", "--json", dir, "c"}, {"verify", "--json", dir}, {"wal", "--json", dir},
		{"file", "--json", filepath.Join(dir, "filters", "1-0.flt")}, {"stats", "--json", dir, "m"}, {"version", "--json"},
	} {
		so, se, code := run(t, args...)
		if code != 0 || !json.Valid([]byte(so)) {
			t.Errorf("inspect %v: exit %d, valid JSON %v\n%s%s", args, code, json.Valid([]byte(so)), so, se)
		}
	}
	// ls --json numbers match the library's Info.
	so, _, _ := run(t, "ls", "--json", dir)
	var ls struct {
		Filters []struct {
			Name  string
			Kind  string
			Items uint64
			State string
		}
	}
	must(t, json.Unmarshal([]byte(so), &ls))
	want := map[string]uint64{"b": 2, "c": 2, "n": 1, "m": 1}
	for _, f := range ls.Filters {
		if f.Items != want[f.Name] || f.State != "ok" {
			t.Errorf("ls --json %s: items %d state %s, want %d ok", f.Name, f.Items, f.State, want[f.Name])
		}
	}
}

// inspect beside a live writer (README: "safe to run while the owning
// process is writing"; ls state "needs recovery" with PENDING).
func TestInspectBesideWriter(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, &store.Options{CheckpointEvery: -1})
	defer s.Close()
	c, _ := s.CreateCuckoo("c", store.CuckooConfig{})
	_, err := c.AddMany(keys("w", 300))
	must(t, err)
	so, se, code := run(t, "ls", "--json", dir)
	if code != 0 {
		t.Fatalf("ls beside writer: %d %s", code, se)
	}
	var ls struct {
		PendingWALRecords uint64 `json:"pending_wal_records"`
		Filters           []struct {
			Items   uint64
			State   string
			Pending uint64 `json:"pending_wal_records"`
		}
	}
	must(t, json.Unmarshal([]byte(so), &ls))
	if len(ls.Filters) != 1 || ls.Filters[0].Items != 300 || ls.Filters[0].State != "needs recovery" || ls.Filters[0].Pending != 300 || ls.PendingWALRecords != 1 {
		t.Errorf("ls beside writer: %s", so)
	}
	so, se, code = run(t, "verify", dir)
	if code != 0 {
		t.Errorf("verify beside writer: exit %d\n%s%s", code, so, se)
	}
	so, _, code = run(t, "check", dir, "c", "w-5")
	if code != 0 || !strings.Contains(so, "maybe") {
		t.Errorf("check beside writer: %d %q", code, so)
	}
}
