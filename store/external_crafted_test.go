package store

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/filterstore/filterstore/internal/crc"
)

// TestApplyExternalRefusesImpossibleOps: a record with a valid checksum
// whose op Encode could not have made (a kind that is not its filter's,
// a bitmap offset beyond the bitmap) is ErrCorrupt before anything
// applies: no other op of it takes effect and no filter is marked
// incomplete (before, the other ops applied and an offset beyond the
// bitmap marked it incomplete for good; found by a helper). The engine
// aborts it, and the next record applies.
func TestApplyExternalRefusesImpossibleOps(t *testing.T) {
	s, _, c, m := openExternal(t, t.TempDir())
	defer s.Close()
	le := binary.LittleEndian
	encode := func() []byte {
		bt := s.NewBatch()
		bt.CuckooAdd(c, []byte("g1"))
		bt.BitmapSet(m, 3)
		bt.BitmapSet(m, 4)
		rec, err := bt.Encode()
		must(t, err)
		return rec
	}
	resum := func(r []byte) []byte {
		body := r[:len(r)-4]
		return le.AppendUint32(slices.Clone(body), crc.Checksum(body))
	}
	lastOp := extHeaderLen + 2*extOpLen
	for _, tc := range []struct {
		name  string
		craft func(r []byte)
	}{
		{"a bloom add on the bitmap", func(r []byte) { r[lastOp] = byte(batchBloomAdd) }},
		{"a cuckoo delete on the bitmap", func(r []byte) { r[lastOp] = byte(batchCuckooDelete) }},
		{"a bitmap offset beyond its 64 bits", func(r []byte) { le.PutUint64(r[lastOp+9:], 64) }},
		{"a bitmap offset of 2^40", func(r []byte) { le.PutUint64(r[lastOp+9:], 1<<40) }},
	} {
		rec := encode()
		bad := slices.Clone(rec)
		tc.craft(bad)
		res, err := s.ApplyExternal(resum(bad))
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: ApplyExternal = %v, %v; want ErrCorrupt", tc.name, res, err)
		}
		if c.Has([]byte("g1")) || m.Get(3) {
			t.Fatalf("%s: the record's other ops applied (cuckoo %v, bit 3 %v)", tc.name, c.Has([]byte("g1")), m.Get(3))
		}
		list, err := s.List()
		must(t, err)
		for _, in := range list {
			if in.State != "ok" {
				t.Fatalf("%s: filter %q is %s", tc.name, in.Name, in.State)
			}
		}
		must(t, s.AbortExternal(rec))
	}
	rec := encode()
	if res, err := s.ApplyExternal(rec); err != nil || !slices.Equal(res, []bool{true, true, true}) {
		t.Fatalf("the next record: %v, %v", res, err)
	}
	if !c.Has([]byte("g1")) || !m.Get(3) || !m.Get(4) {
		t.Fatal("the next record's ops are not there")
	}
}
