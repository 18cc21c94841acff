package format

import (
	"errors"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/fserr"
	"github.com/filterstore/filterstore/mmapbits"
)

// TestDecodeBatchRecord: a batch record decodes to its parts in order,
// Ops yields them (and a lone record itself), and each malformed batch
// seed is ErrCorrupt.
func TestDecodeBatchRecord(t *testing.T) {
	seeds := walRecordSeeds()
	r, err := DecodeWALRecord(seeds["batch"])
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for op := range r.Ops() {
		ids = append(ids, op.FilterID)
	}
	if r.Op != WALOpBatch || !slices.Equal(ids, []uint64{42, 3, 7}) || r.Parts[1].Op != WALOpWords || len(r.Parts[1].Writes) != 3 {
		t.Fatalf("batch decoded to %+v", r)
	}
	single := WALRecord{Op: WALOpHash, FilterID: 9}
	for op := range single.Ops() {
		if op.FilterID != 9 {
			t.Fatalf("Ops of a lone record yields %+v", op)
		}
	}
	for _, name := range []string{"batch-0", "batch-nested", "batch-short", "batch-long", "batch-header", "batch-count-max",
		"batch-load", "external-load", "load-short", "load-long"} {
		if _, err := DecodeWALRecord(seeds[name]); !errors.Is(err, fserr.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestLoadRecord: a load record decodes to its filter id alone, Ops
// yields it as itself, CheckRecord accepts it for a filter of any kind
// and layer count, and AppendWALRecord refuses it as a batch part.
func TestLoadRecord(t *testing.T) {
	r, err := DecodeWALRecord(walRecordSeeds()["load"])
	if err != nil {
		t.Fatal(err)
	}
	if r.Op != WALOpLoad || r.FilterID != 1<<40+7 || r.Op.String() != "load" {
		t.Fatalf("load record decoded to %+v", r)
	}
	n := 0
	for op := range r.Ops() {
		if op.Op != WALOpLoad || op.FilterID != r.FilterID {
			t.Fatalf("Ops of a load record yields %+v", op)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("Ops of a load record yields %d ops", n)
	}
	for _, k := range []mmapbits.Kind{mmapbits.KindBloom, mmapbits.KindCuckoo, mmapbits.KindCounting, mmapbits.KindBitmap} {
		if err := (&FilterMeta{ID: 7, Kind: k}).CheckRecord(r); err != nil {
			t.Errorf("%v filter with no layers refuses a load record: %v", k, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a batch with a load part encoded")
		}
	}()
	AppendWALRecord(nil, WALRecord{Op: WALOpBatch, Parts: []WALRecord{r}})
}

// TestSetBatchParts: a batch header with parts appended one by one and its
// count set by SetBatchParts encodes as AppendWALRecord encodes the batch;
// SetBatchParts refuses a record that is not a batch.
func TestSetBatchParts(t *testing.T) {
	parts := []WALRecord{
		{Op: WALOpHash, FilterID: 42, Layer: 1, Hash: 7},
		{Op: WALOpWords, FilterID: 3, Writes: []WordWrite{{Index: 1, Value: 2}}},
		{Op: WALOpHash, FilterID: 9, Hash: 1 << 60},
	}
	want := AppendWALRecord(nil, WALRecord{Op: WALOpBatch, Parts: parts})
	got := AppendWALRecord(nil, WALRecord{Op: WALOpBatch})
	for _, p := range parts {
		got = AppendWALRecord(got, p)
	}
	SetBatchParts(got, len(parts))
	if !slices.Equal(got, want) {
		t.Fatalf("SetBatchParts: %x, want %x", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("SetBatchParts of a hash record did not panic")
		}
	}()
	SetBatchParts(AppendWALRecord(nil, parts[0]), 1)
}

// TestEncodedLen: EncodedLen is the length AppendWALRecord encodes, for
// every kind of record, empty and full.
func TestEncodedLen(t *testing.T) {
	hash := WALRecord{Op: WALOpHash, FilterID: 42, Layer: 3, Hash: 7}
	words := WALRecord{Op: WALOpWords, FilterID: 3, Delta: -1, Writes: []WordWrite{{1, 2}, {3, 4}, {5, 6}}}
	for name, r := range map[string]WALRecord{
		"hash":           hash,
		"words":          words,
		"words-none":     {Op: WALOpWords, FilterID: 1},
		"batch":          {Op: WALOpBatch, Parts: []WALRecord{hash, words, hash}},
		"external":       {Op: WALOpExternal, Seq: 9, Parts: []WALRecord{words, hash}},
		"external-empty": {Op: WALOpExternal, Seq: 1},
		"load":           {Op: WALOpLoad, FilterID: 5},
	} {
		if got, want := r.EncodedLen(), len(AppendWALRecord(nil, r)); got != want {
			t.Errorf("%s: EncodedLen %d, encoded %d bytes", name, got, want)
		}
	}
}
