package wal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
)

// errStopScan stops a scan early from inside its callback.
var errStopScan = errors.New("wal: stop scan")

// Replay calls fn for every record with from <= lsn <= LastLSN(), in LSN
// order, as of the call: records appended concurrently may or may not be
// visited. Records below FirstLSN() no longer exist and are silently
// skipped; compare FirstLSN with from to detect that. Replay first writes
// (without syncing) any records still buffered, so it sees everything
// appended. The payload is only valid during the call to fn. An error from
// fn stops the replay and is returned as is; a record that fails its checks
// gives an error wrapping ErrCorrupt. Replay may run on a freshly opened log
// before any append, and concurrently with appends; fn must not call
// TruncateBefore or SetNextLSN, which wait for Replay to finish.
func (l *Log) Replay(from uint64, fn func(lsn uint64, payload []byte) error) error {
	if fn == nil {
		return fmt.Errorf("wal: Replay: nil fn: %w", ErrInvalid)
	}
	l.adminMu.RLock()
	defer l.adminMu.RUnlock()
	l.mu.Lock()
	if l.closing || l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	last := l.next - 1
	if err := l.awaitLocked(last, false); err != nil {
		l.mu.Unlock()
		return err
	}
	segs := slices.Clone(l.segs)
	l.mu.Unlock()

	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].first <= from {
			continue // every record of s is below from
		}
		if s.first > last {
			break
		}
		_, err := l.scanFile(s, s.first, s.size, false, func(lsn uint64, payload []byte) error {
			if lsn > last {
				return errStopScan
			}
			if lsn < from {
				return nil
			}
			return fn(lsn, payload)
		})
		if err == errStopScan {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// scanResult is what scanFile learned about a segment.
type scanResult struct {
	next uint64       // LSN after the last valid record
	end  int64        // offset after the last valid record
	size int64        // bytes scanned: the file size, or the limit
	torn *recordError // the torn tail record, if the segment ends in one
}

// scanFile validates segment s and calls fn, if not nil, for each record in
// order; an error from fn stops the scan and is returned as is. If want is
// not 0 the segment must start at LSN want. It reads at most limit bytes
// (all if limit < 0). Only if last may the segment end in a torn record,
// reported in the result; anything else that fails a check is ErrCorrupt.
func (l *Log) scanFile(s segment, want uint64, limit int64, last bool, fn func(lsn uint64, payload []byte) error) (scanResult, error) {
	f, err := l.fs.Open(l.path(s.name))
	if err != nil {
		return scanResult{}, fmt.Errorf("wal: open segment %s: %w", s.name, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return scanResult{}, fmt.Errorf("wal: stat segment %s: %w", s.name, err)
	}
	if limit >= 0 && limit < size {
		size = limit
	}
	corrupt := func(off int64, format string, args ...any) error {
		return fmt.Errorf("wal: segment %s offset %d: %s: %w", s.name, off, fmt.Sprintf(format, args...), ErrCorrupt)
	}

	var hb [SegmentHeaderSize]byte
	n, err := f.ReadAt(hb[:min(int64(len(hb)), size)], 0)
	if err != nil && err != io.EOF {
		return scanResult{}, fmt.Errorf("wal: read segment %s: %w", s.name, err)
	}
	h, reason := parseSegmentHeader(hb[:n])
	if reason != "" {
		return scanResult{}, corrupt(0, "%s", reason)
	}
	if h.FirstLSN != s.first {
		return scanResult{}, corrupt(0, "header says first LSN %d, file name says %d", h.FirstLSN, s.first)
	}
	if want != 0 && h.FirstLSN != want {
		return scanResult{}, corrupt(0, "LSN gap: segment starts at LSN %d, previous segment ends at LSN %d", h.FirstLSN, want-1)
	}

	body := size - SegmentHeaderSize
	rd := newReaderAt(bufio.NewReaderSize(io.NewSectionReader(f, SegmentHeaderSize, body), int(min(body, 256<<10))), SegmentHeaderSize)
	expect := h.FirstLSN
	for {
		lsn, payload, err := rd.Next()
		if err == io.EOF {
			return scanResult{next: expect, end: size, size: size}, nil
		}
		if te, ok := isTorn(err); ok {
			if !last {
				return scanResult{}, corrupt(te.off, "invalid record (%s) in a segment that is not the last", te.reason)
			}
			q, qlsn, found, err := findValidAfter(f, te.off, size, expect)
			if err != nil {
				return scanResult{}, fmt.Errorf("wal: read segment %s: %w", s.name, err)
			}
			if found {
				return scanResult{}, corrupt(te.off, "invalid record (%s) followed by a valid record (LSN %d) at offset %d", te.reason, qlsn, q)
			}
			return scanResult{next: expect, end: te.off, size: size, torn: te}, nil
		}
		if err != nil {
			return scanResult{}, fmt.Errorf("wal: read segment %s: %w", s.name, err)
		}
		if lsn != expect {
			return scanResult{}, corrupt(rd.Offset(), "record has LSN %d, want %d", lsn, expect)
		}
		if fn != nil {
			if err := fn(lsn, payload); err != nil {
				return scanResult{}, err
			}
		}
		expect++
	}
}

// findValidAfter looks in f[off+1, size) for a valid record with an LSN of
// at least expect (and at most what the remaining bytes could hold). A
// crash leaves the unsynced tail as a prefix, so a valid record after an
// invalid one means corruption rather than a torn tail. It reads the rest
// of the segment into memory: at most about one segment.
func findValidAfter(f File, off, size int64, expect uint64) (at int64, lsn uint64, found bool, err error) {
	if size-off <= RecordHeaderSize {
		return 0, 0, false, nil
	}
	b := make([]byte, size-off)
	n, err := f.ReadAt(b, off)
	if err != nil && err != io.EOF {
		return 0, 0, false, err
	}
	b = b[:n]
	if p, lsn, ok := FindValidRecord(b, 1, expect); ok {
		return off + p, lsn, true, nil
	}
	return 0, 0, false, nil
}
