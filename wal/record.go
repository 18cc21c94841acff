package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/filterstore/filterstore/internal/crc"
)

// Record framing constants. They are part of the on-disk format and must
// never change (see the package documentation).
const (
	// RecordHeaderSize is the size of the framing before each payload:
	// length u32, CRC u32, LSN u64.
	RecordHeaderSize = 16
	// MaxRecordSize is the largest payload a record can carry. A decoder
	// rejects a larger length field as torn without allocating for it.
	MaxRecordSize = 16 << 20
	// MaxLSN is the largest LSN a record or a segment can have: the log's
	// next LSN, one more, still fits in 64 bits. A decoder rejects a
	// larger LSN as torn, a segment header or name that starts beyond it
	// as invalid; Append and SetNextLSN refuse to go past it.
	MaxLSN = 1<<64 - 2
)

// recordCRC returns the CRC-32C of the record framed in rec (header and
// payload): bytes [0,4) and [8, len(rec)).
func recordCRC(rec []byte) uint32 {
	c := crc.Update(0, rec[0:4])
	return crc.Update(c, rec[8:])
}

// AppendRecord appends the framed record (lsn, payload) to dst and returns
// the extended slice. It panics if lsn is 0 or above MaxLSN, or
// len(payload) > MaxRecordSize: programmer errors, which Log.Append rules
// out before encoding.
func AppendRecord(dst []byte, lsn uint64, payload []byte) []byte {
	if lsn == 0 || lsn > MaxLSN || len(payload) > MaxRecordSize {
		panic(fmt.Sprintf("wal: AppendRecord(lsn=%d, len=%d): invalid record", lsn, len(payload)))
	}
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // CRC, filled in below
	dst = binary.LittleEndian.AppendUint64(dst, lsn)
	dst = append(dst, payload...)
	binary.LittleEndian.PutUint32(dst[start+4:], recordCRC(dst[start:]))
	return dst
}

// recordError is the error a Reader returns for a torn record. It wraps
// ErrTorn and keeps the offset and reason apart so that Open can restate them
// as corruption.
type recordError struct {
	off    int64  // offset of the record's first byte in the stream
	reason string // what was wrong with it
}

func (e *recordError) Error() string {
	return fmt.Sprintf("wal: torn record at offset %d: %s", e.off, e.reason)
}

func (e *recordError) Unwrap() error { return ErrTorn }

// Reader decodes records from an io.Reader, one at a time. It reads only
// what it needs; wrap the source in a bufio.Reader for throughput.
type Reader struct {
	r    io.Reader
	off  int64 // stream offset of the next record
	last int64 // stream offset of the record last returned or rejected
	err  error // sticky
	hdr  [RecordHeaderSize]byte
	buf  []byte // payload buffer, reused
}

// NewReader returns a Reader decoding records from r, whose first byte is
// the first byte of a record (not of a segment header).
func NewReader(r io.Reader) *Reader {
	return newReaderAt(r, 0)
}

// newReaderAt is NewReader for a stream whose first byte sits at offset base
// of its file, so that offsets in errors are file offsets.
func newReaderAt(r io.Reader, base int64) *Reader {
	return &Reader{r: r, off: base, last: base}
}

// Next returns the next record. The payload is valid until the following
// call to Next. At a clean end of input, where no byte of a further record
// is present, Next returns io.EOF. For a record cut short, one whose length
// exceeds MaxRecordSize, one with LSN 0 or above MaxLSN, or one failing its CRC, it returns
// an error wrapping ErrTorn. Errors are sticky. Next reads a length field
// before trusting it: its payload buffer grows with the bytes that actually
// arrive (never beyond twice those plus 64 KiB, nor beyond MaxRecordSize).
func (r *Reader) Next() (lsn uint64, payload []byte, err error) {
	if r.err != nil {
		return 0, nil, r.err
	}
	r.last = r.off
	n, err := io.ReadFull(r.r, r.hdr[:])
	switch {
	case n == 0 && (err == io.EOF || err == io.ErrUnexpectedEOF):
		return r.fail(io.EOF)
	case err == io.ErrUnexpectedEOF:
		return r.torn(fmt.Sprintf("header cut short after %d of %d bytes", n, RecordHeaderSize))
	case err != nil:
		return r.fail(fmt.Errorf("wal: read record at offset %d: %w", r.off, err))
	}
	length := binary.LittleEndian.Uint32(r.hdr[0:4])
	want := binary.LittleEndian.Uint32(r.hdr[4:8])
	lsn = binary.LittleEndian.Uint64(r.hdr[8:16])
	if length > MaxRecordSize {
		return r.torn(fmt.Sprintf("length %d exceeds MaxRecordSize %d", length, MaxRecordSize))
	}
	// Grow the payload buffer as bytes arrive, so that a length field read
	// from garbage costs no more memory than the input that backs it.
	buf := r.buf[:0]
	for len(buf) < int(length) {
		chunk := min(int(length)-len(buf), max(len(buf), 64<<10))
		if cap(buf)-len(buf) < chunk {
			nb := make([]byte, len(buf), len(buf)+chunk)
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(r.r, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+m]
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			r.buf = buf
			return r.torn(fmt.Sprintf("payload cut short after %d of %d bytes", len(buf), length))
		}
		if err != nil {
			return r.fail(fmt.Errorf("wal: read record at offset %d: %w", r.off, err))
		}
	}
	r.buf = buf
	c := crc.Update(0, r.hdr[0:4])
	c = crc.Update(c, r.hdr[8:16])
	c = crc.Update(c, buf)
	if c != want {
		return r.torn(fmt.Sprintf("CRC mismatch: stored %#08x, computed %#08x", want, c))
	}
	if lsn == 0 {
		return r.torn("LSN 0")
	}
	if lsn > MaxLSN {
		return r.torn(fmt.Sprintf("LSN %d above MaxLSN", lsn))
	}
	r.off += RecordHeaderSize + int64(length)
	return lsn, buf, nil
}

// Offset returns the stream offset (plus the base, for the log's own
// readers) of the record last returned or rejected by Next.
func (r *Reader) Offset() int64 { return r.last }

func (r *Reader) torn(reason string) (uint64, []byte, error) {
	return r.fail(&recordError{off: r.off, reason: reason})
}

func (r *Reader) fail(err error) (uint64, []byte, error) {
	r.err = err
	return 0, nil, err
}

// isTorn reports whether err is a torn-record error, returning it.
func isTorn(err error) (*recordError, bool) {
	var re *recordError
	ok := errors.As(err, &re)
	return re, ok
}

// validRecordAt reports whether b starts with a complete record whose CRC
// holds and whose LSN lies in [lo, hi]. It never allocates.
func validRecordAt(b []byte, lo, hi uint64) bool {
	if len(b) < RecordHeaderSize {
		return false
	}
	lsn := binary.LittleEndian.Uint64(b[8:16])
	if lsn < lo || lsn > hi || lsn == 0 || lsn > MaxLSN {
		return false
	}
	length := binary.LittleEndian.Uint32(b[0:4])
	if length > MaxRecordSize || int64(len(b)) < RecordHeaderSize+int64(length) {
		return false
	}
	return recordCRC(b[:RecordHeaderSize+int(length)]) == binary.LittleEndian.Uint32(b[4:8])
}

// FindValidRecord looks in b, from offset from on, for the first complete
// record whose CRC holds and whose LSN is at least minLSN (and at most what
// the rest of b could hold), and returns its offset and LSN. A crash leaves
// a prefix of unsynced appends, so a valid record after an invalid one
// means corruption rather than a torn tail: Scan, and so Open, Replay and
// every reader built on Scan, decides with it. It never allocates.
func FindValidRecord(b []byte, from int64, minLSN uint64) (at int64, lsn uint64, ok bool) {
	lo := max(minLSN, 1)
	hi := lsnBound(lo, uint64(len(b))/RecordHeaderSize)
	for p := max(from, 0); p+RecordHeaderSize <= int64(len(b)); p++ {
		if validRecordAt(b[p:], lo, hi) {
			return p, leUint64(b[p+8:]), true
		}
	}
	return 0, 0, false
}

func leUint64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// lsnBound is lo+n, the highest LSN n more records after lo could reach,
// capped at MaxLSN: near the end of the LSN space the sum would wrap
// below lo, and no valid record after a damaged one would be found (the
// damage then read as a torn tail, and Open cut acknowledged records).
func lsnBound(lo, n uint64) uint64 {
	if n > MaxLSN-min(lo, MaxLSN) {
		return MaxLSN
	}
	return lo + n
}
