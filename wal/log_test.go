package wal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestOpenEmpty(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	if l.FirstLSN() != 1 || l.LastLSN() != 0 || l.DurableLSN() != 0 {
		t.Fatalf("empty log: first %d last %d durable %d", l.FirstLSN(), l.LastLSN(), l.DurableLSN())
	}
	if got := replayAll(t, l, 0); len(got) != 0 {
		t.Fatalf("empty log replayed %d records", len(got))
	}
	if l.Size() != SegmentHeaderSize {
		t.Fatalf("Size() = %d, want %d", l.Size(), SegmentHeaderSize)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := segFiles(t, fs); len(got) != 1 || filepath.Base(got[0]) != "00000000000000000001.log" {
		t.Fatalf("segments %v", got)
	}
}

func TestAppendReplayReopen(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{SegmentSize: 1024})
	var lsn uint64
	for lsn < 200 {
		batch := [][]byte{payloadFor(0, lsn+1), payloadFor(0, lsn+2), payloadFor(0, lsn+3)}
		last, err := l.Append(batch...)
		if err != nil || last != lsn+3 {
			t.Fatalf("Append = %d, %v; want %d", last, err, lsn+3)
		}
		lsn = last
		if lsn%9 == 0 {
			if err := l.WaitDurable(lsn); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(l *Log, from uint64) {
		t.Helper()
		got := replayAll(t, l, from)
		if uint64(len(got)) != lsn-from+1 {
			t.Fatalf("Replay(%d): %d records, want %d", from, len(got), lsn-from+1)
		}
		for i, r := range got {
			if r.lsn != from+uint64(i) || !bytes.Equal(r.payload, payloadFor(0, r.lsn)) {
				t.Fatalf("Replay(%d): record %d has lsn %d or wrong payload", from, i, r.lsn)
			}
		}
	}
	check(l, 1)
	check(l, 150)
	if l.Stats().Segments < 5 {
		t.Fatalf("expected rotation, got %d segments", l.Stats().Segments)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, fs, Options{SegmentSize: 1024})
	defer l.Close()
	if l.LastLSN() != lsn || l.DurableLSN() != lsn || l.FirstLSN() != 1 {
		t.Fatalf("reopened: first %d last %d durable %d", l.FirstLSN(), l.LastLSN(), l.DurableLSN())
	}
	check(l, 1)
	check(l, 77)
	// Every segment but the last respects SegmentSize.
	files := segFiles(t, fs)
	for _, f := range files[:len(files)-1] {
		b, _ := fs.ReadFile(f)
		if len(b) > 1024 {
			t.Fatalf("%s: %d bytes > SegmentSize", f, len(b))
		}
	}
	if next, err := l.Append([]byte("more")); err != nil || next != lsn+1 {
		t.Fatalf("Append after reopen = %d, %v", next, err)
	}
}

// buildLog writes n records to a fresh MemFS log and closes it.
func buildLog(t *testing.T, n int, segSize int64) *MemFS {
	t.Helper()
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{SegmentSize: segSize})
	for i := 1; i <= n; i++ {
		if _, err := l.Append(payloadFor(0, uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return fs
}

// recordOffsets returns the offsets of the records in a segment file.
func recordOffsets(t *testing.T, b []byte) []int64 {
	t.Helper()
	r := newReaderAt(bytes.NewReader(b[SegmentHeaderSize:]), SegmentHeaderSize)
	var offs []int64
	for {
		if _, _, err := r.Next(); err != nil {
			return offs
		}
		offs = append(offs, r.Offset())
	}
}

// withFile returns a copy of fs's durable state with name's contents
// replaced by data.
func withFile(t *testing.T, fs *MemFS, name string, data []byte) *MemFS {
	t.Helper()
	c := fs.Crash(rand.New(rand.NewPCG(1, 1))) // everything is synced: an exact copy
	if err := c.WriteFile(name, data); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTornTailEveryOffset cuts the last record at every byte offset: Open
// truncates it silently, and appends continue with the right LSN.
func TestTornTailEveryOffset(t *testing.T) {
	const n = 5
	fs := buildLog(t, n, 1<<20)
	name := segFiles(t, fs)[0]
	full, _ := fs.ReadFile(name)
	offs := recordOffsets(t, full)
	lastOff := offs[len(offs)-1]
	for cut := lastOff; cut < int64(len(full)); cut++ {
		for _, garbage := range [][]byte{nil, {0, 0, 0}, bytes.Repeat([]byte{0xff}, 40)} {
			data := append(bytes.Clone(full[:cut]), garbage...)
			c := withFile(t, fs, name, data)
			l, err := Open(testDir, Options{FS: c, Logger: quiet})
			if err != nil {
				t.Fatalf("cut %d garbage %d: Open: %v", cut, len(garbage), err)
			}
			if l.LastLSN() != n-1 {
				t.Fatalf("cut %d: LastLSN %d, want %d", cut, l.LastLSN(), n-1)
			}
			if got, err := l.Append(payloadFor(1, n)); err != nil || got != n {
				t.Fatalf("cut %d: Append = %d, %v", cut, got, err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, c, Options{})
			got := replayAll(t, l, 1)
			if len(got) != n || !bytes.Equal(got[n-1].payload, payloadFor(1, n)) {
				t.Fatalf("cut %d: after reopen %d records", cut, len(got))
			}
			l.Close()
		}
	}
}

// TestCorruptMiddleRecord flips each byte of a record followed by others:
// Open must fail with ErrCorrupt naming the segment and the offset.
func TestCorruptMiddleRecord(t *testing.T) {
	fs := buildLog(t, 5, 1<<20)
	name := segFiles(t, fs)[0]
	full, _ := fs.ReadFile(name)
	offs := recordOffsets(t, full)
	mid, end := offs[2], offs[3]
	for i := mid; i < end; i++ {
		data := bytes.Clone(full)
		data[i] ^= 0x10
		_, err := Open(testDir, Options{FS: withFile(t, fs, name, data), Logger: quiet})
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: Open err %v, want ErrCorrupt", i, err)
		}
		for _, want := range []string{filepath.Base(name), "offset " + itoa(mid)} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("byte %d flipped: error %q does not contain %q", i, err, want)
			}
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestCorruptNonLastSegment(t *testing.T) {
	fs := buildLog(t, 40, 512)
	files := segFiles(t, fs)
	if len(files) < 3 {
		t.Fatalf("want >= 3 segments, got %d", len(files))
	}
	name := files[1]
	full, _ := fs.ReadFile(name)
	// A torn last record in a segment that is not the last is corruption.
	offs := recordOffsets(t, full)
	data := full[:offs[len(offs)-1]+3]
	_, err := Open(testDir, Options{FS: withFile(t, fs, name, data), Logger: quiet})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(name)) {
		t.Fatalf("torn non-last segment: %v", err)
	}
	if !strings.Contains(err.Error(), "offset "+itoa(offs[len(offs)-1])) {
		t.Fatalf("error %q lacks the offset", err)
	}
}

func TestBadSegmentHeader(t *testing.T) {
	fs := buildLog(t, 40, 512)
	for _, tc := range []struct {
		name string
		mod  func(b []byte) []byte
	}{
		{"magic", func(b []byte) []byte { b[1] = 'x'; return b }},
		{"crc", func(b []byte) []byte { b[21]++; return b }},
		{"short", func(b []byte) []byte { return b[:10] }},
		{"empty", func(b []byte) []byte { return b[:0] }},
		{"name mismatch", func(b []byte) []byte {
			h := AppendSegmentHeader(nil, 999, 0)
			return append(h, b[SegmentHeaderSize:]...)
		}},
	} {
		for _, which := range []int{0, -1} { // first and last segment
			files := segFiles(t, fs)
			name := files[(which+len(files))%len(files)]
			b, _ := fs.ReadFile(name)
			_, err := Open(testDir, Options{FS: withFile(t, fs, name, tc.mod(b)), Logger: quiet})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(name)+" offset 0") {
				t.Errorf("%s in %s: err %v, want ErrCorrupt naming it", tc.name, filepath.Base(name), err)
			}
		}
	}
}

func TestLSNGap(t *testing.T) {
	fs := buildLog(t, 40, 512)
	files := segFiles(t, fs)
	c := fs.Crash(rand.New(rand.NewPCG(1, 1)))
	if err := c.Remove(files[1]); err != nil {
		t.Fatal(err)
	}
	_, err := Open(testDir, Options{FS: c, Logger: quiet})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "LSN gap") || !strings.Contains(err.Error(), filepath.Base(files[2])) {
		t.Fatalf("gap: %v", err)
	}
	// A missing first segment is no gap: it was truncated.
	c = fs.Crash(rand.New(rand.NewPCG(1, 1)))
	c.Remove(files[0])
	l, err := Open(testDir, Options{FS: c, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := ParseSegmentName(filepath.Base(files[1]))
	if l.FirstLSN() != first || l.LastLSN() != 40 {
		t.Fatalf("first %d last %d", l.FirstLSN(), l.LastLSN())
	}
	l.Close()
}

// TestWrongLSN: a record with a valid CRC but the wrong LSN is corruption,
// even at the tail.
func TestWrongLSN(t *testing.T) {
	fs := buildLog(t, 3, 1<<20)
	name := segFiles(t, fs)[0]
	b, _ := fs.ReadFile(name)
	b = AppendRecord(b, 5, []byte("skips 4"))
	_, err := Open(testDir, Options{FS: withFile(t, fs, name, b), Logger: quiet})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "LSN 5, want 4") {
		t.Fatalf("wrong LSN: %v", err)
	}
}

func TestTmpSegmentRemoved(t *testing.T) {
	fs := buildLog(t, 3, 1<<20)
	c := fs.Crash(rand.New(rand.NewPCG(1, 1)))
	c.WriteFile(filepath.Join(testDir, SegmentName(4)+".tmp"), []byte("FSWAL"))
	l := mustOpen(t, c, Options{})
	l.Close()
	if names, _ := c.List(testDir); len(names) != 1 {
		t.Fatalf("files after open: %v", names)
	}
}

func TestOptionsValidation(t *testing.T) {
	_, err := Open(testDir, Options{FS: NewMemFS(), SegmentSize: 10, Sync: 7, SyncEvery: -1})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
	for _, field := range []string{"SegmentSize", "Options.Sync", "SyncEvery"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
}

func TestInvalidArguments(t *testing.T) {
	l := mustOpen(t, NewMemFS(), Options{})
	defer l.Close()
	if _, err := l.Append([]byte("ok"), make([]byte, MaxRecordSize+1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("oversized Append: %v", err)
	}
	if l.LastLSN() != 0 {
		t.Fatalf("failed Append assigned LSNs")
	}
	if err := l.WaitDurable(1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("WaitDurable of a future LSN: %v", err)
	}
	if last, err := l.Append(); err != nil || last != 0 {
		t.Fatalf("empty Append = %d, %v", last, err)
	}
	if err := l.WaitDurable(0); err != nil {
		t.Fatalf("WaitDurable(0): %v", err)
	}
}

func TestClosed(t *testing.T) {
	l := mustOpen(t, NewMemFS(), Options{Sync: SyncInterval})
	l.Append([]byte("x"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.DurableLSN() != 1 {
		t.Fatalf("Close did not sync: durable %d", l.DurableLSN())
	}
	nop := func(uint64, []byte) error { return nil }
	for name, err := range map[string]error{
		"Append":         func() error { _, err := l.Append([]byte("y")); return err }(),
		"WaitDurable":    l.WaitDurable(1),
		"WaitSynced":     l.WaitSynced(1),
		"Sync":           l.Sync(),
		"Replay":         l.Replay(1, nop),
		"TruncateBefore": l.TruncateBefore(1),
		"SetNextLSN":     l.SetNextLSN(10),
		"Close":          l.Close(),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestTruncateBefore(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{SegmentSize: 512})
	for i := uint64(1); i <= 100; i++ {
		l.Append(payloadFor(0, i))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	before := l.Size()
	nseg := l.Stats().Segments
	if err := l.TruncateBefore(50); err != nil {
		t.Fatal(err)
	}
	first := l.FirstLSN()
	if first > 50 || first == 1 {
		t.Fatalf("FirstLSN after TruncateBefore(50) = %d", first)
	}
	if l.Size() >= before || l.Stats().Segments >= nseg {
		t.Fatalf("nothing deleted: size %d -> %d", before, l.Size())
	}
	got := replayAll(t, l, 1)
	if got[0].lsn != first || got[len(got)-1].lsn != 100 {
		t.Fatalf("replay after truncation: %d..%d", got[0].lsn, got[len(got)-1].lsn)
	}
	// Never the active segment, even when everything is below lsn.
	if err := l.TruncateBefore(1000); err != nil {
		t.Fatal(err)
	}
	if l.Stats().Segments != 1 || l.LastLSN() != 100 {
		t.Fatalf("after TruncateBefore(1000): %d segments, last %d", l.Stats().Segments, l.LastLSN())
	}
	l.Close()
	l = mustOpen(t, fs, Options{SegmentSize: 512})
	defer l.Close()
	if l.LastLSN() != 100 || l.FirstLSN() > 100 {
		t.Fatalf("reopen: first %d last %d", l.FirstLSN(), l.LastLSN())
	}
}

func TestSetNextLSN(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	if err := l.SetNextLSN(100); err != nil {
		t.Fatal(err)
	}
	if l.FirstLSN() != 100 || l.LastLSN() != 99 {
		t.Fatalf("first %d last %d", l.FirstLSN(), l.LastLSN())
	}
	if lsn, err := l.Append([]byte("a"), []byte("b")); err != nil || lsn != 101 {
		t.Fatalf("Append = %d, %v", lsn, err)
	}
	if err := l.SetNextLSN(50); err != nil || l.LastLSN() != 101 { // never backwards
		t.Fatalf("SetNextLSN(50): %v, last %d", err, l.LastLSN())
	}
	if err := l.SetNextLSN(1000); err != nil {
		t.Fatal(err)
	}
	l.Append([]byte("c"))
	l.Close()
	l = mustOpen(t, fs, Options{})
	defer l.Close()
	got := replayAll(t, l, 0)
	if len(got) != 1 || got[0].lsn != 1000 || l.FirstLSN() != 1000 {
		t.Fatalf("after reopen: %v, first %d", got, l.FirstLSN())
	}
	if n := len(segFiles(t, fs)); n != 1 {
		t.Fatalf("%d segment files", n)
	}
}

// TestStickyError: after a failed sync nothing more is acknowledged.
func TestStickyError(t *testing.T) {
	hfs := &hookFS{FS: NewMemFS()}
	l := mustOpen(t, hfs, Options{})
	defer l.Close()
	lsn, _ := l.Append([]byte("a"))
	if err := l.WaitDurable(lsn); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk on fire")
	hfs.setHook(func(op, name string) error {
		if op == "sync" {
			return boom
		}
		return nil
	})
	lsn, _ = l.Append([]byte("b"))
	if err := l.WaitDurable(lsn); !errors.Is(err, boom) {
		t.Fatalf("WaitDurable with failing sync: %v", err)
	}
	hfs.setHook(nil)
	if _, err := l.Append([]byte("c")); !errors.Is(err, boom) {
		t.Fatalf("Append after failed sync: %v", err)
	}
	if l.DurableLSN() != 1 {
		t.Fatalf("durable %d", l.DurableLSN())
	}
}

func TestSyncInterval(t *testing.T) {
	hfs := &hookFS{FS: NewMemFS()}
	var synced []uint64
	done := make(chan struct{}, 100)
	l := mustOpen(t, hfs, Options{Sync: SyncInterval, SyncEvery: 20 * time.Millisecond, OnSync: func(lsn uint64) {
		synced = append(synced, lsn)
		done <- struct{}{}
	}})
	defer l.Close()
	lsn, _ := l.Append([]byte("a"), []byte("b"))
	start := time.Now()
	if err := l.WaitDurable(lsn); err != nil {
		t.Fatal(err)
	}
	if l.Stats().Syncs != 1 { // the segment header's, at Open
		t.Fatalf("WaitDurable synced under SyncInterval: %+v", l.Stats())
	}
	if err := l.WaitSynced(lsn); err != nil {
		t.Fatal(err)
	}
	if l.DurableLSN() < lsn {
		t.Fatalf("DurableLSN %d < %d after WaitSynced", l.DurableLSN(), lsn)
	}
	if time.Since(start) < 10*time.Millisecond {
		t.Fatalf("WaitSynced returned before the interval")
	}
	<-done
	if _, err := l.Append([]byte("c")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	<-done
	if len(synced) != 2 || synced[0] != 2 || synced[1] != 3 {
		t.Fatalf("OnSync calls %v", synced)
	}
}
