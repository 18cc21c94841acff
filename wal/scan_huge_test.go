package wal

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"

	"fmt"

	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"

	"strings"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/racedetect"
)

// hugeChildEnv names the directory the child of TestScanHugeSparseTail
// scans.
const hugeChildEnv = "WAL_HUGE_SPARSE_DIR"

// TestScanHugeSparseTail: the last segment extended, sparse, to 64 GiB
// (`truncate -s 64G`, or a file system that lost the size of a file). The
// zeros after the records are the torn tail: Scan and Open must say so,
// with bounded memory and in seconds, not read 64 GiB into memory (which
// killed the process with "fatal error: runtime: out of memory"). The scan
// runs in a child process, since a fatal error cannot be recovered; the
// child watches its own heap and stops itself at 1 GiB.
func TestScanHugeSparseTail(t *testing.T) {
	if os.Getenv(hugeChildEnv) != "" {
		return
	}
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := l.Append(payloadFor(1, uint64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(segs) == 0 {
		t.Fatal("no segment")
	}
	last := segs[len(segs)-1]
	fi, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, 64<<30); err != nil {
		t.Skipf("cannot make a 64 GiB sparse file here: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestScanHugeSparseTailChild$", "-test.v", "-test.count=1")
	c.Env = append(os.Environ(), hugeChildEnv+"="+dir, fmt.Sprintf("WAL_HUGE_SPARSE_DATA=%d", fi.Size()))
	start := time.Now()
	out, err := c.CombinedOutput()
	took := time.Since(start)
	o := string(out)
	if i := strings.Index(o, "\ngoroutine "); i > 0 {
		// The runtime's stack, then only this package's frames.
		var frames []string
		for _, line := range strings.Split(o[i:], "\n") {
			if strings.Contains(line, "/wal.") {
				frames = append(frames, line)
			}
		}
		o = o[:i] + "\n...\n" + strings.Join(frames, "\n")
	}
	if err != nil || !strings.Contains(o, "child: ok") {
		t.Fatalf("scan of a 64 GiB sparse last segment, in a child process (%v): %v\n%s", took.Round(time.Millisecond), err, o)
	}
	t.Logf("child took %v:\n%s", took.Round(time.Millisecond), o)
}

func TestScanHugeSparseTailChild(t *testing.T) {
	dir := os.Getenv(hugeChildEnv)
	if dir == "" {
		t.Skip("child of TestScanHugeSparseTail only")
	}
	var dataSize int64
	fmt.Sscan(os.Getenv("WAL_HUGE_SPARSE_DATA"), &dataSize)

	// A watchdog: the heap of this process must stay far below the size
	// of the segment (and of the machine).
	const heapLimit = 1 << 30
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > heapLimit {
				fmt.Printf("child: heap reached %d bytes, over the %d-byte limit\n", v, heapLimit)
				os.Exit(3)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()

	for _, opts := range []ScanOptions{{}, {Live: true}, {KeepGoing: true}} {
		res, err := Scan(dir, opts, nil)
		if err != nil {
			t.Fatalf("Scan %+v: %v", opts, err)
		}
		tail := res.Segments[len(res.Segments)-1].Tail
		if res.Next != 101 || tail == nil || !tail.Zero || tail.Offset != dataSize {
			t.Fatalf("Scan %+v: next %d, tail %+v; want next 101 and a zero tail at offset %d", opts, res.Next, tail, dataSize)
		}
	}
	// The writer's Open: the zeros are the torn tail, which it truncates.
	l, err := Open(dir, Options{Logger: quiet})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if next := l.LastLSN() + 1; next != 101 {
		t.Fatalf("Open: next LSN %d, want 101", next)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	took := time.Since(start)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	fmt.Printf("child: 3 scans and an Open of a 64 GiB sparse segment: %v, %d MiB allocated in all\n", took.Round(time.Millisecond), alloc>>20)
	if alloc > 512<<20 {
		t.Fatalf("allocated %d bytes in all", alloc)
	}
	if took > time.Minute {
		t.Fatalf("took %v", took)
	}
	fmt.Println("child: ok")
}

// bytesFile is a File holding b: enough for findValidAfter, which only
// reads.
type bytesFile struct {
	File
	r *bytes.Reader
}

func newBytesFile(b []byte) bytesFile { return bytesFile{r: bytes.NewReader(b)} }

func (f bytesFile) ReadAt(p []byte, off int64) (int, error) { return f.r.ReadAt(p, off) }

// findValidAfterWhole is findValidAfter as it was before it read through a
// window: all the bytes after off at once. The tests check that the
// window, and the skipping of holes, change nothing it finds.
func findValidAfterWhole(f File, off, size int64, expect uint64) (after, error) {
	b := make([]byte, max(size-off, 0))
	n, err := f.ReadAt(b, off)
	if err != nil && err != io.EOF {
		return after{}, err
	}
	b = b[:n]
	if allZeros(b) {
		return after{zero: true}, nil
	}
	if len(b) <= RecordHeaderSize {
		return after{}, nil
	}
	p, lsn, ok := FindValidRecord(b, 1, expect)
	if !ok {
		return after{}, nil
	}
	hole := zeroHole(b[:p], off) || headerCutByPage(b[:p], off, expect, lsn)
	return after{at: off + p, lsn: lsn, found: true, hole: hole}, nil
}

// writeSparse writes b to a new file in dir, leaving every all-zero 4 KiB
// block of it a hole, and opens it with OSFS.
func writeSparse(t testing.TB, dir string, b []byte) File {
	t.Helper()
	name := filepath.Join(dir, fmt.Sprintf("sparse-%d", rand.Int64()))
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	for p := 0; p < len(b); p += holePage {
		blk := b[p:min(p+holePage, len(b))]
		if allZeros(blk) {
			continue
		}
		if _, err := f.WriteAt(blk, int64(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	of, err := OSFS{}.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { of.Close(); os.Remove(name) })
	return of
}

// randomTail returns bytes that may follow an invalid record: garbage,
// runs of zeros (pages of them too), records with LSNs about expect,
// damaged or cut short, of at most maxRec bytes each.
func randomTail(r *rand.Rand, expect uint64, maxRec int) []byte {
	n := r.IntN(6 * holePage)
	var b []byte
	record := func() []byte {
		lsn := max(expect+uint64(r.IntN(5)), 3) - 2
		p := make([]byte, r.IntN(maxRec-RecordHeaderSize+1))
		if r.IntN(2) == 0 {
			for i := range p {
				p[i] = byte(r.Uint32())
			}
		}
		return AppendRecord(nil, lsn, p)
	}
	for len(b) < n {
		switch r.IntN(6) {
		case 0: // garbage
			for range r.IntN(300) + 1 {
				b = append(b, byte(r.Uint32()))
			}
		case 1: // zeros
			b = append(b, make([]byte, r.IntN(3*holePage)+1)...)
		case 2, 3: // a record
			b = append(b, record()...)
		case 4: // a damaged record
			rec := record()
			rec[r.IntN(len(rec))] ^= byte(r.IntN(255) + 1)
			b = append(b, rec...)
		case 5: // a record cut short
			rec := record()
			b = append(b, rec[:r.IntN(len(rec))]...)
		}
	}
	return b
}

// TestFindValidAfterSmallWindows: with small windows, so that a few pages
// of bytes take many of them, the window finds what reading all the bytes
// at once finds, in memory and in a sparse file on disk whose pages of
// zeros are holes.
func TestFindValidAfterSmallWindows(t *testing.T) {
	dir := t.TempDir()
	n := 3000
	if testing.Short() {
		n = 500
	}
	r := rand.New(rand.NewPCG(1, 2))
	found, holes := 0, 0
	for i := range n {
		// 1<<56: a record whose LSN has only its last byte nonzero.
		expect := []uint64{0, 1, 5, 1000, 1 << 56}[r.IntN(5)]
		maxRec := RecordHeaderSize + r.IntN(600)
		off := int64(r.IntN(3 * holePage))
		if r.IntN(4) == 0 {
			off = int64(holePage - r.IntN(RecordHeaderSize+2)) // near a page boundary
		}
		b := make([]byte, off)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		if r.IntN(4) == 0 && expect > 0 {
			// The record at off with its first bytes, up to a page
			// boundary, zeros; the next record after it (headerCutByPage).
			off = holePage - int64(1+r.IntN(RecordHeaderSize-1))
			b = b[:0]
			b = append(b, make([]byte, off)...)
			b = AppendRecord(b, expect, make([]byte, r.IntN(maxRec-RecordHeaderSize+1)))
			clear(b[off:holePage])
			b = AppendRecord(b, expect+1, nil)
		}
		b = append(b, randomTail(r, expect, maxRec)...)
		size := int64(len(b))
		if r.IntN(4) == 0 {
			size = off + r.Int64N(size-off+1)
		}
		chunk := int64(r.IntN(3*holePage) + 1)
		want, err := findValidAfterWhole(newBytesFile(b), off, size, expect)
		if err != nil {
			t.Fatal(err)
		}
		if want.found {
			found++
			if want.hole {
				holes++
			}
		}
		files := []File{newBytesFile(b)}
		if i%2 == 0 {
			files = append(files, writeSparse(t, dir, b))
		}
		for _, f := range files {
			got, err := findValidAfterIn(f, off, size, expect, chunk, int64(maxRec))
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("case %d (%T): %d bytes after offset %d, expect %d, chunk %d, overlap %d: got %+v, want %+v",
					i, f, size-off, off, expect, chunk, maxRec, got, want)
			}
		}
	}
	t.Logf("%d cases: a record found in %d, after a page of zeros in %d", n, found, holes)
	if found < n/10 || holes < n/50 {
		t.Fatalf("%d cases: a record found in %d, after a page of zeros in %d: the cases test too little", n, found, holes)
	}
}

// TestFindValidAfterFullWindows: records of up to MaxRecordSize bytes
// across the edges of the real window, and zeros, in memory and in sparse
// files: what reading all the bytes at once finds.
func TestFindValidAfterFullWindows(t *testing.T) {
	if testing.Short() && racedetect.Enabled {
		t.Skip("reads hundreds of MiB; slow with -race")
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	garbage := func(n int64) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	const off = 4096 + 100
	big := make([]byte, MaxRecordSize)
	for i := range big {
		big[i] = byte(i*7 + i>>13)
	}
	type place struct {
		at      int64 // from off
		lsn     uint64
		payload []byte
	}
	type tc struct {
		name   string
		fill   func(n int64) []byte // the bytes after off
		n      int64
		places []place
		zeros  [][2]int64 // ranges from off cleared after placing
	}
	w := int64(scanChunk)
	cases := []tc{
		{name: "garbage, a record in the second window", fill: garbage, n: 40 << 20, places: []place{{w + 3, 7, []byte("x")}}},
		{name: "garbage, the first try of the second window", fill: garbage, n: 40 << 20, places: []place{{w + 1, 7, []byte("xy")}}},
		{name: "garbage, a largest record at the last try of the first window", fill: garbage, n: 40 << 20, places: []place{{w, 7, big}}},
		{name: "garbage, a largest record across the window", fill: garbage, n: 40 << 20, places: []place{{w - 1000, 7, big}}},
		{name: "garbage, a largest record ending the file", fill: garbage, n: 2*w + scanOverlap + 5, places: []place{{w + 5, 7, big}}},
		{name: "garbage, a record with a lower LSN before the one", fill: garbage, n: 40 << 20, places: []place{{1000, 3, []byte("old")}, {w + 77, 9, nil}}},
		{name: "garbage, a page of zeros in the second window, a record in the third", fill: garbage, n: 50 << 20,
			places: []place{{2*w + 5000, 7, []byte("z")}}, zeros: [][2]int64{{w + holePage, w + 3*holePage}}},
		{name: "garbage, a record in the third window, then a page of zeros", fill: garbage, n: 50 << 20,
			places: []place{{2*w + 5000, 7, []byte("z")}}, zeros: [][2]int64{{2*w + 3*holePage, 2*w + 5*holePage}}},
		{name: "garbage, nothing", fill: garbage, n: 40 << 20},
		{name: "zeros", fill: func(n int64) []byte { return make([]byte, n) }, n: 60 << 20},
		{name: "zeros, a byte at the end", fill: func(n int64) []byte { b := make([]byte, n); b[n-1] = 1; return b }, n: 60 << 20},
		{name: "zeros, a record far on", fill: func(n int64) []byte { return make([]byte, n) }, n: 60 << 20, places: []place{{45 << 20, 8, big[:1000]}}},
	}
	for _, c := range cases {
		b := append(garbage(off), c.fill(c.n)...)
		for _, p := range c.places {
			copy(b[off+p.at:], AppendRecord(nil, p.lsn, p.payload))
		}
		for _, z := range c.zeros {
			clear(b[off+z[0] : off+z[1]])
		}
		want, err := findValidAfterWhole(newBytesFile(b), off, int64(len(b)), 5)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []File{newBytesFile(b), writeSparse(t, dir, b)} {
			got, err := findValidAfter(f, off, int64(len(b)), 5)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s (%T): got %+v, want %+v", c.name, f, got, want)
			}
		}
		t.Logf("%s: %+v", c.name, want)
	}
}

// TestFindValidAfterPastHugeHoles: records after holes of gigabytes in a
// sparse last segment are still found, and where they are found is
// corruption or a torn tail as before (here a torn tail: the hole is a
// page of zeros); the bytes of a record that lie in a hole count as zeros.
func TestFindValidAfterPastHugeHoles(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "seg")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writeAt := func(b []byte, at int64) {
		t.Helper()
		if _, err := f.WriteAt(b, at); err != nil {
			t.Fatal(err)
		}
	}
	const off = 8192 + 33
	writeAt([]byte("garbage, not a record"), off)
	// A largest record at 5 GiB + 7 whose payload is zeros after its first
	// byte: only its first block is data, the rest of it a hole.
	payload := make([]byte, MaxRecordSize)
	payload[0] = 1
	far := int64(5<<30) + 7
	rec := AppendRecord(nil, 12, payload)
	writeAt(rec[:RecordHeaderSize+1], far)
	size := far + int64(len(rec)) + 3<<30
	if err := f.Truncate(size); err != nil {
		t.Skipf("cannot make a %d-byte sparse file here: %v", size, err)
	}
	of, err := OSFS{}.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer of.Close()
	start := time.Now()
	got, err := findValidAfter(of, off, size, 10)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if want := (after{at: far, lsn: 12, found: true, hole: true}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// Damage the record: nothing valid after the garbage.
	writeAt([]byte{2}, far+RecordHeaderSize)
	got, err = findValidAfter(of, off, size, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got != (after{}) {
		t.Fatalf("damaged: got %+v, want nothing found", got)
	}
	t.Logf("%d GiB, sparse: %v", size>>30, took)
	if took > 30*time.Second {
		t.Fatalf("took %v", took)
	}
	if runtime.GOOS != "linux" {
		return
	}
	// The same, through Scan: a segment of records, garbage, and a valid
	// record past a hole of gigabytes.
	sdir := t.TempDir()
	l, err := Open(sdir, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := l.Append(payloadFor(1, uint64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(sdir, "*.log"))
	seg := segs[len(segs)-1]
	sf, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := sf.Stat()
	end := fi.Size()
	if _, err := sf.WriteAt([]byte{0xff, 0xff, 0xff, 0xff, 9, 9, 9}, end); err != nil {
		t.Fatal(err)
	}
	if _, err := sf.WriteAt(AppendRecord(nil, 11, []byte("far")), 3<<30+holePage+1); err != nil {
		t.Fatal(err)
	}
	sf.Close()
	res, err := Scan(sdir, ScanOptions{}, nil)
	tail := res.Segments[len(res.Segments)-1].Tail
	if err != nil || tail == nil || tail.Offset != end || !strings.Contains(tail.Reason, fmt.Sprintf("record at offset %d (LSN 11)", 3<<30+holePage+1)) {
		t.Fatalf("Scan: %v, tail %+v; want a torn tail at %d naming the record past the hole", err, tail, end)
	}
	var visited []int64
	_, err = Scan(sdir, ScanOptions{KeepGoing: true}, func(pos Position, _ []byte) error {
		visited = append(visited, pos.Offset)
		return nil
	})
	if err != nil || len(visited) != 10 {
		t.Fatalf("Scan, KeepGoing: %v, %d records visited", err, len(visited))
	}
}

// TestWrittenSinceFar: writtenSince checks the records between a torn
// point and a valid record one at a time, also when they span many
// megabytes.
func TestWrittenSinceFar(t *testing.T) {
	var b []byte
	for lsn := uint64(5); lsn < 12; lsn++ {
		b = AppendRecord(b, lsn, bytes.Repeat([]byte{byte(lsn)}, 3<<20))
	}
	q := int64(len(b))
	b = AppendRecord(b, 12, []byte("last"))
	sc := &scanner{expect: 5}
	if !sc.writtenSince(newBytesFile(b), 0, q, 12) {
		t.Fatal("records 5 to 11, then 12: not seen as written")
	}
	b[q/2] ^= 1
	if sc.writtenSince(newBytesFile(b), 0, q, 12) {
		t.Fatal("a damaged record between: seen as written")
	}
	b[q/2] ^= 1
	if sc.writtenSince(newBytesFile(b), 0, q-1, 12) || sc.writtenSince(newBytesFile(b), 0, q, 13) {
		t.Fatal("records that do not end at q, or one missing: seen as written")
	}
}

// TestNextNonZero: nextNonZero against a byte at a time.
func TestNextNonZero(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		b := make([]byte, r.IntN(3*holePage))
		for range r.IntN(4) {
			if len(b) > 0 {
				b[r.IntN(len(b))] = byte(r.IntN(255) + 1)
			}
		}
		i := int64(r.IntN(len(b) + 1))
		want := i
		for want < int64(len(b)) && b[want] == 0 {
			want++
		}
		if got := nextNonZero(b, i); got != want {
			t.Fatalf("nextNonZero(%d bytes, %d) = %d, want %d", len(b), i, got, want)
		}
	}
}

// TestFirstValid: firstValid, which goes over zeros, finds what
// FindValidRecord finds trying every offset, also records whose LSN has
// only its last byte nonzero, right after zeros.
func TestFirstValid(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 3000 {
		expect := []uint64{1, 5, 1 << 56, 3 << 56}[r.IntN(4)]
		var b []byte
		for len(b) < 600 {
			switch r.IntN(4) {
			case 0:
				b = append(b, make([]byte, r.IntN(40))...)
			case 1:
				b = append(b, byte(r.IntN(256)))
			default:
				p := make([]byte, r.IntN(20))
				if r.IntN(2) == 0 && len(p) > 0 {
					p[r.IntN(len(p))] = 1
				}
				rec := AppendRecord(nil, expect+uint64(r.IntN(3)), p)
				if r.IntN(3) == 0 {
					rec[r.IntN(len(rec))] ^= 1
				}
				b = append(b, rec...)
			}
		}
		lo, hi := expect, expect+uint64(len(b))/RecordHeaderSize
		from := int64(r.IntN(20))
		wantAt, wantLSN, wantOK := FindValidRecord(b, from, expect)
		gotAt, gotLSN, gotOK := firstValid(b, from, int64(len(b)-RecordHeaderSize), lo, hi)
		if gotAt != wantAt || gotLSN != wantLSN || gotOK != wantOK {
			t.Fatalf("case %d: firstValid = %d, %d, %v; FindValidRecord = %d, %d, %v", i, gotAt, gotLSN, gotOK, wantAt, wantLSN, wantOK)
		}
	}
}

// TestFindValidAfterHoleEdges: holes where the page zeroHole accepts
// begins or ends, in a sparse file: the first page after the invalid
// record too short (fewer bytes than a record header) to count, a hole of
// one page, of two, and records right after them.
func TestFindValidAfterHoleEdges(t *testing.T) {
	dir := t.TempDir()
	for _, off := range []int64{holePage - 3, holePage - 15, holePage - 16, holePage - 17, holePage + 5, 2 * holePage} {
		for _, pages := range []int64{0, 1, 2, 3} {
			for _, gap := range []int64{0, 1, 15, 16, 100} {
				for _, before := range []byte{7, 0} {
					// Garbage (or zeros) before off; at off an invalid
					// record, its bytes zeros up to the page boundary; pages
					// of zeros (holes); then gap zero bytes and a valid
					// record.
					b := bytes.Repeat([]byte{before}, int(off))
					b = append(b, make([]byte, pageEnd(off)-off)...)
					b = append(b, make([]byte, pages*holePage+gap)...)
					b = AppendRecord(b, 1<<56, []byte("after"))
					want, _ := findValidAfterWhole(newBytesFile(b), off, int64(len(b)), 1<<56)
					for _, f := range []File{newBytesFile(b), writeSparse(t, dir, b)} {
						for _, chunk := range []int64{1, 7, holePage, scanChunk} {
							got, err := findValidAfterIn(f, off, int64(len(b)), 1<<56, chunk, 64)
							if err != nil {
								t.Fatal(err)
							}
							if got != want {
								t.Fatalf("off %d after %#x bytes, %d pages, gap %d, chunk %d (%T): got %+v, want %+v", off, before, pages, gap, chunk, f, got, want)
							}
						}
					}
				}
			}
		}
	}
}
