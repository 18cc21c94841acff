package store

import (
	"encoding/binary"
	"fmt"
)

// WAL payloads (the wal package frames them with length, CRC-32C and LSN).
// Little-endian; part of the format:
//
//	opHash  (Bloom add, monotonic):
//	  u8 op=1 | u64 filter id | u8 layer | u64 key hash
//	  replay sets the key's bits in the layer and counts one new item.
//	opWords (cuckoo, counting Bloom, bitmap: non-monotonic):
//	  u8 op=2 | u64 filter id | u8 layer | i8 items delta | u32 n
//	  | n x (u64 word index | u64 value)
//	  after-images in the order they were applied; replay stores them
//	  as absolute values, so replaying twice is harmless.
//
// Records naming a filter id the catalog does not hold (dropped since)
// are skipped by replay.
const (
	opHash  = 1
	opWords = 2

	hashRecordLen   = 1 + 8 + 1 + 8
	wordsHeaderLen  = 1 + 8 + 1 + 1 + 4
	maxRecordWrites = 1 << 16 // a cuckoo kick path is far shorter
)

// wordWrite is one after-image.
type wordWrite struct{ idx, val uint64 }

// record is a decoded WAL payload.
type record struct {
	op     byte
	id     uint64
	layer  int
	hash   uint64      // opHash
	delta  int8        // opWords: change in the layer's item count
	writes []wordWrite // opWords
}

func appendHashRecord(b []byte, id uint64, layer int, h uint64) []byte {
	b = append(b, opHash)
	b = binary.LittleEndian.AppendUint64(b, id)
	b = append(b, byte(layer))
	return binary.LittleEndian.AppendUint64(b, h)
}

func appendWordsRecord(b []byte, id uint64, layer int, delta int8, writes []wordWrite) []byte {
	b = append(b, opWords)
	b = binary.LittleEndian.AppendUint64(b, id)
	b = append(b, byte(layer), byte(delta))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(writes)))
	for _, w := range writes {
		b = binary.LittleEndian.AppendUint64(b, w.idx)
		b = binary.LittleEndian.AppendUint64(b, w.val)
	}
	return b
}

// decodeRecord decodes a payload the WAL's CRC already vouched for; a
// failure here means a bug or a foreign log, reported as ErrCorrupt.
func decodeRecord(p []byte) (record, error) {
	bad := func(format string, args ...any) (record, error) {
		return record{}, fmt.Errorf("store: wal record: %w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
	if len(p) == 0 {
		return bad("empty payload")
	}
	le := binary.LittleEndian
	switch p[0] {
	case opHash:
		if len(p) != hashRecordLen {
			return bad("hash record is %d bytes, want %d", len(p), hashRecordLen)
		}
		return record{op: opHash, id: le.Uint64(p[1:]), layer: int(p[9]), hash: le.Uint64(p[10:])}, nil
	case opWords:
		if len(p) < wordsHeaderLen {
			return bad("words record is %d bytes, need at least %d", len(p), wordsHeaderLen)
		}
		n := le.Uint32(p[11:])
		if n > maxRecordWrites || len(p) != wordsHeaderLen+16*int(n) {
			return bad("words record declares %d writes in %d bytes", n, len(p))
		}
		r := record{op: opWords, id: le.Uint64(p[1:]), layer: int(p[9]), delta: int8(p[10]), writes: make([]wordWrite, n)}
		for i := range r.writes {
			q := p[wordsHeaderLen+16*i:]
			r.writes[i] = wordWrite{idx: le.Uint64(q), val: le.Uint64(q[8:])}
		}
		return r, nil
	}
	return bad("unknown op %d", p[0])
}
