package smaps

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

const sample = `00400000-00401000 r-xp 00000000 08:01 1234                               /usr/bin/x y
Size:                  4 kB
Rss:                   4 kB
FilePmdMapped:         0 kB
VmFlags: rd ex mr mw me
7f0000000000-7f0000400000 rw-s 00000000 08:01 99 /tmp/db/b.0001
Size:               4096 kB
FilePmdMapped:      2048 kB
THPeligible:    1
VmFlags: rd wr sh mr mw me ms rr hg
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
VmFlags: rd wr mr mw me gd ac
7ffd00000000-7ffd00001000 rw-p 00000000 00:00 0
VmFlags: rd wr mr mw me ac
`

func TestParse(t *testing.T) {
	ms, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 4 {
		t.Fatalf("got %d mappings, want 4", len(ms))
	}
	m := ms[1]
	if m.Start != 0x7f0000000000 || m.End != 0x7f0000400000 || m.Path != "/tmp/db/b.0001" {
		t.Errorf("mapping 1: %#x-%#x %q", m.Start, m.End, m.Path)
	}
	if !m.Has("hg") || m.Has("nh") || m.KB["FilePmdMapped"] != 2048 || m.KB["Size"] != 4096 {
		t.Errorf("mapping 1: flags %v, fields %v", m.Flags, m.KB)
	}
	if ms[0].Path != "/usr/bin/x y" || ms[0].Has("hg") {
		t.Errorf("mapping 0: path %q, flags %v", ms[0].Path, ms[0].Flags)
	}
	if ms[2].Path != "[stack]" || ms[3].Path != "" {
		t.Errorf("paths %q, %q", ms[2].Path, ms[3].Path)
	}
}

func TestParseBad(t *testing.T) {
	for _, in := range []string{
		"Rss: 4 kB\n",
		"zz-10 rw-p 0 0:0 0\n",
		"10 rw-p 0 0:0 0\n",
		"10-20 rw-p 0 0:0 0\nRss: x kB\n",
	} {
		if _, err := Parse(strings.NewReader(in)); err == nil {
			t.Errorf("Parse(%q): no error", in)
		}
	}
}

// TestContaining finds the mapping of a live heap object in the real
// /proc/self/smaps.
func TestContaining(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, err := Read(); !os.IsNotExist(err) {
			t.Fatalf("Read off Linux: %v, want a not-exist error", err)
		}
		return
	}
	x := new([1 << 16]byte)
	addr := uintptr(unsafe.Pointer(&x[0]))
	m, err := Containing(addr)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Has("rd") || !m.Has("wr") || m.Start > addr || addr >= m.End {
		t.Errorf("mapping %#x-%#x flags %v for %#x", m.Start, m.End, m.Flags, addr)
	}
	runtime.KeepAlive(x)
	r, err := Rollup()
	if err != nil {
		t.Fatal(err)
	}
	if r["Rss"] <= 0 {
		t.Errorf("rollup Rss %d", r["Rss"])
	}
}
