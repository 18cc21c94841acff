package format

import (
	"encoding/binary"
	"fmt"
	"iter"

	"github.com/filterstore/filterstore/internal/fserr"
)

// WALOp is the kind of a store WAL record: its first payload byte. Values
// are part of the format.
type WALOp uint8

// The kinds of WAL record (drawn in the package documentation).
const (
	// WALOpHash: a Bloom add, logged as the key's hash.
	WALOpHash WALOp = 1
	// WALOpWords: after-images of words (cuckoo, counting Bloom, bitmap).
	WALOpWords WALOp = 2
	// WALOpBatch: the ops of one store Batch, each a hash or words
	// record, in the order they were planned: committed, and replayed,
	// all or none.
	WALOpBatch WALOp = 3
	// WALOpExternal: a batch that rode in another system's log (store's
	// external-log mode): its sequence number there, then its parts as in
	// a batch record, possibly none. Replayed all or none; the sequence
	// numbers say which of that log's records the store holds.
	WALOpExternal WALOp = 4
	// WALOpLoad: the filter is incomplete from here on, unless a
	// checkpoint after it says otherwise: a Load of it began (logged, and
	// made durable, before the Load changes any word; its closing
	// checkpoint covers it), or an external op on it could not apply.
	// Recovery that replays it finds a catalog entry from before it (the
	// Load did not end, or an older catalog was put back) and marks the
	// filter incomplete. Never a batch part.
	WALOpLoad WALOp = 5
)

// String returns "hash", "words", "batch", "external", "load", or "op(N)"
// for an unknown op.
func (op WALOp) String() string {
	switch op {
	case WALOpHash:
		return "hash"
	case WALOpWords:
		return "words"
	case WALOpBatch:
		return "batch"
	case WALOpExternal:
		return "external"
	case WALOpLoad:
		return "load"
	}
	return fmt.Sprintf("op(%d)", uint8(op))
}

// Payload sizes; part of the format.
const (
	hashRecordLen   = 1 + 8 + 1 + 8
	loadRecordLen   = 1 + 8
	wordsHeaderLen  = 1 + 8 + 1 + 1 + 4
	batchHeaderLen  = 1 + 4
	extHeaderLen    = 1 + 8 + 4
	maxRecordWrites = 1 << 16 // a cuckoo kick path is far shorter
	minPartLen      = wordsHeaderLen
)

// WALRecord is a store WAL payload, decoded: the one type the store logs
// and replays, cmd/inspect reads and the tests build.
type WALRecord struct {
	Op       WALOp
	FilterID uint64      // a WALOpLoad record has this field only
	Layer    int         // 0..255 on disk; a filter has at most MaxLayers
	Hash     uint64      // WALOpHash: the key's hash
	Delta    int8        // WALOpWords: change of the layer's item count
	Writes   []WordWrite // WALOpWords: after-images, in application order
	// Parts are a WALOpBatch's or WALOpExternal's ops, in order, each a
	// WALOpHash or WALOpWords record (the fields above are unused). A
	// batch holds at least one part, an external record zero or more;
	// neither holds a batch or external record.
	Parts []WALRecord
	// Seq is a WALOpExternal's sequence number in the external log.
	Seq uint64
}

// Ops yields the single-filter records r stands for, in order: its parts
// for a batch, else r itself. Replay and readers handle each alike; all
// of them share the record's LSN.
func (r WALRecord) Ops() iter.Seq[WALRecord] {
	return func(yield func(WALRecord) bool) {
		if r.Op != WALOpBatch && r.Op != WALOpExternal {
			yield(r)
			return
		}
		for _, p := range r.Parts {
			if !yield(p) {
				return
			}
		}
	}
}

// WordWrite is one after-image: word Index of the layer gets Value.
type WordWrite struct{ Index, Value uint64 }

// EncodedLen returns the length of r's encoding, len(AppendWALRecord(nil,
// r)), so that a caller can size the buffer it encodes into.
func (r WALRecord) EncodedLen() int {
	switch r.Op {
	case WALOpBatch, WALOpExternal:
		n := 1 + 4
		if r.Op == WALOpExternal {
			n += 8
		}
		for _, p := range r.Parts {
			n += p.EncodedLen()
		}
		return n
	case WALOpHash:
		return hashRecordLen
	case WALOpLoad:
		return loadRecordLen
	}
	return WordsRecordLen(len(r.Writes))
}

// WordsRecordLen returns the encoded length of a WALOpWords record of n
// writes, alone or as a part.
func WordsRecordLen(n int) int { return 1 + 8 + 2 + 4 + 16*n }

// AppendWALRecord appends r encoded as a store WAL payload and returns
// the extended slice: a hash record for WALOpHash, a batch or external
// record for WALOpBatch and WALOpExternal (its parts encoded as hash or
// words records: a part that is a batch, external or load record
// panics), a load record for WALOpLoad, a words record for any other op.
func AppendWALRecord(b []byte, r WALRecord) []byte {
	if r.Op == WALOpBatch || r.Op == WALOpExternal {
		b = append(b, byte(r.Op))
		if r.Op == WALOpExternal {
			b = binary.LittleEndian.AppendUint64(b, r.Seq)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Parts)))
		for _, p := range r.Parts {
			if p.Op == WALOpBatch || p.Op == WALOpExternal || p.Op == WALOpLoad {
				panic("format: a batch record part is a batch or load record")
			}
			b = AppendWALRecord(b, p)
		}
		return b
	}
	le := binary.LittleEndian
	if r.Op == WALOpLoad {
		b = append(b, byte(WALOpLoad))
		return le.AppendUint64(b, r.FilterID)
	}
	if r.Op == WALOpHash {
		b = append(b, byte(WALOpHash))
		b = le.AppendUint64(b, r.FilterID)
		b = append(b, byte(r.Layer))
		return le.AppendUint64(b, r.Hash)
	}
	b = append(b, byte(WALOpWords))
	b = le.AppendUint64(b, r.FilterID)
	b = append(b, byte(r.Layer), byte(r.Delta))
	b = le.AppendUint32(b, uint32(len(r.Writes)))
	for _, w := range r.Writes {
		b = le.AppendUint64(b, w.Index)
		b = le.AppendUint64(b, w.Value)
	}
	return b
}

// SetBatchParts sets to n the part count of the WALOpBatch record encoded
// in rec: the encoding of a batch record of no parts, with parts appended
// to it one by one with AppendWALRecord, as a writer that encodes parts
// as they come does. The result is the encoding of the batch of those
// parts.
func SetBatchParts(rec []byte, n int) {
	if len(rec) < 5 || WALOp(rec[0]) != WALOpBatch {
		panic("format: SetBatchParts of a record that is not a batch")
	}
	binary.LittleEndian.PutUint32(rec[1:5], uint32(n))
}

// DecodeWALRecord decodes a store WAL payload, one the WAL's CRC already
// vouched for: a failure means a bug or a foreign log. Every failure wraps
// ErrCorrupt; a declared write or part count cannot make it allocate more
// than the payload holds.
func DecodeWALRecord(p []byte) (WALRecord, error) {
	if len(p) > 0 && (WALOp(p[0]) == WALOpBatch || WALOp(p[0]) == WALOpExternal) {
		return decodeBatch(p)
	}
	r, _, err := decodeOp(p, true)
	return r, err
}

func badRecord(format string, args ...any) (WALRecord, error) {
	return WALRecord{}, fmt.Errorf("store: wal record: %w: "+format, append([]any{fserr.ErrCorrupt}, args...)...)
}

// decodeBatch decodes a batch or external record: (an external record's
// sequence number,) its part count, then every part.
func decodeBatch(p []byte) (WALRecord, error) {
	r := WALRecord{Op: WALOp(p[0])}
	header, minParts := batchHeaderLen, uint32(1)
	if r.Op == WALOpExternal {
		header, minParts = extHeaderLen, 0
	}
	if len(p) < header {
		return badRecord("%s record is %d bytes, need at least %d", r.Op, len(p), header)
	}
	if r.Op == WALOpExternal {
		r.Seq = binary.LittleEndian.Uint64(p[1:])
	}
	n := binary.LittleEndian.Uint32(p[header-4:])
	rest := p[header:]
	if n < minParts || uint64(n) > uint64(len(rest)/minPartLen) {
		return badRecord("%s record declares %d parts in %d bytes", r.Op, n, len(p))
	}
	r.Parts = make([]WALRecord, n)
	for i := range r.Parts {
		if len(rest) > 0 && (WALOp(rest[0]) == WALOpBatch || WALOp(rest[0]) == WALOpExternal || WALOp(rest[0]) == WALOpLoad) {
			return badRecord("%s record part %d is a %s record", r.Op, i, WALOp(rest[0]))
		}
		part, used, err := decodeOp(rest, false)
		if err != nil {
			return WALRecord{}, fmt.Errorf("%s record part %d at offset %d: %w", r.Op, i, len(p)-len(rest), err)
		}
		r.Parts[i] = part
		rest = rest[used:]
	}
	if len(rest) != 0 {
		return badRecord("%s record has %d bytes after its %d parts", r.Op, len(rest), n)
	}
	return r, nil
}

// decodeOp decodes the hash, words or (whole only) load record at the
// start of p and returns it with its length. whole says p must be that
// record alone (the error texts of a lone record then give the payload's
// length).
func decodeOp(p []byte, whole bool) (WALRecord, int, error) {
	bad := func(format string, args ...any) (WALRecord, int, error) {
		r, err := badRecord(format, args...)
		return r, 0, err
	}
	if len(p) == 0 {
		return bad("empty payload")
	}
	le := binary.LittleEndian
	switch WALOp(p[0]) {
	case WALOpLoad:
		if !whole || len(p) != loadRecordLen {
			return bad("load record is %d bytes, want %d", len(p), loadRecordLen)
		}
		return WALRecord{Op: WALOpLoad, FilterID: le.Uint64(p[1:])}, loadRecordLen, nil
	case WALOpHash:
		if len(p) < hashRecordLen || whole && len(p) != hashRecordLen {
			return bad("hash record is %d bytes, want %d", len(p), hashRecordLen)
		}
		return WALRecord{Op: WALOpHash, FilterID: le.Uint64(p[1:]), Layer: int(p[9]), Hash: le.Uint64(p[10:])}, hashRecordLen, nil
	case WALOpWords:
		if len(p) < wordsHeaderLen {
			return bad("words record is %d bytes, need at least %d", len(p), wordsHeaderLen)
		}
		n := le.Uint32(p[11:])
		size := wordsHeaderLen + 16*int(n)
		if n > maxRecordWrites || len(p) < size || whole && len(p) != size {
			return bad("words record declares %d writes in %d bytes", n, len(p))
		}
		r := WALRecord{Op: WALOpWords, FilterID: le.Uint64(p[1:]), Layer: int(p[9]), Delta: int8(p[10]), Writes: make([]WordWrite, n)}
		for i := range r.Writes {
			q := p[wordsHeaderLen+16*i:]
			r.Writes[i] = WordWrite{Index: le.Uint64(q), Value: le.Uint64(q[8:])}
		}
		return r, size, nil
	}
	return bad("unknown op %d", p[0])
}
