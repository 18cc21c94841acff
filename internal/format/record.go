package format

import (
	"encoding/binary"
	"fmt"

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
)

// String returns "hash", "words", or "op(N)" for an unknown op.
func (op WALOp) String() string {
	switch op {
	case WALOpHash:
		return "hash"
	case WALOpWords:
		return "words"
	}
	return fmt.Sprintf("op(%d)", uint8(op))
}

// Payload sizes; part of the format.
const (
	hashRecordLen   = 1 + 8 + 1 + 8
	wordsHeaderLen  = 1 + 8 + 1 + 1 + 4
	maxRecordWrites = 1 << 16 // a cuckoo kick path is far shorter
)

// WALRecord is a store WAL payload, decoded: the one type the store logs
// and replays, cmd/inspect reads and the tests build.
type WALRecord struct {
	Op       WALOp
	FilterID uint64
	Layer    int         // 0..255 on disk; a filter has at most MaxLayers
	Hash     uint64      // WALOpHash: the key's hash
	Delta    int8        // WALOpWords: change of the layer's item count
	Writes   []WordWrite // WALOpWords: after-images, in application order
}

// WordWrite is one after-image: word Index of the layer gets Value.
type WordWrite struct{ Index, Value uint64 }

// AppendWALRecord appends r encoded as a store WAL payload and returns
// the extended slice: a hash record for WALOpHash, a words record for any
// other op (the store logs only these two).
func AppendWALRecord(b []byte, r WALRecord) []byte {
	le := binary.LittleEndian
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

// DecodeWALRecord decodes a store WAL payload, one the WAL's CRC already
// vouched for: a failure means a bug or a foreign log. Every failure wraps
// ErrCorrupt; a declared write count cannot make it allocate more than
// the payload holds.
func DecodeWALRecord(p []byte) (WALRecord, error) {
	bad := func(format string, args ...any) (WALRecord, error) {
		return WALRecord{}, fmt.Errorf("store: wal record: %w: "+format, append([]any{fserr.ErrCorrupt}, args...)...)
	}
	if len(p) == 0 {
		return bad("empty payload")
	}
	le := binary.LittleEndian
	switch WALOp(p[0]) {
	case WALOpHash:
		if len(p) != hashRecordLen {
			return bad("hash record is %d bytes, want %d", len(p), hashRecordLen)
		}
		return WALRecord{Op: WALOpHash, FilterID: le.Uint64(p[1:]), Layer: int(p[9]), Hash: le.Uint64(p[10:])}, nil
	case WALOpWords:
		if len(p) < wordsHeaderLen {
			return bad("words record is %d bytes, need at least %d", len(p), wordsHeaderLen)
		}
		n := le.Uint32(p[11:])
		if n > maxRecordWrites || len(p) != wordsHeaderLen+16*int(n) {
			return bad("words record declares %d writes in %d bytes", n, len(p))
		}
		r := WALRecord{Op: WALOpWords, FilterID: le.Uint64(p[1:]), Layer: int(p[9]), Delta: int8(p[10]), Writes: make([]WordWrite, n)}
		for i := range r.Writes {
			q := p[wordsHeaderLen+16*i:]
			r.Writes[i] = WordWrite{Index: le.Uint64(q), Value: le.Uint64(q[8:])}
		}
		return r, nil
	}
	return bad("unknown op %d", p[0])
}
