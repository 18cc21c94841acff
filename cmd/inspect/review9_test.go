package main

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
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
