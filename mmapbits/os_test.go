package mmapbits

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

func TestOSCreateWriteReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "1-0.flt")
	h := Header{Kind: KindBloom, DataPages: 4, FilterID: 1, Size: 256, K: 7, Capacity: 100, ErrorRate: 0.01}
	r, err := OS{}.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.NumWords(); n != 4*WordsPerPage || uint64(len(r.Words())) != n {
		t.Fatalf("NumWords = %d, len(Words) = %d, want %d", n, len(r.Words()), 4*WordsPerPage)
	}
	w := r.Words()
	atomic.StoreUint64(&w[0], 0xdeadbeef)
	atomic.StoreUint64(&w[len(w)-1], 42)

	// A read-only view beside the live writer sees its stores.
	v, err := OS{}.OpenView(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := v.Word(0); !ok || got != 0xdeadbeef {
		t.Fatalf("view word 0 = %x %v", got, ok)
	}
	if _, ok := v.Word(v.NumWords()); ok {
		t.Fatal("view word past the end reported ok")
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, ok := r.Word(0); ok {
		t.Fatal("Word on a closed region reported ok")
	}
	// A reader that kept the slice across Close reads zeros, not a fault.
	if w[0] != 0 {
		t.Fatalf("word after close = %x, want 0", w[0])
	}
	v.Close()

	r, err = OS{}.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := r.Header()
	h.Version = FormatVersion
	if got != h {
		t.Fatalf("header after reopen %+v, want %+v", got, h)
	}
	if w := r.Words(); w[0] != 0xdeadbeef || w[len(w)-1] != 42 {
		t.Fatalf("data after reopen: %x %x", w[0], w[len(w)-1])
	}
	// Little-endian on disk: the first data byte is the low byte.
	raw, _ := os.ReadFile(path)
	if raw[HeaderSize] != 0xef || raw[HeaderSize+3] != 0xde {
		t.Fatalf("data bytes %x: not little-endian", raw[HeaderSize:HeaderSize+8])
	}
	if _, err := (OS{}).Create(path, h); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("create over existing file: %v", err)
	}
}

func TestOSOpenBadFiles(t *testing.T) {
	dir := t.TempDir()
	good := Header{Kind: KindBitmap, DataPages: 1, Size: 100}.Append(nil)
	good = append(good, make([]byte, PageSize)...)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flip := append([]byte(nil), good...)
	flip[20] ^= 0x40
	cases := []struct {
		name string
		path string
		want error
	}{
		{"missing", filepath.Join(dir, "nope.flt"), fs.ErrNotExist},
		{"empty", write("empty.flt", nil), ErrShortHeader},
		{"garbage", write("garbage.flt", make([]byte, 3*PageSize)), ErrBadMagic},
		{"flipped", write("flipped.flt", flip), ErrBadChecksum},
		{"truncated", write("trunc.flt", good[:HeaderSize+100]), ErrBadSize},
		{"extended", write("ext.flt", append(append([]byte(nil), good...), 0)), ErrBadSize},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := (OS{}).Open(c.path); !errors.Is(err, c.want) {
				t.Fatalf("Open: %v, want %v", err, c.want)
			}
			if _, err := (OS{}).OpenView(c.path); !errors.Is(err, c.want) {
				t.Fatalf("OpenView: %v, want %v", err, c.want)
			}
		})
	}
}

func TestOSRemove(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.flt")
	r, err := OS{}.Create(path, Header{Kind: KindBitmap, DataPages: 1, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := (OS{}).Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := (OS{}).Remove(path); err != nil {
		t.Fatalf("removing a missing file: %v", err)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

func TestCreateInvalidHeader(t *testing.T) {
	for _, m := range []Mapper{OS{}, NewSim()} {
		if _, err := m.Create(filepath.Join(t.TempDir(), "x"), Header{Kind: 0, DataPages: 1}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%T: kind 0: %v", m, err)
		}
		if _, err := m.Create(filepath.Join(t.TempDir(), "x"), Header{Kind: KindBloom}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%T: zero pages: %v", m, err)
		}
	}
	if _, err := NewMem(Header{Kind: KindBloom}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NewMem zero pages: %v", err)
	}
}

func TestOSSnapshotIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.flt")
	r, err := OS{}.Create(path, Header{Kind: KindBitmap, DataPages: 2, Size: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	atomic.StoreUint64(&r.Words()[1], 7)
	snap, err := OS{}.OpenSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if got := snap.Words()[1]; got != 7 {
		t.Fatalf("snapshot sees %d, want the writer's 7", got)
	}
	snap.Words()[1] = 99
	if got := atomic.LoadUint64(&r.Words()[1]); got != 7 {
		t.Fatalf("a snapshot write reached the file: writer sees %d", got)
	}
	if err := snap.Sync(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("snapshot Sync: %v, want ErrReadOnly", err)
	}
}
