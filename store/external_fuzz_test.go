package store

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// FuzzApplyExternal: ApplyExternal of any bytes either applies them or
// fails with ErrCorrupt or ErrInvalid; it never panics, never fails the
// store, and a record it accepts reports one result per op. raw sends the
// input as it is; otherwise the harness wraps it in a well-formed header
// and checksum, so that the ops behind them are what is fuzzed: each 10
// input bytes are an op (kind, a selector of one of the store's filters
// or an unknown id, the 8-byte argument), and seq either follows the
// highest applied one or is the fuzzed one.
func FuzzApplyExternal(f *testing.F) {
	s, err := Open(f.TempDir(), WithSeams(Options{Sync: SyncInterval, CheckpointEvery: -1}, mmapbits.NewSim(), wal.NewMemFS()))
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	var ids []uint64
	for _, create := range []func() (handle, error){
		func() (handle, error) { return s.CreateBloom("b", BloomConfig{Capacity: 50, ErrorRate: 0.1}) },
		func() (handle, error) {
			return s.CreateCuckoo("c", CuckooConfig{Capacity: 8, BucketSize: 2, FingerprintBits: 8, NonScaling: true})
		},
		func() (handle, error) { return s.CreateCounting("n", BloomConfig{Capacity: 50}) },
		func() (handle, error) { return s.CreateBitmap("m", 100) },
	} {
		h, err := create()
		if err != nil {
			f.Fatal(err)
		}
		ids = append(ids, h.base().id)
	}
	bt := s.NewBatch()
	bl, _ := s.Bloom("b")
	bt.BloomAdd(bl, []byte("k"))
	rec, err := bt.Encode()
	if err != nil {
		f.Fatal(err)
	}
	// Only its bytes are wanted: left pending, its seq would hold back
	// every later one in a worker whose first input is not this seed
	// (with -parallel 2 a worker that began with seed#3, seq 1<<40, hung).
	if err := s.AbortExternal(rec); err != nil {
		f.Fatal(err)
	}
	f.Add(rec, true, uint64(0))
	f.Add([]byte{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 1, 9, 9, 9, 9, 9, 9, 9, 9}, false, uint64(0))
	f.Add([]byte{2, 1, 1, 2, 3, 4, 5, 6, 7, 8, 5, 3, 99, 0, 0, 0, 0, 0, 0, 0, 9, 4}, false, uint64(0))
	f.Add([]byte{6, 3, 7, 0, 0, 0, 0, 0, 0, 0}, false, uint64(1<<40))

	f.Fuzz(func(t *testing.T, in []byte, raw bool, seq uint64) {
		rec := in
		n := len(in) / 10
		if !raw {
			le := binary.LittleEndian
			if seq == 0 {
				s.ext.mu.Lock()
				seq = s.ext.applied + 1
				s.ext.mu.Unlock()
			}
			rec = append([]byte(extMagic), extVersion)
			rec = le.AppendUint64(rec, s.id)
			rec = le.AppendUint64(rec, seq)
			rec = le.AppendUint32(rec, uint32(n))
			for i := range n {
				op := in[10*i:]
				id := uint64(1) << 60 // no such filter
				if sel := int(op[1]); sel < len(ids) {
					id = ids[sel]
				}
				rec = append(rec, op[0])
				rec = le.AppendUint64(rec, id)
				rec = append(rec, op[2:10]...)
			}
			rec = le.AppendUint32(rec, crc.Checksum(rec))
		}
		res, err := s.ApplyExternal(rec)
		if ferr := s.failed(); ferr != nil {
			t.Fatalf("ApplyExternal of a record failed the store: %v (it returned %v)", ferr, err)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("ApplyExternal: %v, want ErrCorrupt or ErrInvalid", err)
			}
			return
		}
		if res != nil && len(res) != n && !raw {
			t.Fatalf("ApplyExternal of %d ops returned %d results", n, len(res))
		}
	})
}
