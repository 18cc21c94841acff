package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/filterstore/filterstore/store"
)

// TestDumpNameSafe: wal --dump printed a filter name as it is unless it
// held a space, "=", a quote, a tab or a newline, so a name with an escape
// sequence drove the operator's terminal, and a live filter named "-"
// read as a dropped one (an adversarial review's findings). Every other
// output quoted such names already (fmtKey).
func TestDumpNameSafe(t *testing.T) {
	for _, n := range []string{"esc\x1b[31mRED", "title\x1b]0;pwned\x07", "cr\rx", "del\x7f", "csi\u009b2J", "bidi\u202eevil", "-", "a=b", "two words"} {
		got := dumpName(n)
		for _, r := range got {
			if !unicode.IsPrint(r) {
				t.Errorf("dumpName(%q) = %q: holds %U", n, got, r)
			}
		}
		if !strings.HasPrefix(got, `"`) {
			t.Errorf("dumpName(%q) = %q, want it quoted", n, got)
		}
	}
	if got := dumpName("users"); got != "users" {
		t.Errorf("dumpName(users) = %q", got)
	}
}

// TestCheckJSONKeyNotUTF8: check --json printed a key that is not valid
// UTF-8 with U+FFFD for each bad byte, as encoding/json does, so two keys
// answered alike; it now carries the bytes in key_hex too.
func TestCheckJSONKeyNotUTF8(t *testing.T) {
	dir := testStore(t)
	r := mustRun(t, 0, "check", "--json", dir, "users", "\xff\xfe", "\ufffd\ufffd")
	var out struct {
		Answers []struct {
			Key    string `json:"key"`
			KeyHex string `json:"key_hex"`
		} `json:"answers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Answers) != 2 || out.Answers[0].KeyHex != "fffe" || out.Answers[1].KeyHex != "" {
		t.Fatalf("answers %+v, want key_hex fffe for the first key only", out.Answers)
	}
}

// TestWalTellsDroppedFromDash: wal's table and JSON printed "-" both for
// a dropped filter's id and for a live filter named "-"; now the table
// quotes the live one and JSON marks the dropped one, and with the
// catalog unreadable no id is marked dropped (a reviewer saw every id
// marked so, its names unknown).
func TestWalTellsDroppedFromDash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "live")
	s, err := store.Open(dir, &store.Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{"d", "-"} {
		f, err := s.CreateBloom(name, store.BloomConfig{Capacity: 100})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Add([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Drop("d"); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(t.TempDir(), "copy")
	if err := copyDir(dir, copied); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, 0, "wal", copied); !strings.Contains(r.stdout, "\n\"-\" ") {
		t.Errorf("table does not quote the live filter named -:\n%s", r.stdout)
	}
	dropped := func(args ...string) map[float64]bool {
		var out struct {
			Filters []struct {
				ID      float64 `json:"id"`
				Dropped bool    `json:"dropped"`
			} `json:"filters"`
		}
		decode(t, runCLI(args...).stdout, &out)
		m := map[float64]bool{}
		for _, f := range out.Filters {
			m[f.ID] = m[f.ID] || f.Dropped
		}
		return m
	}
	if m := dropped("wal", copied, "--json"); !m[1] || m[2] {
		t.Errorf("dropped by id: %v, want 1 (d) only", m)
	}
	if err := os.WriteFile(filepath.Join(copied, "catalog.db"), make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := dropped("wal", copied, "--json"); m[1] || m[2] {
		t.Errorf("an unreadable catalog marked ids dropped: %v", m)
	}
}
