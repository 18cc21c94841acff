package wal

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
)

// This file holds the one reader of a log directory: Open validates the
// log with it, Replay reads records with it, and Scan exports it to the
// store's read-only open and to cmd/inspect, so that all of them apply the
// same checks.

// Position locates one record.
type Position struct {
	Segment string // base name
	Offset  int64  // offset of the record's first byte in the segment
	LSN     uint64
}

// ScanOptions configure Scan. The zero value reads the whole log through
// OSFS and stops at the first problem.
type ScanOptions struct {
	// FS is the file system. Default: OSFS{}.
	FS FS
	// From: records with LSN < From are checked but not passed to visit;
	// segments wholly below From (the next segment starts at or below
	// From) are skipped unread. Default 0: every record.
	From uint64
	// StoreID, if not 0, makes a version-2 segment header with another
	// non-zero store ID corruption ("belongs to store %#x, want %#x").
	// Version-1 headers, and version-2 headers with store ID 0, are
	// accepted. Default 0: no check.
	StoreID uint64
	// Live says a writer may be appending, rotating and deleting segments
	// meanwhile: a segment that disappears between the listing and its
	// read is recorded in SegmentInfo.Vanished and skipped, not an error.
	// The scan reads each segment up to the size it has when opened, and
	// sees the segments listed when it starts. A writer deletes a segment
	// only once a checkpoint made its records obsolete, oldest first, but
	// the scan may already have read older ones: a vanished segment can
	// leave a gap in the records visited, so a reader whose From predates
	// the writer's latest checkpoint should start over from that one.
	Live bool
	// KeepGoing records every problem in ScanResult.Problems and goes on
	// instead of returning the first problem as the error: after an
	// invalid record followed by a valid one it resumes at the valid one,
	// after a bad segment header it goes to the next segment, and after a
	// record with the wrong LSN it expects that record's LSN + 1. Records
	// are then visited in file order, which is LSN order except where a
	// problem says otherwise.
	KeepGoing bool
}

// SegmentInfo is what a scan learned about one segment file.
type SegmentInfo struct {
	Name        string
	FirstLSN    uint64        // from the file name
	Header      SegmentHeader // zero if it could not be parsed (or was not read)
	Size        int64         // bytes read
	Records     int           // valid records
	First, Last uint64        // LSNs of the first and last valid record; 0 if none
	Tail        *TornTail     // set if the (last) segment ends in a torn record
	Vanished    bool          // Live only: removed before it could be read
	Skipped     bool          // wholly below ScanOptions.From: not read
}

// TornTail describes the torn record that ends the last segment: the log
// ends before it, and the next Open truncates the segment at Offset.
type TornTail struct {
	Offset int64  // offset of the torn record's first byte
	Reason string // why it is not a valid record, e.g. "payload cut short after 3 of 10 bytes"
	// Zero says that every byte from Offset to the end is zero: most
	// often no record at all, but the space a writer reserves past its
	// last record (Allocator) and leaves behind unless it closes the
	// log; or the bytes of records a crash wrote none of.
	Zero bool
}

// ScanResult is what Scan learned about a log.
type ScanResult struct {
	Segments []SegmentInfo   // in LSN order
	Next     uint64          // LSN after the last valid record; 0 if the log holds no record and no segment says where it starts
	Problems []*CorruptError // KeepGoing only
	Tmp      []string        // names of leftover "<segment name>.tmp" files
}

// Scan reads the log in dir without changing anything and calls visit, if
// not nil, for every valid record with LSN >= From, in LSN order. The
// payload is only valid during the call. It checks what Open checks:
// segment headers (magic, version, CRC, first LSN = file name, store ID),
// LSNs increasing by exactly 1 within and across segments, an invalid
// record only as the torn tail of the last segment (an invalid record
// followed by a valid one — FindValidRecord — is corruption, as is any
// invalid record in a segment that is not the last). A missing dir is an
// empty log. An error returned by visit stops the scan and is returned as
// is; a problem found is returned as a *CorruptError unless KeepGoing. The
// result is never nil: on an error it describes what was read until then.
//
// Scan holds at most one segment file open and reads it through a small
// buffer; after an invalid record it reads the rest of that segment, in a
// window of at most 32 MiB and without reading the holes of a sparse
// file, to look for a valid record after it (findValidAfter).
func Scan(dir string, opts ScanOptions, visit func(pos Position, payload []byte) error) (*ScanResult, error) {
	fsys := opts.FS
	if fsys == nil {
		fsys = OSFS{}
	}
	res := &ScanResult{}
	segs, tmps, err := listLog(fsys, dir)
	if errors.Is(err, os.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("wal: scan %s: %w", dir, err)
	}
	res.Tmp = tmps
	sc := &scanner{fs: fsys, dir: dir, storeID: opts.StoreID, live: opts.Live, keepGoing: opts.KeepGoing}
	var lastValid uint64
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].first <= opts.From {
			res.Segments = append(res.Segments, SegmentInfo{Name: s.name, FirstLSN: s.first, Skipped: true})
			sc.expect = 0 // unread: the next segment may start anywhere
			continue
		}
		rule := tailCorrupt
		if i == len(segs)-1 {
			rule = tailTorn
		}
		var fn func(off int64, lsn uint64, payload []byte) error
		if visit != nil {
			fn = func(off int64, lsn uint64, payload []byte) error {
				if lsn < opts.From {
					return nil
				}
				return visit(Position{Segment: s.name, Offset: off, LSN: lsn}, payload)
			}
		}
		info, err := sc.segment(s.name, s.first, -1, rule, fn)
		res.Segments = append(res.Segments, info)
		if info.Last != 0 {
			lastValid = info.Last
		}
		if err != nil {
			res.Problems = sc.problems
			res.Next = sc.next(lastValid)
			return res, err
		}
	}
	res.Problems = sc.problems
	res.Next = sc.next(lastValid)
	return res, nil
}

// listLog returns the segments in dir, in LSN order and with size 0, and
// the names of the leftover temporary segment files.
func listLog(fsys FS, dir string) (segs []segment, tmps []string, err error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range names {
		if base, ok := strings.CutSuffix(name, tmpSuffix); ok {
			if _, ok := ParseSegmentName(base); ok {
				tmps = append(tmps, name)
			}
			continue
		}
		if first, ok := ParseSegmentName(name); ok {
			segs = append(segs, segment{first: first, name: name})
		}
	}
	slices.SortFunc(segs, func(a, b segment) int { return cmp.Compare(a.first, b.first) })
	return segs, tmps, nil
}

// tailRule says what an invalid record in a segment means.
type tailRule int

const (
	// tailCorrupt: a segment that is not the last. Segments are synced
	// before the next one is created, so an invalid record is corruption.
	tailCorrupt tailRule = iota
	// tailTorn: the last segment, which a crash can leave ending in a torn
	// record.
	tailTorn
	// tailWritten: bytes this Log wrote (Replay reads no further), so an
	// invalid record is corruption.
	tailWritten
)

// scanner carries the state of one scan from segment to segment. Open,
// Replay and Scan all read segments through its segment method.
type scanner struct {
	fs        FS
	dir       string
	storeID   uint64 // see ScanOptions.StoreID
	live      bool   // see ScanOptions.Live
	keepGoing bool   // see ScanOptions.KeepGoing

	expect   uint64 // LSN the next record must have; 0 if unknown
	problems []*CorruptError
}

// problem reports c: with keepGoing it records c and returns nil, so that
// the scan goes on; otherwise it returns c.
func (sc *scanner) problem(c *CorruptError) error {
	if sc.keepGoing {
		sc.problems = append(sc.problems, c)
		return nil
	}
	return c
}

// next returns the LSN after the log read so far: the LSN the next record
// must have, or else the one after the last valid record, or 0.
func (sc *scanner) next(lastValid uint64) uint64 {
	if sc.expect != 0 {
		return sc.expect
	}
	if lastValid != 0 {
		return lastValid + 1
	}
	return 0
}

// segment validates the segment file name, whose file name says it starts
// at LSN first, and calls visit, if not nil, for each valid record in
// order; an error from visit stops the scan and is returned as is. It reads
// at most limit bytes (all if limit < 0). The segment must start at
// sc.expect unless that is 0; on return sc.expect is the LSN the next
// segment must start at, or 0 if unknown. rule says whether the segment may
// end in a torn record, which is then reported in the result's Tail.
// Anything else that fails a check is a *CorruptError, returned or (with
// keepGoing) recorded.
func (sc *scanner) segment(name string, first uint64, limit int64, rule tailRule, visit func(off int64, lsn uint64, payload []byte) error) (SegmentInfo, error) {
	info := SegmentInfo{Name: name, FirstLSN: first}
	f, err := sc.fs.Open(filepath.Join(sc.dir, name))
	if err != nil {
		if sc.live && errors.Is(err, os.ErrNotExist) {
			info.Vanished = true
			sc.expect = 0
			return info, nil
		}
		return info, fmt.Errorf("wal: open segment %s: %w", name, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return info, fmt.Errorf("wal: stat segment %s: %w", name, err)
	}
	if limit >= 0 {
		if rule == tailWritten && size < limit {
			sc.expect = 0
			return info, sc.problem(&CorruptError{Segment: name, Offset: size,
				Reason: fmt.Sprintf("segment is %d bytes, but the log wrote %d", size, limit)})
		}
		size = min(size, limit)
	}
	info.Size = size

	// The header. After a bad one, the next segment may start anywhere.
	var hb [SegmentHeaderSize]byte
	n, err := f.ReadAt(hb[:min(int64(len(hb)), size)], 0)
	if err != nil && err != io.EOF {
		return info, fmt.Errorf("wal: read segment %s: %w", name, err)
	}
	h, reason := parseSegmentHeader(hb[:n])
	if reason != "" {
		sc.expect = 0
		return info, sc.problem(&CorruptError{Segment: name, Reason: reason})
	}
	info.Header = h
	if h.FirstLSN != first {
		sc.expect = 0
		return info, sc.problem(&CorruptError{Segment: name,
			Reason: fmt.Sprintf("header says first LSN %d, file name says %d", h.FirstLSN, first)})
	}
	if sc.storeID != 0 && h.StoreID != 0 && h.StoreID != sc.storeID {
		sc.expect = 0
		return info, sc.problem(&CorruptError{Segment: name,
			Reason: fmt.Sprintf("segment belongs to store %#x, want %#x", h.StoreID, sc.storeID)})
	}
	if sc.expect != 0 && h.FirstLSN != sc.expect {
		err := sc.problem(&CorruptError{Segment: name, LSN: h.FirstLSN,
			Reason: fmt.Sprintf("LSN gap: segment starts at LSN %d, previous segment ends at LSN %d", h.FirstLSN, sc.expect-1)})
		if err != nil {
			return info, err
		}
	}
	sc.expect = h.FirstLSN

	// The records, from pos on; after an invalid record followed by a
	// valid one, keepGoing resumes at the valid one.
	for pos := int64(h.Size); pos >= 0 && pos < size; {
		var err error
		pos, err = sc.records(f, &info, pos, size, rule, visit)
		if err != nil {
			return info, err
		}
	}
	return info, nil
}

// records reads the records of segment info.Name from offset pos to size,
// updating info and sc.expect and calling visit. It returns the offset to
// resume at after a problem (keepGoing only), or -1 when the segment is
// done.
func (sc *scanner) records(f File, info *SegmentInfo, pos, size int64, rule tailRule, visit func(off int64, lsn uint64, payload []byte) error) (int64, error) {
	name := info.Name
	body := size - pos
	rd := newReaderAt(bufio.NewReaderSize(io.NewSectionReader(f, pos, body), int(min(body, 256<<10))), pos)
	for {
		lsn, payload, err := rd.Next()
		if err == io.EOF {
			return -1, nil
		}
		if te, ok := isTorn(err); ok {
			return sc.invalid(f, info, te, size, rule)
		}
		if err != nil {
			return -1, fmt.Errorf("wal: read segment %s: %w", name, err)
		}
		off := rd.Offset()
		if lsn != sc.expect {
			err := sc.problem(&CorruptError{Segment: name, Offset: off, LSN: lsn,
				Reason: fmt.Sprintf("record has LSN %d, want %d", lsn, sc.expect)})
			if err != nil {
				return -1, err
			}
		}
		sc.expect = lsn + 1
		info.Records++
		if info.First == 0 {
			info.First = lsn
		}
		info.Last = lsn
		if visit != nil {
			if err := visit(off, lsn, payload); err != nil {
				return -1, err
			}
		}
	}
}

// invalid handles the invalid record te of segment info.Name (size bytes)
// under rule: a torn tail, or corruption. It returns where keepGoing
// resumes, or -1.
func (sc *scanner) invalid(f File, info *SegmentInfo, te *recordError, size int64, rule tailRule) (int64, error) {
	name := info.Name
	var a after
	if rule == tailTorn || sc.keepGoing {
		var err error
		if a, err = findValidAfter(f, te.off, size, sc.expect); err != nil {
			return -1, fmt.Errorf("wal: read segment %s: %w", name, err)
		}
	}
	q, qlsn, found := a.at, a.lsn, a.found
	if found && sc.live && rule == tailTorn && sc.writtenSince(f, te.off, q, qlsn) {
		// A writer wrote the record while we read: the log ends at te.off
		// as far as this scan saw it.
		info.Tail = &TornTail{Offset: te.off, Reason: te.reason + " (being written)"}
		return -1, nil
	}
	if found && rule == tailTorn && a.hole {
		info.Tail = &TornTail{Offset: te.off, Reason: fmt.Sprintf("%s; a page of zeros before the record at offset %d (LSN %d): written back out of order, never synced", te.reason, q, qlsn)}
		return -1, nil
	}
	var reason string
	switch {
	case rule == tailCorrupt:
		reason = fmt.Sprintf("invalid record (%s) in a segment that is not the last", te.reason)
	case rule == tailWritten:
		reason = fmt.Sprintf("invalid record (%s) where the log wrote a valid one", te.reason)
	case found:
		reason = fmt.Sprintf("invalid record (%s) followed by a valid record (LSN %d) at offset %d", te.reason, qlsn, q)
	default:
		info.Tail = &TornTail{Offset: te.off, Reason: te.reason, Zero: a.zero}
		return -1, nil
	}
	if err := sc.problem(&CorruptError{Segment: name, Offset: te.off, Reason: reason}); err != nil {
		return -1, err
	}
	if !found {
		sc.expect = 0 // the rest of the segment is lost: the next may start anywhere
		return -1, nil
	}
	sc.expect = qlsn
	return q, nil
}

// writtenSince reports whether the bytes [off, q) of the last segment
// now hold valid records up to the one at q (LSN qlsn), though a first
// read found an invalid record at off: a live writer appended them
// meanwhile. The log reserves its last segment's space ahead of its
// writes (Allocator), so a live scan reads bytes a writer is writing, not
// only those it had written when the scan opened the file. A writer
// writes in offset order, so once the record at q was seen valid, every
// record before it is written: if one is still invalid, it is corrupt.
// It reads one record at a time, however far q lies from off.
func (sc *scanner) writtenSince(f File, off, q int64, qlsn uint64) bool {
	want := sc.expect // the LSN of the record at off
	if want == 0 || want > qlsn {
		return false
	}
	var rec []byte
	p := off
	for ; want < qlsn; want++ {
		var hdr [RecordHeaderSize]byte
		if q-p < RecordHeaderSize {
			return false
		}
		if n, _ := f.ReadAt(hdr[:], p); n < len(hdr) {
			return false
		}
		length := int64(binary.LittleEndian.Uint32(hdr[0:4]))
		if length > MaxRecordSize || q-p < RecordHeaderSize+length {
			return false
		}
		if n := RecordHeaderSize + length; int64(cap(rec)) < n {
			rec = make([]byte, n)
		} else {
			rec = rec[:n]
		}
		if n, _ := f.ReadAt(rec, p); n < len(rec) || !validRecordAt(rec, want, want) {
			return false
		}
		p += int64(len(rec))
	}
	return p == q
}

// after is what findValidAfter learned about the bytes after an invalid
// record.
type after struct {
	at    int64  // offset of the first valid record after it, if found
	lsn   uint64 // its LSN
	found bool
	zero  bool // every byte from the invalid record on is zero
	hole  bool // found, and a page of zeros lies before it (zeroHole)
}

// findValidAfter looks in f[off+1, size) for a valid record with an LSN of
// at least expect (and at most what the remaining bytes could hold). A
// crash leaves the unsynced tail as a prefix, or pages of it (zeroHole),
// so a valid record after an invalid one means corruption rather than a
// torn tail, unless a page of zeros lies between them.
//
// A valid record may lie anywhere after the invalid one (garbage of any
// length can precede it, and one batch may make a segment of any size),
// so it looks at every offset up to size. It holds at most scanWindow
// bytes: a window of the file, slid scanChunk bytes at a time and kept
// scanOverlap bytes past the last offset it tries, so that every record
// that starts there, whatever its length, lies wholly in the window. It
// never reads the holes of a sparse file (fileHoles), and goes over a
// hole without looking at it, since no record starts where its LSN would
// be zero: a segment extended to 64 GiB by truncate costs a few system
// calls, not 64 GiB of memory or reads.
func findValidAfter(f File, off, size int64, expect uint64) (after, error) {
	return findValidAfterIn(f, off, size, expect, scanChunk, scanOverlap)
}

// findValidAfterIn is findValidAfter with a window of chunk+overlap bytes,
// for records of up to overlap bytes; tests use small ones.
func findValidAfterIn(f File, off, size int64, expect uint64, chunk, overlap int64) (after, error) {
	if size <= off {
		return after{zero: true}, nil
	}
	lo := max(expect, 1)
	hi := lsnBound(lo, uint64(size-off)/RecordHeaderSize)
	holes := newFileHoles(f)
	z := newZeroTrack(off)
	buf := make([]byte, min(size-off, chunk+overlap))
	// buf[:bufEnd-bufStart] holds the bytes [bufStart, bufEnd) of f; end
	// is where f ends (size, or less if a read came short).
	bufStart, bufEnd, end := off, off, size
	for pos := off + 1; ; { // pos: the next offset to try
		if pos <= bufEnd {
			// A hole [pos, d) past the window: no record starts before
			// d-RecordHeaderSize+1 (its LSN would be zeros).
			if d := holes.data(pos, end) - (RecordHeaderSize - 1); d > bufEnd {
				z.zeros(d - bufEnd)
				pos, bufStart, bufEnd = d, d, d
			}
			// Slide the window to pos.
			copy(buf, buf[pos-bufStart:bufEnd-bufStart])
			bufStart = pos
		}
		if want := min(bufStart+int64(len(buf)), end); bufEnd < want {
			n, err := fill(f, holes, z, buf[bufEnd-bufStart:want-bufStart], bufEnd, end)
			bufEnd += n
			if err != nil {
				return after{}, err
			}
			if bufEnd < want {
				end = bufEnd // the file ended early
			}
		}
		last := bufEnd - overlap // the last offset whose record fits in the window
		if bufEnd == end {
			last = end - RecordHeaderSize
		}
		if p, lsn, ok := firstValid(buf[:bufEnd-bufStart], pos-bufStart, last-bufStart, lo, hi); ok {
			at := bufStart + p
			hole := z.holeEnd >= 0 && z.holeEnd <= at // zeroHole of the bytes [off, at)
			if !hole && at-off <= RecordHeaderSize+MaxRecordSize && holePage-off%holePage < RecordHeaderSize {
				// headerCutByPage needs the bytes [off, at): in the first
				// window, or read again (a record's worth at most).
				var b []byte
				if bufStart == off {
					b = buf[:at-off]
				} else {
					b = make([]byte, at-off)
					if n, err := f.ReadAt(b, off); n < len(b) {
						if err != nil && err != io.EOF {
							return after{}, err
						}
						b = nil
					}
				}
				hole = b != nil && headerCutByPage(b, off, expect, lsn)
			}
			return after{at: at, lsn: lsn, found: true, hole: hole}, nil
		}
		if bufEnd >= end {
			return after{zero: z.allZero}, nil
		}
		pos = last + 1
	}
}

// The window of findValidAfter: it tries scanChunk offsets at a time,
// each with the scanOverlap bytes a record starting there can span.
const (
	scanOverlap = RecordHeaderSize + MaxRecordSize
	scanChunk   = 16 << 20
	scanWindow  = scanChunk + scanOverlap
)

// firstValid returns the offset in b of the first valid record with an LSN
// in [lo, hi] that starts at an offset in [from, last], and its LSN; b
// holds at least last+RecordHeaderSize bytes. It goes over zeros a page at
// a time: no record starts where its LSN field is zero.
func firstValid(b []byte, from, last int64, lo, hi uint64) (int64, uint64, bool) {
	for p := from; p <= last; {
		lsn := leUint64(b[p+8:])
		if lsn == 0 {
			// To the first offset whose LSN field holds a nonzero byte.
			i := nextNonZero(b[:last+RecordHeaderSize], p+RecordHeaderSize)
			p = i - (RecordHeaderSize - 1)
			continue
		}
		if lsn >= lo && lsn <= hi && validRecordAt(b[p:], lo, hi) {
			return p, lsn, true
		}
		p++
	}
	return 0, 0, false
}

// nextNonZero returns the index of the first nonzero byte of b at or after
// i, or len(b).
func nextNonZero(b []byte, i int64) int64 {
	n := int64(len(b))
	for i < n {
		k := min(n-i, int64(len(zeroPage)))
		if bytes.Equal(b[i:i+k], zeroPage[:k]) {
			i += k
			continue
		}
		for i+8 <= n && leUint64(b[i:]) == 0 {
			i += 8
		}
		for b[i] == 0 {
			i++
		}
		return i
	}
	return n
}

// fill reads the bytes [at, at+len(b)) of f, which ends at end, into b,
// and feeds them to z. It returns how many it got: fewer only if the file
// ends sooner. Holes are cleared, not read.
func fill(f File, holes *fileHoles, z *zeroTrack, b []byte, at, end int64) (int64, error) {
	n := int64(0)
	for n < int64(len(b)) {
		pos, rest := at+n, b[n:]
		if d := holes.data(pos, end); d > pos {
			k := min(d-pos, int64(len(rest)))
			clear(rest[:k])
			z.zeros(k)
			n += k
			continue
		}
		if h := holes.hole(pos, end); h > pos && h-pos < int64(len(rest)) {
			rest = rest[:h-pos]
		}
		m, err := f.ReadAt(rest, pos)
		z.bytes(rest[:m])
		n += int64(m)
		if m < len(rest) {
			if err != nil && err != io.EOF {
				return n, err
			}
			return n, nil
		}
	}
	return n, nil
}

// fileHoles finds the holes of a sparse OSFS file with lseek(2)
// SEEK_DATA and SEEK_HOLE (Linux). For any other file it finds none: the
// methods are those of a file that is all data, and so are they after an
// error other than ENXIO (no data, or no hole, past the offset). Reading
// a hole gives zeros; skipping it gives the same bytes without the cost.
type fileHoles struct{ f *os.File }

// Linux's whence values of lseek(2); os.File.Seek passes them on.
const (
	seekData = 3
	seekHole = 4
)

func newFileHoles(f File) *fileHoles {
	of, ok := f.(*osFile)
	if !ok || runtime.GOOS != "linux" {
		return nil
	}
	return &fileHoles{f: of.File}
}

// data returns the offset of the first byte of data at or after off, at
// most end.
func (h *fileHoles) data(off, end int64) int64 {
	if d, ok := h.seek(off, seekData, end); ok {
		return max(d, off)
	}
	return off
}

// hole returns the offset of the first byte of a hole at or after off, at
// most end.
func (h *fileHoles) hole(off, end int64) int64 {
	if d, ok := h.seek(off, seekHole, end); ok {
		return d
	}
	return end
}

func (h *fileHoles) seek(off int64, whence int, end int64) (int64, bool) {
	if h == nil || h.f == nil || off >= end {
		return 0, false
	}
	d, err := h.f.Seek(off, whence)
	if errors.Is(err, syscall.ENXIO) {
		return end, true
	}
	if err != nil {
		h.f = nil // from now on, all data
		return 0, false
	}
	return min(d, end), true
}

// zeroTrack follows the bytes of a file from offset off on, in order: it
// says whether all of them are zeros, and where the first page of zeros
// that zeroHole accepts ends.
type zeroTrack struct {
	off       int64
	at        int64 // the next byte
	pageStart int64 // the start of the page at lies in: off, or a multiple of holePage
	pageZero  bool  // the bytes [pageStart, at) are zeros
	allZero   bool  // the bytes [off, at) are zeros
	holeEnd   int64 // the end of the first page of zeros zeroHole accepts; -1 if none yet
}

func newZeroTrack(off int64) *zeroTrack {
	return &zeroTrack{off: off, at: off, pageStart: off, pageZero: true, allZero: true, holeEnd: -1}
}

func pageEnd(s int64) int64 { return (s/holePage + 1) * holePage }

// endPage ends the page that ends at z.at.
func (z *zeroTrack) endPage() {
	if z.pageZero && z.holeEnd < 0 && (z.pageStart != z.off || z.at-z.pageStart >= RecordHeaderSize) {
		z.holeEnd = z.at
	}
	z.pageStart, z.pageZero = z.at, true
}

// bytes feeds b, the bytes from z.at on.
func (z *zeroTrack) bytes(b []byte) {
	for len(b) > 0 {
		pe := pageEnd(z.pageStart)
		k := min(int64(len(b)), pe-z.at)
		if (z.allZero || z.pageZero && z.holeEnd < 0) && !allZeros(b[:k]) {
			z.allZero, z.pageZero = false, false
		}
		z.at += k
		b = b[k:]
		if z.at == pe {
			z.endPage()
		}
	}
}

// zeros feeds n zero bytes.
func (z *zeroTrack) zeros(n int64) {
	end := z.at + n
	for z.at < end {
		pe := pageEnd(z.pageStart)
		if pe > end {
			z.at = end
			return
		}
		z.at = pe
		z.endPage()
		if full := end / holePage * holePage; full > z.at {
			// Whole pages of zeros, not the first: the first of them is
			// a hole, and the others can add nothing.
			if z.holeEnd < 0 {
				z.holeEnd = z.at + holePage
			}
			z.at, z.pageStart = full, full
		}
	}
}

// headerCutByPage reports whether b, the bytes from offset off up to the
// record with LSN qlsn, are the record with LSN expect = qlsn-1 whose first
// bytes, fewer than a header's, were on a page that never reached the disk
// (zeros up to the page boundary) while the page after it did: the record
// rebuilt with the length b's size gives, the LSN expected and its CRC
// recomputed must match every byte after the boundary. (zeroHole needs a
// header's worth of zeros, which a record starting this close to a page
// boundary does not leave.)
func headerCutByPage(b []byte, off int64, expect, qlsn uint64) bool {
	z := int(holePage - off%holePage) // bytes before the boundary
	if z >= RecordHeaderSize || len(b) < RecordHeaderSize || expect == 0 || qlsn != expect+1 ||
		len(b)-RecordHeaderSize > MaxRecordSize || !allZeros(b[:z]) {
		return false
	}
	rec := slices.Clone(b)
	binary.LittleEndian.PutUint32(rec[0:4], uint32(len(b)-RecordHeaderSize))
	binary.LittleEndian.PutUint64(rec[8:16], expect)
	binary.LittleEndian.PutUint32(rec[4:8], recordCRC(rec))
	return bytes.Equal(rec[z:RecordHeaderSize], b[z:RecordHeaderSize])
}

// holePage is the unit of out-of-order writeback zeroHole looks for: the
// page size of the file systems the log runs on.
const holePage = 4096

// zeroHole reports whether b, the bytes of the last segment from offset
// off on, up to a valid record, hold a page that was never written back:
// either from off to the next page boundary (at least a record header's
// worth, which no record begins with: its LSN is not zero), or a whole
// aligned page, all zeros. The log writes its last segment over reserved
// zeros whose size is durable, so a power loss during a sync can leave a
// later page of records on disk and an earlier one not. A page that never
// reached the disk was not covered by a completed sync, and neither was
// anything written after it: no record there was acknowledged, and the
// log ends before it. A random bit flip makes no such page. A device that
// zeroes a page it had acknowledged as synced would make one, and that
// loss would go unreported here (the store notices it where its files
// hold changes of the dropped records: their stamps are past the log's
// end); so would damage to a record whose payload holds a page of zeros
// (the store's payloads, hashes and indexed words, never do).
func zeroHole(b []byte, off int64) bool {
	for s := off; ; {
		e := (s/holePage + 1) * holePage
		if e > off+int64(len(b)) {
			return false
		}
		if (s != off || e-s >= RecordHeaderSize) && allZeros(b[s-off:e-off]) {
			return true
		}
		s = e
	}
}

func allZeros(b []byte) bool {
	for len(b) > 0 {
		k := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:k], zeroPage[:k]) {
			return false
		}
		b = b[k:]
	}
	return true
}

// zeroPage is what allZeros and nextNonZero compare with.
var zeroPage [holePage]byte
