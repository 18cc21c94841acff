package format

import (
	"errors"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/fserr"
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
	for _, name := range []string{"batch-0", "batch-nested", "batch-short", "batch-long", "batch-header", "batch-count-max"} {
		if _, err := DecodeWALRecord(seeds[name]); !errors.Is(err, fserr.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
