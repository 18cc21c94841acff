package wal

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// scanned is one record a Scan visited.
type scanned struct {
	pos     Position
	payload []byte
}

func scanAll(t testing.TB, dir string, opts ScanOptions) (*ScanResult, []scanned, error) {
	t.Helper()
	var out []scanned
	res, err := Scan(dir, opts, func(pos Position, p []byte) error {
		out = append(out, scanned{pos, slices.Clone(p)})
		return nil
	})
	if res == nil {
		t.Fatalf("Scan returned a nil result (err %v)", err)
	}
	return res, out, err
}

// TestScanAgreesWithLog: Scan visits exactly the records the log holds,
// at the positions where they lie, describes every segment, reports the
// torn tail without touching it, and skips what From says.
func TestScanAgreesWithLog(t *testing.T) {
	const n = 200
	fs := buildLog(t, n, 512)
	files := segFiles(t, fs)
	lastName := files[len(files)-1]
	last, _ := fs.ReadFile(lastName)
	tornAt := int64(len(last))
	torn := append(bytes.Clone(last), AppendRecord(nil, n+1, []byte("cut short"))[:20]...)
	fs = withFile(t, fs, lastName, torn)
	before := snapshot(t, fs)

	res, recs, err := scanAll(t, testDir, ScanOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("visited %d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		lsn := uint64(i + 1)
		if r.pos.LSN != lsn || !bytes.Equal(r.payload, payloadFor(0, lsn)) {
			t.Fatalf("record %d: %+v", i, r.pos)
		}
		b, _ := fs.ReadFile(filepath.Join(testDir, r.pos.Segment))
		enc := AppendRecord(nil, lsn, r.payload)
		if r.pos.Offset < SegmentHeaderSize || !bytes.Equal(b[r.pos.Offset:r.pos.Offset+int64(len(enc))], enc) {
			t.Fatalf("record %d is not at %s offset %d", lsn, r.pos.Segment, r.pos.Offset)
		}
	}
	if len(res.Segments) != len(files) || res.Next != n+1 || len(res.Problems) != 0 || len(res.Tmp) != 0 {
		t.Fatalf("result: %d segments for %d files, next %d, problems %v, tmp %v", len(res.Segments), len(files), res.Next, res.Problems, res.Tmp)
	}
	total := 0
	for i, s := range res.Segments {
		b, _ := fs.ReadFile(files[i])
		if s.Name != filepath.Base(files[i]) || s.Size != int64(len(b)) || s.Header.Version != SegmentVersion ||
			s.Header.Size != SegmentHeaderSize || s.Header.FirstLSN != s.FirstLSN || s.Vanished || s.Skipped {
			t.Fatalf("segment %d: %+v", i, s)
		}
		if s.Records == 0 || s.First != s.FirstLSN || s.Last != s.First+uint64(s.Records)-1 {
			t.Fatalf("segment %d: %+v", i, s)
		}
		if (s.Tail != nil) != (i == len(files)-1) {
			t.Fatalf("segment %d: tail %+v", i, s.Tail)
		}
		total += s.Records
	}
	if total != n {
		t.Fatalf("segments count %d records", total)
	}
	tail := res.Segments[len(files)-1].Tail
	if tail.Offset != tornAt || !strings.Contains(tail.Reason, "cut short") {
		t.Fatalf("tail %+v, want offset %d", tail, tornAt)
	}
	if after := snapshot(t, fs); !maps.Equal(before, after) {
		t.Fatalf("Scan changed the files")
	}

	// From skips the segments wholly below it, and the records below it.
	const from = 100
	res, recs, err = scanAll(t, testDir, ScanOptions{FS: fs, From: from})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n-from+1 || recs[0].pos.LSN != from {
		t.Fatalf("From %d: %d records from %d", from, len(recs), recs[0].pos.LSN)
	}
	for i, s := range res.Segments {
		wholly := i+1 < len(files) && res.Segments[i+1].FirstLSN <= from
		if s.Skipped != wholly || (s.Skipped && (s.Size != 0 || s.Records != 0)) {
			t.Fatalf("From %d: segment %d: %+v", from, i, s)
		}
	}
	if !res.Segments[0].Skipped || res.Next != n+1 {
		t.Fatalf("From %d: first segment %+v, next %d", from, res.Segments[0], res.Next)
	}
}

// TestScanEmpty: a missing directory is an empty log; a log of one empty
// segment says where it starts.
func TestScanEmpty(t *testing.T) {
	res, recs, err := scanAll(t, "/nowhere", ScanOptions{FS: NewMemFS()})
	if err != nil || len(recs) != 0 || len(res.Segments) != 0 || res.Next != 0 {
		t.Fatalf("missing dir: %+v, %v", res, err)
	}
	res, _, err = scanAll(t, filepath.Join(t.TempDir(), "missing"), ScanOptions{}) // OSFS
	if err != nil || len(res.Segments) != 0 {
		t.Fatalf("missing OS dir: %+v, %v", res, err)
	}
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	if err := l.SetNextLSN(42); err != nil {
		t.Fatal(err)
	}
	l.Close()
	res, recs, err = scanAll(t, testDir, ScanOptions{FS: fs})
	if err != nil || len(recs) != 0 || len(res.Segments) != 1 || res.Next != 42 || res.Segments[0].First != 0 {
		t.Fatalf("empty log at 42: %+v, %v", res, err)
	}
}

// TestScanOSFS runs Scan with its default file system on a log the Log
// wrote to disk.
func TestScanOSFS(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{SegmentSize: 1024, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 50; i++ {
		l.Append(payloadFor(3, i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, SegmentName(51)+".tmp"), []byte("FSW"), 0o644)
	os.WriteFile(filepath.Join(dir, "unrelated.tmp"), nil, 0o644)
	res, recs, err := scanAll(t, dir, ScanOptions{From: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 41 || recs[0].pos.LSN != 10 || res.Next != 51 {
		t.Fatalf("%d records from %d, next %d", len(recs), recs[0].pos.LSN, res.Next)
	}
	if !slices.Equal(res.Tmp, []string{SegmentName(51) + ".tmp"}) {
		t.Fatalf("Tmp = %v", res.Tmp)
	}
}

// TestScanVisitError: an error from visit stops the scan and comes back as
// is, with the result so far.
func TestScanVisitError(t *testing.T) {
	fs := buildLog(t, 40, 512)
	stop := errors.New("enough")
	n := 0
	res, err := Scan(testDir, ScanOptions{FS: fs}, func(pos Position, _ []byte) error {
		n++
		if pos.LSN == 25 {
			return stop
		}
		return nil
	})
	if err != stop || n != 25 || res == nil || len(res.Segments) == 0 || res.Next != 26 {
		t.Fatalf("err %v after %d records, result %+v", err, n, res)
	}
}

// corruptCase is a damaged copy of a log and the problem Open and Scan
// must report for it.
type corruptCase struct {
	name    string
	fs      *MemFS
	storeID uint64
	want    CorruptError // Reason is a substring
}

// corruptCases builds one damaged log per kind of corruption, from a log
// of 40 records in several segments written with store ID 1.
func corruptCases(t *testing.T) []corruptCase {
	t.Helper()
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{SegmentSize: 512, StoreID: 1})
	for i := uint64(1); i <= 40; i++ {
		l.Append(payloadFor(0, i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := segFiles(t, fs)
	if len(files) < 4 {
		t.Fatalf("want >= 4 segments, got %d", len(files))
	}
	base := func(i int) string { return filepath.Base(files[i]) }
	read := func(i int) []byte { b, _ := fs.ReadFile(files[i]); return b }
	last := len(files) - 1
	var cases []corruptCase
	add := func(name string, i int, data []byte, storeID uint64, off int64, lsn uint64, reason string) {
		cases = append(cases, corruptCase{name, withFile(t, fs, files[i], data), storeID,
			CorruptError{Segment: base(i), Offset: off, LSN: lsn, Reason: reason}})
	}

	b := read(last)
	offs := recordOffsets(t, b)
	if len(offs) < 3 {
		t.Fatalf("last segment holds %d records", len(offs))
	}
	flipped := bytes.Clone(b)
	flipped[offs[0]+RecordHeaderSize] ^= 1
	add("invalid then valid", last, flipped, 1, offs[0], 0, "followed by a valid record")

	b = read(1)
	offs = recordOffsets(t, b)
	add("torn non-last", 1, b[:offs[len(offs)-1]+5], 1, offs[len(offs)-1], 0, "not the last")

	b = bytes.Clone(read(2))
	b[3] = 'x'
	add("bad magic", 2, b, 1, 0, 0, "bad magic")

	b = read(2)
	add("name mismatch", 2, append(AppendSegmentHeader(nil, 999, 1), b[SegmentHeaderSize:]...), 1, 0, 0, "file name says")

	b = read(2)
	add("other store", 2, append(AppendSegmentHeader(nil, leUint64(b[12:]), 2), b[SegmentHeaderSize:]...), 1, 0, 0, "belongs to store 0x2, want 0x1")

	b = read(last)
	wrong := AppendRecord(bytes.Clone(b), 77, []byte("skips ahead"))
	add("wrong LSN", last, wrong, 1, int64(len(b)), 77, "record has LSN 77, want 41")

	c := fs.Kill()
	c.Remove(files[2])
	first3, _ := ParseSegmentName(base(3))
	cases = append(cases, corruptCase{"gap", c, 1, CorruptError{Segment: base(3), LSN: first3, Reason: "LSN gap"}})
	return cases
}

// TestCorruptionIsTyped: every kind of corruption reaches Open and Scan as
// a *CorruptError saying where and what.
func TestCorruptionIsTyped(t *testing.T) {
	for _, tc := range corruptCases(t) {
		check := func(who string, err error) {
			t.Helper()
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: %s: err %v, want a *CorruptError", tc.name, who, err)
				return
			}
			w := tc.want
			if ce.Segment != w.Segment || ce.Offset != w.Offset || ce.LSN != w.LSN || !strings.Contains(ce.Reason, w.Reason) {
				t.Errorf("%s: %s: %+v, want %+v", tc.name, who, *ce, w)
			}
			if want := "wal: segment " + w.Segment + " offset " + itoa(w.Offset) + ": "; !strings.HasPrefix(ce.Error(), want) {
				t.Errorf("%s: %s: %q does not start with %q", tc.name, who, ce.Error(), want)
			}
		}
		_, err := Open(testDir, Options{FS: tc.fs, StoreID: tc.storeID, Logger: quiet})
		check("Open", err)
		_, err = Scan(testDir, ScanOptions{FS: tc.fs, StoreID: tc.storeID}, nil)
		check("Scan", err)
		res, err := Scan(testDir, ScanOptions{FS: tc.fs, StoreID: tc.storeID, KeepGoing: true}, nil)
		if err != nil || len(res.Problems) == 0 {
			t.Errorf("%s: KeepGoing: %v, problems %v", tc.name, err, res.Problems)
			continue
		}
		check("Scan KeepGoing", res.Problems[0])
	}
}

// TestStoreIDChecks: the store ID check applies to version-2 headers with a
// non-zero ID only, and only when asked for.
func TestStoreIDChecks(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{SegmentSize: 512, StoreID: 0xabc})
	for i := uint64(1); i <= 30; i++ {
		l.Append(payloadFor(0, i))
	}
	l.Close()
	for _, f := range segFiles(t, fs) {
		b, _ := fs.ReadFile(f)
		if h, err := ParseSegmentHeader(b); err != nil || h.StoreID != 0xabc {
			t.Fatalf("%s: header %+v, %v; want store ID 0xabc", f, h, err)
		}
	}
	for id, ok := range map[uint64]bool{0: true, 0xabc: true, 0xabd: false} {
		_, err := Scan(testDir, ScanOptions{FS: fs, StoreID: id}, nil)
		if ok != (err == nil) || !ok && !strings.Contains(err.Error(), "belongs to store 0xabc, want 0xabd") {
			t.Errorf("Scan with StoreID %#x: %v", id, err)
		}
		l, err := Open(testDir, Options{FS: fs, StoreID: id, Logger: quiet})
		if ok != (err == nil) || !ok && !errors.Is(err, ErrCorrupt) {
			t.Errorf("Open with StoreID %#x: %v", id, err)
		}
		if err == nil {
			l.Close()
		}
	}
	// Segments without an ID (version 1, or version 2 with ID 0) belong to
	// any store.
	fs = NewMemFS()
	l = mustOpen(t, fs, Options{})
	l.Append([]byte("no id"))
	l.Close()
	fs.WriteFile(filepath.Join(testDir, SegmentName(2)), append(appendSegmentHeaderV1(nil, 2), AppendRecord(nil, 2, []byte("v1"))...))
	if _, err := Scan(testDir, ScanOptions{FS: fs, StoreID: 7}, nil); err != nil {
		t.Fatalf("segments without an ID: %v", err)
	}
}

// TestScanKeepGoing records every problem, resumes after each, and still
// visits every record that checks out.
func TestScanKeepGoing(t *testing.T) {
	fs := buildLog(t, 60, 512)
	files := segFiles(t, fs)
	if len(files) < 5 {
		t.Fatalf("want >= 5 segments, got %d", len(files))
	}
	c := fs.Kill()
	// Segment 0: a flipped byte in a record followed by valid ones.
	b, _ := c.ReadFile(files[0])
	offs := recordOffsets(t, b)
	b[offs[1]+RecordHeaderSize] ^= 1
	c.WriteFile(files[0], b)
	badLSN := leUint64(b[offs[1]+8:])
	// Segment 2: a bad header.
	b, _ = c.ReadFile(files[2])
	b[0] = 'X'
	c.WriteFile(files[2], b)
	seg2 := segRange(t, fs, files[2])
	// The last segment: a torn tail, which is no problem.
	b, _ = c.ReadFile(files[len(files)-1])
	c.WriteFile(files[len(files)-1], append(b, 1, 2, 3))

	_, err := Scan(testDir, ScanOptions{FS: c}, nil)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Segment != filepath.Base(files[0]) || ce.Offset != offs[1] {
		t.Fatalf("without KeepGoing: %v", err)
	}
	res, recs, err := scanAll(t, testDir, ScanOptions{FS: c, KeepGoing: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 2 || res.Problems[0].Segment != filepath.Base(files[0]) || res.Problems[0].Offset != offs[1] ||
		res.Problems[1].Segment != filepath.Base(files[2]) || res.Problems[1].Offset != 0 {
		t.Fatalf("problems %v", res.Problems)
	}
	var want []uint64
	for lsn := uint64(1); lsn <= 60; lsn++ {
		if lsn != badLSN && (lsn < seg2[0] || lsn > seg2[1]) {
			want = append(want, lsn)
		}
	}
	var got []uint64
	for _, r := range recs {
		got = append(got, r.pos.LSN)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("visited %v,\nwant %v", got, want)
	}
	if res.Segments[2].Header != (SegmentHeader{}) || res.Segments[2].Records != 0 {
		t.Fatalf("bad header segment: %+v", res.Segments[2])
	}
	if res.Segments[len(files)-1].Tail == nil || res.Next != 61 {
		t.Fatalf("tail %v, next %d", res.Segments[len(files)-1].Tail, res.Next)
	}
}

// segRange returns the first and last LSN in the segment file name of fs.
func segRange(t *testing.T, fs *MemFS, name string) [2]uint64 {
	t.Helper()
	b, _ := fs.ReadFile(name)
	offs := recordOffsets(t, b)
	return [2]uint64{leUint64(b[offs[0]+8:]), leUint64(b[offs[len(offs)-1]+8:])}
}

// TestScanLive: with Live, a segment deleted between the listing and its
// read is recorded and skipped; without, it is an error (not corruption).
func TestScanLive(t *testing.T) {
	fs := buildLog(t, 40, 512)
	files := segFiles(t, fs)
	for _, live := range []bool{false, true} {
		c := fs.Kill()
		c.SetInjector(func(op Op, name string) error {
			if op == OpOpen && name == files[0] {
				c.Remove(name) // a checkpoint's TruncateBefore, just now
			}
			return nil
		})
		res, recs, err := scanAll(t, testDir, ScanOptions{FS: c, Live: live})
		if !live {
			if !errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("not live: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !res.Segments[0].Vanished || res.Segments[1].Vanished || len(res.Segments) != len(files) {
			t.Fatalf("segments %+v", res.Segments)
		}
		if recs[0].pos.LSN != res.Segments[1].FirstLSN || recs[len(recs)-1].pos.LSN != 40 || res.Next != 41 {
			t.Fatalf("visited %d..%d, next %d", recs[0].pos.LSN, recs[len(recs)-1].pos.LSN, res.Next)
		}
	}
}

// TestScanLiveWithWriter scans while a Log appends, rotates and truncates:
// every scan succeeds and visits a contiguous run of records, except for
// gaps where a segment vanished.
func TestScanLiveWithWriter(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{SegmentSize: 600})
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for i := uint64(1); i <= 1500; i++ {
			if _, err := l.Append(payloadFor(0, i)); err != nil {
				t.Error(err)
				return
			}
			if i%7 == 0 {
				l.WaitDurable(i)
			}
			if i%50 == 0 {
				l.TruncateBefore(i - 20)
			}
		}
	})
	scans, vanished := 0, 0
	for running := true; running; scans++ {
		select {
		case <-done:
			running = false
		default:
		}
		var lsns []uint64
		res, err := Scan(testDir, ScanOptions{FS: fs, Live: true}, func(pos Position, p []byte) error {
			if !bytes.Equal(p, payloadFor(0, pos.LSN)) {
				t.Errorf("LSN %d: wrong payload", pos.LSN)
			}
			lsns = append(lsns, pos.LSN)
			return nil
		})
		if err != nil {
			t.Fatalf("scan %d: %v", scans, err)
		}
		for i := 1; i < len(lsns); i++ {
			if lsns[i] == lsns[i-1]+1 {
				continue
			}
			explained := slices.ContainsFunc(res.Segments, func(s SegmentInfo) bool {
				return s.Vanished && lsns[i-1] < s.FirstLSN && s.FirstLSN <= lsns[i]
			})
			if !explained || lsns[i] < lsns[i-1] {
				t.Fatalf("scan %d: LSN %d after %d, and no segment vanished between", scans, lsns[i], lsns[i-1])
			}
		}
		for _, s := range res.Segments {
			if s.Vanished {
				vanished++
			}
		}
	}
	wg.Wait()
	l.Close()
	t.Logf("%d live scans, %d vanished segments", scans, vanished)
}

// boundedFS records the largest single read from its files.
type boundedFS struct {
	FS
	mu      sync.Mutex
	maxRead int
}

func (b *boundedFS) Open(name string) (File, error) {
	f, err := b.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &boundedFile{File: f, fs: b}, nil
}

func (b *boundedFS) note(n int) {
	b.mu.Lock()
	b.maxRead = max(b.maxRead, n)
	b.mu.Unlock()
}

type boundedFile struct {
	File
	fs *boundedFS
}

func (f *boundedFile) Read(p []byte) (int, error) { f.fs.note(len(p)); return f.File.Read(p) }

func (f *boundedFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.note(len(p))
	return f.File.ReadAt(p, off)
}

var _ io.ReaderAt = (*boundedFile)(nil)

// TestScanBoundedMemory: Scan and Open read a big segment through a small
// buffer, not whole; only the look-ahead after an invalid record reads the
// rest of the segment.
func TestScanBoundedMemory(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, fs, Options{})
	p := make([]byte, 4096)
	for range 1024 { // one 4 MiB segment
		l.Append(p)
	}
	l.Close()
	name := segFiles(t, fs)[0]
	b, _ := fs.ReadFile(name)
	fs.WriteFile(name, append(b, 9, 9, 9, 9, 9)) // a torn tail
	bfs := &boundedFS{FS: fs}
	if res, err := Scan(testDir, ScanOptions{FS: bfs}, nil); err != nil || res.Next != 1025 {
		t.Fatalf("Scan: %v, %+v", err, res)
	}
	l = mustOpen(t, bfs, Options{})
	l.Close()
	if bfs.maxRead > 256<<10 {
		t.Fatalf("largest read %d bytes of a %d-byte segment", bfs.maxRead, len(b))
	}
}
