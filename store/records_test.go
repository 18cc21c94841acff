package store

import (
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/wal"
)

// TestRecordsMatchReference: records, which encodes each part once,
// makes the payloads that encoding each part to measure it and then each
// payload whole makes (refPartRecords, what partRecords did before),
// byte for byte, with the same payload of each part: random mixes of
// hash parts and words parts of up to 1 MiB, a few payloads' worth.
func TestRecordsMatchReference(t *testing.T) {
	r := testseed.New(t)
	ws := make([]format.WordWrite, 1<<16)
	for i := range ws {
		ws[i] = format.WordWrite{Index: r.Uint64(), Value: r.Uint64()}
	}
	rounds := 12
	if testing.Short() {
		rounds = 3
		if racedetect.Enabled { // one goroutine: the race detector finds nothing here
			rounds = 2 // round 0 is the empty batch: one random round
		}
	}
	for round := range rounds + 2 {
		var parts []format.WALRecord
		limit := r.IntN(3 * wal.MaxRecordSize)
		if round == 0 {
			limit = 0 // no part
		}
		if round >= rounds {
			// Parts whose batch record is exactly the largest payload,
			// then one byte more: one payload, then two.
			parts = partsOfSize(t, ws, wal.MaxRecordSize+round-rounds)
			limit = 0
		}
		for size := 0; size < limit; {
			p := format.WALRecord{Op: format.WALOpHash, FilterID: r.Uint64(), Layer: r.IntN(64), Hash: r.Uint64()}
			if r.IntN(3) == 0 {
				w := ws[:r.IntN(len(ws)+1)]
				if r.IntN(2) == 0 {
					w = ws[:len(ws)-r.IntN(8)] // near the largest
				}
				p = format.WALRecord{Op: format.WALOpWords, FilterID: r.Uint64(), Layer: r.IntN(64), Delta: int8(r.IntN(3) - 1), Writes: w}
			}
			parts = append(parts, p)
			size += 20 + 16*len(p.Writes)
		}
		want, wantRec := refPartRecords(parts)
		if round >= rounds && len(want) != 1+round-rounds {
			t.Fatalf("%d payloads for a batch of %d bytes", len(want), wal.MaxRecordSize+round-rounds)
		}
		got, gotRec := partRecords(parts)
		if len(got) != len(want) || !slices.Equal(gotRec, wantRec) {
			t.Fatalf("round %d: %d parts: %d payloads, want %d (or the parts' payloads differ)", round, len(parts), len(got), len(want))
		}
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("round %d: payload %d of %d differs (%d bytes, want %d)", round, i, len(want), len(got[i]), len(want[i]))
			}
		}
		plans := make([]batchPlan, len(parts)+len(parts)/2)
		j := 0
		for i := range plans {
			if j < len(parts) && r.IntN(3) != 0 || len(plans)-i == len(parts)-j {
				plans[i].part = &parts[j]
				j++
			}
		}
		got, recOf := planRecords(plans)
		if len(got) != len(want) {
			t.Fatalf("round %d: planRecords made %d payloads, want %d", round, len(got), len(want))
		}
		j = 0
		for i, p := range plans {
			if p.part == nil && recOf[i] != -1 || p.part != nil && recOf[i] != wantRec[j] {
				t.Fatalf("round %d: plan %d: payload %d", round, i, recOf[i])
			}
			if p.part != nil {
				j++
			}
		}
	}
}

// refPartRecords is the reference encoding of parts into payloads: each
// part encoded to measure it, each payload encoded whole.
func refPartRecords(parts []format.WALRecord) (payloads [][]byte, recOf []int) {
	recOf = make([]int, len(parts))
	header := len(format.AppendWALRecord(nil, format.WALRecord{Op: format.WALOpBatch}))
	var buf []byte
	first, size := 0, header
	flush := func(end int) {
		switch end - first {
		case 0:
			return
		case 1:
			payloads = append(payloads, format.AppendWALRecord(nil, parts[first]))
		default:
			payloads = append(payloads, format.AppendWALRecord(nil, format.WALRecord{Op: format.WALOpBatch, Parts: parts[first:end]}))
		}
		first, size = end, header
	}
	for i, p := range parts {
		buf = format.AppendWALRecord(buf[:0], p)
		if size+len(buf) > wal.MaxRecordSize {
			flush(i)
		}
		size += len(buf)
		recOf[i] = len(payloads)
	}
	flush(len(parts))
	return payloads, recOf
}

// partsOfSize returns hash and words parts (of writes from ws) whose
// batch record is size bytes.
func partsOfSize(t *testing.T, ws []format.WordWrite, size int) []format.WALRecord {
	header := len(batchHeader)
	hash := len(format.AppendWALRecord(nil, format.WALRecord{Op: format.WALOpHash}))
	words := len(format.AppendWALRecord(nil, format.WALRecord{Op: format.WALOpWords})) // and 16 bytes a write
	for a := 1; a < 64; a++ {
		for b := range 16 {
			rest := size - header - a*words - b*hash
			if rest < 0 || rest%16 != 0 || rest/16 > a*len(ws) {
				continue
			}
			var parts []format.WALRecord
			for i, w := 0, rest/16; i < a; i++ {
				n := min(w, len(ws))
				parts = append(parts, format.WALRecord{Op: format.WALOpWords, FilterID: 1, Writes: ws[:n]})
				w -= n
			}
			for range b {
				parts = append(parts, format.WALRecord{Op: format.WALOpHash, FilterID: 2, Hash: uint64(b)})
			}
			if got := len(format.AppendWALRecord(nil, format.WALRecord{Op: format.WALOpBatch, Parts: parts})); got != size {
				t.Fatalf("parts of %d bytes, want %d", got, size)
			}
			return parts
		}
	}
	t.Fatalf("no parts make %d bytes", size)
	return nil
}
