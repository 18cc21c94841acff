package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/filterstore/filterstore/store"
	"github.com/filterstore/filterstore/wal"
)

// This file reads WAL segments with plain reads for the wal and verify
// commands, checking what the wal package's recovery checks (segment
// headers, record CRCs, LSNs increasing by exactly 1 across segments, a
// torn record only at the tail of the last segment) but reporting every
// problem with its file and offset instead of stopping at the first.

// segment is one WAL segment file.
type segment struct {
	name     string // base name, %020d.log
	rel      string // path relative to the store directory
	path     string
	nameLSN  uint64 // first LSN, from the name
	statSize int64  // size when listed
	size     int64  // bytes read
	records  int
	first    uint64 // LSN of the first valid record, 0 if none
	last     uint64 // LSN of the last valid record, 0 if none
	tail     string // why the tail is torn; "" if it is clean
	tailOff  int64
	gone     bool // removed (by a checkpoint) before it could be read
	corrupt  bool
}

// walListing is the segments of a store's WAL directory, in LSN order.
type walListing struct {
	segs []*segment
	tmps []string // leftover or in-progress *.tmp files
}

// listWAL lists the segments of the store in dir; a missing WAL directory
// has none.
func listWAL(dir string) (*walListing, error) {
	wd := store.WALDir(dir)
	ents, err := os.ReadDir(wd)
	l := &walListing{}
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("wal directory: %w", err)
	}
	for _, ent := range ents {
		name := ent.Name()
		if strings.HasSuffix(name, ".tmp") {
			l.tmps = append(l.tmps, name)
			continue
		}
		first, ok := wal.ParseSegmentName(name)
		if !ok {
			continue
		}
		s := &segment{name: name, path: filepath.Join(wd, name), nameLSN: first}
		s.rel = relPath(dir, s.path)
		if info, err := ent.Info(); err == nil {
			s.statSize = info.Size()
		}
		l.segs = append(l.segs, s)
	}
	sort.Slice(l.segs, func(i, j int) bool { return l.segs[i].nameLSN < l.segs[j].nameLSN })
	return l, nil
}

// bytes returns the listed size of every segment.
func (l *walListing) bytes() int64 {
	var n int64
	for _, s := range l.segs {
		n += s.statSize
	}
	return n
}

// same reports whether m lists the same segments with the same sizes as l,
// and l's segments were read whole: nothing was appended meanwhile.
func (l *walListing) same(m *walListing) bool {
	if m == nil || len(l.segs) != len(m.segs) {
		return false
	}
	for i, s := range l.segs {
		if s.name != m.segs[i].name || s.statSize != m.segs[i].statSize || s.gone || s.size != s.statSize {
			return false
		}
	}
	return true
}

// walVisit is called for every valid record, in order.
type walVisit func(s *segment, off int64, lsn uint64, payload []byte)

// scan reads every segment, adds what is wrong to fnd and calls visit for
// every valid record. Only an I/O error is returned.
func (l *walListing) scan(prog *progress, fnd *findings, visit walVisit) error {
	var expect uint64 // LSN the next record must have; 0 if unknown
	for i, s := range l.segs {
		last := i == len(l.segs)-1
		prog.setCurrent(s.rel)
		data, err := os.ReadFile(s.path)
		if errors.Is(err, fs.ErrNotExist) {
			s.gone, expect = true, 0 // deleted by a checkpoint meanwhile
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", s.rel, err)
		}
		s.size = int64(len(data))
		prog.add(s.size)
		bad := func(kind string, off int64, format string, args ...any) {
			s.corrupt = true
			fnd.addFinding(kind, problem(s.rel, off, format, args...))
		}
		if len(data) < wal.SegmentHeaderSize {
			bad("segment-header", 0, "segment is %d bytes, shorter than its %d-byte header", len(data), wal.SegmentHeaderSize)
			expect = 0
			continue
		}
		h, err := wal.ParseSegmentHeader(data[:wal.SegmentHeaderSize])
		if err != nil {
			bad("segment-header", 0, "bad segment header: %v", err)
			expect = 0
			continue
		}
		if h.FirstLSN != s.nameLSN {
			bad("segment-header", 12, "segment header says first LSN %d, the file name says %d", h.FirstLSN, s.nameLSN)
			expect = 0
			continue
		}
		if expect != 0 && h.FirstLSN != expect {
			bad("lsn", 12, "LSN gap: segment starts at LSN %d, the previous segment ends at LSN %d", h.FirstLSN, expect-1)
		}
		expect = h.FirstLSN
		// Read records from pos; after an invalid record followed by a
		// valid one, resume at the valid one, so every record is checked.
		for pos := int64(wal.SegmentHeaderSize); pos >= 0; {
			rd := wal.NewReader(bytes.NewReader(data[pos:]))
			base := pos
			pos = -1
			for {
				lsn, payload, err := rd.Next()
				off := base + rd.Offset()
				if err == io.EOF {
					break
				}
				if err != nil {
					reason := tornReason(data[off:])
					q, qlsn, found := findValidAfter(data, off, expect)
					switch {
					case !errors.Is(err, wal.ErrTorn):
						bad("record", off, "cannot read record: %v", err)
					case !last:
						bad("record", off, "invalid record (%s) in a segment that is not the last: segments are synced before the next one is created, so this is corruption", reason)
					case found:
						bad("record", off, "invalid record (%s) followed by a valid record (LSN %d) at offset %d: corruption, not a torn tail", reason, qlsn, q)
					default:
						s.tail, s.tailOff = reason, off
						fnd.addFinding("tail", note(s.rel, off, "torn tail of %d bytes (%s): a writer may be appending; otherwise the next writer Open truncates it", int64(len(data))-off, reason))
					}
					expect = 0
					if found && errors.Is(err, wal.ErrTorn) {
						pos, expect = q, qlsn
					}
					break
				}
				if expect != 0 && lsn != expect {
					bad("lsn", off, "record has LSN %d, want %d: LSNs increase by exactly 1", lsn, expect)
				}
				expect = lsn + 1
				s.records++
				if s.first == 0 {
					s.first = lsn
				}
				s.last = lsn
				if visit != nil {
					visit(s, off, lsn, payload)
				}
			}
		}
		if s.tail != "" {
			expect = 0
		}
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// tornReason says why the bytes at the start of b are not a valid record
// (the framing is drawn in the wal package doc).
func tornReason(b []byte) string {
	if len(b) < wal.RecordHeaderSize {
		return fmt.Sprintf("header cut short after %d of %d bytes", len(b), wal.RecordHeaderSize)
	}
	length := binary.LittleEndian.Uint32(b[0:4])
	if length > wal.MaxRecordSize {
		return fmt.Sprintf("length %d exceeds the maximum %d", length, wal.MaxRecordSize)
	}
	if int64(len(b)) < wal.RecordHeaderSize+int64(length) {
		return fmt.Sprintf("payload cut short after %d of %d bytes", len(b)-wal.RecordHeaderSize, length)
	}
	stored, computed := binary.LittleEndian.Uint32(b[4:8]), recordCRC(b[:wal.RecordHeaderSize+int(length)])
	if stored != computed {
		return fmt.Sprintf("CRC mismatch: stored %#08x, computed %#08x", stored, computed)
	}
	if binary.LittleEndian.Uint64(b[8:16]) == 0 {
		return "LSN 0"
	}
	return "invalid record"
}

// recordCRC is the CRC-32C of a framed record: the length field, then the
// LSN and payload.
func recordCRC(rec []byte) uint32 {
	c := crc32.Update(0, castagnoli, rec[0:4])
	return crc32.Update(c, castagnoli, rec[8:])
}

// findValidAfter looks in data after off for a valid record whose LSN is
// at least expect (1 if unknown); see wal.FindValidRecord.
func findValidAfter(data []byte, off int64, expect uint64) (int64, uint64, bool) {
	return wal.FindValidRecord(data, off+1, expect)
}
