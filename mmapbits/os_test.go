package mmapbits

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"unsafe"
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

// TestOSOpenRead: a read-only shared mapping follows a live writer's words
// and seq word, refuses Sync, and faults on a write.
func TestOSOpenRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.flt")
	w, err := OS{}.Create(path, Header{Kind: KindBitmap, DataPages: 2, Size: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	atomic.StoreUint64(&w.Words()[1], 7)
	r, err := OS{}.OpenRead(path)
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Header(); h.Kind != KindBitmap || h.Version != FormatVersion || r.NumWords() != 2*WordsPerPage {
		t.Fatalf("header %+v, %d words", h, r.NumWords())
	}
	if got := atomic.LoadUint64(&r.Words()[1]); got != 7 {
		t.Fatalf("reader sees %d, want the writer's 7", got)
	}
	// Later changes of the writer, data and seq word, show through.
	atomic.StoreUint64(&w.Words()[WordsPerPage+3], 99)
	atomic.AddUint64(w.Seq(), 3)
	if got := atomic.LoadUint64(&r.Words()[WordsPerPage+3]); got != 99 {
		t.Fatalf("reader sees %d after the writer stored 99", got)
	}
	if got := atomic.LoadUint64(r.Seq()); got != 3 {
		t.Fatalf("reader's seq %d, want the writer's 3", got)
	}
	if got, ok := r.Word(WordsPerPage + 3); !ok || got != 99 {
		t.Fatalf("Word = %d, %v", got, ok)
	}
	r.Touch(0, r.NumWords()) // does nothing, and does not fault
	if err := r.Sync(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Sync: %v, want ErrReadOnly", err)
	}
	if faulted := writeFaults(&r.Words()[1]); !faulted {
		t.Fatal("a write through a read-only region did not fault")
	}
	if faulted := writeFaults(r.Seq()); !faulted {
		t.Fatal("a write to a read-only region's seq word did not fault")
	}
	if got := atomic.LoadUint64(&w.Words()[1]); got != 7 {
		t.Fatalf("writer sees %d after the faulting write", got)
	}
	// The seq word lives at SeqOffset of the file, outside the CRC.
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint64(raw[SeqOffset:]); got != 3 {
		t.Fatalf("file holds seq %d at offset %d, want 3", got, SeqOffset)
	}
	if _, _, err := DecodeHeader(raw); err != nil {
		t.Fatalf("header with a live seq word: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Word(1); ok {
		t.Fatal("Word on a closed region reported ok")
	}
	if got := atomic.LoadUint64(r.Seq()); got != 0 {
		t.Fatalf("closed region's seq reads %d, want 0", got)
	}
	if err := r.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	for _, c := range []struct {
		name string
		path string
		want error
	}{
		{"missing", filepath.Join(t.TempDir(), "nope"), fs.ErrNotExist},
		{"garbage", writeFile(t, make([]byte, 2*PageSize)), ErrBadMagic},
	} {
		if _, err := (OS{}).OpenRead(c.path); !errors.Is(err, c.want) {
			t.Fatalf("%s: OpenRead: %v, want %v", c.name, err, c.want)
		}
	}
}

// writeFaults stores to *p and reports whether the store faulted. The
// store is a plain one: under the race detector an atomic store runs in C,
// where a fault cannot become a panic.
func writeFaults(p *uint64) (faulted bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { faulted = recover() != nil }()
	*p = 1
	return false
}

func writeFile(t *testing.T, b []byte) string {
	p := filepath.Join(t.TempDir(), "f.flt")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOSSeqShared: every mapping of a file, read-write or read-only, sees
// one seq word, and Create starts it at 0.
func TestOSSeqShared(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.flt")
	a, err := OS{}.Create(path, Header{Kind: KindCuckoo, DataPages: 1, Size: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OS{}.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if uintptr(unsafe.Pointer(a.Seq()))%8 != 0 || a.Seq() == b.Seq() {
		t.Fatal("seq words misaligned, or the two mappings are one")
	}
	if got := atomic.LoadUint64(a.Seq()); got != 0 {
		t.Fatalf("new file's seq %d", got)
	}
	atomic.AddUint64(a.Seq(), 1)
	atomic.AddUint64(b.Seq(), 1)
	if x, y := atomic.LoadUint64(a.Seq()), atomic.LoadUint64(b.Seq()); x != 2 || y != 2 {
		t.Fatalf("seq through a = %d, through b = %d, want 2", x, y)
	}
	a.Touch(0, 1) // no-ops
	b.Touch(5, 1)
}
