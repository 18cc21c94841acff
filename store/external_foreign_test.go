package store

import (
	"errors"
	"testing"
)

// TestExternalEncodeBeforeReplayRefused: an engine that encodes a new
// batch before replaying its log gets, from Encode, a seq that a record
// of the earlier process already holds. Whichever of the two records
// arrives second must not be taken for a replay and dropped: the earlier
// process's record is refused with ErrInvalid, whenever it arrives, and
// the record encoded here applies. Before, the first to arrive applied
// and the other returned nil results with its ops dropped, silently (an
// adversarial test's finding). A record of the earlier process with a
// seq Encode has not reached yet is refused too, and so is its abort.
func TestExternalEncodeBeforeReplayRefused(t *testing.T) {
	for _, oldFirst := range []bool{true, false} {
		name := map[bool]string{true: "old record first", false: "new record first"}[oldFirst]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, b, _, _ := openExternal(t, dir)
			encode := func(s *Store, b *Bloom, key string) []byte {
				bt := s.NewBatch()
				bt.BloomAdd(b, []byte(key))
				rec, err := bt.Encode()
				must(t, err)
				return rec
			}
			// The engine committed two records, then died before applying
			// them.
			old1, old2 := encode(s, b, "old-1"), encode(s, b, "old-2")
			must(t, s.Close())

			s, b, _, _ = openExternal(t, dir)
			defer s.Close()
			fresh := encode(s, b, "new") // seq 1 again: the engine did not replay
			if seq, _ := ExternalSeq(fresh); seq != 1 {
				t.Fatalf("the new record has seq %d, want 1 (the test's premise)", seq)
			}
			if oldFirst {
				if _, err := s.ApplyExternal(old1); !errors.Is(err, ErrInvalid) {
					t.Fatalf("ApplyExternal of the earlier process's seq 1, with seq 1 encoded here: %v, want ErrInvalid", err)
				}
				if err := s.AbortExternal(old1); !errors.Is(err, ErrInvalid) {
					t.Fatalf("AbortExternal of the earlier process's seq 1: %v, want ErrInvalid", err)
				}
			}
			if res, err := s.ApplyExternal(fresh); err != nil || len(res) != 1 || !res[0] {
				t.Fatalf("ApplyExternal of the record encoded here: %v, %v; want [true], nil", res, err)
			}
			if !oldFirst {
				if _, err := s.ApplyExternal(old1); !errors.Is(err, ErrInvalid) {
					t.Fatalf("ApplyExternal of the earlier process's seq 1, after seq 1 applied here: %v, want ErrInvalid", err)
				}
			}
			if _, err := s.ApplyExternal(old2); !errors.Is(err, ErrInvalid) {
				t.Fatalf("ApplyExternal of the earlier process's seq 2, beyond the seqs encoded here: %v, want ErrInvalid", err)
			}
			if !b.Has([]byte("new")) {
				t.Fatal("the record encoded here was dropped")
			}
			// A replay of this process's own record is still a replay.
			if res, err := s.ApplyExternal(fresh); err != nil || res != nil {
				t.Fatalf("ApplyExternal of the applied record again: %v, %v; want nil, nil", res, err)
			}
			// The next Encode goes on from seq 2.
			if seq, _ := ExternalSeq(encode(s, b, "next")); seq != 2 {
				t.Fatalf("next seq %d, want 2", seq)
			}
		})
	}
}

// encodeBit encodes a batch setting bit off of m.
func encodeBit(t *testing.T, s *Store, m *Bitmap, off uint64) []byte {
	t.Helper()
	bt := s.NewBatch()
	bt.BitmapSet(m, off)
	rec, err := bt.Encode()
	must(t, err)
	return rec
}

// TestExternalEncodeAfterPartialReplayRefused: the engine replays part of
// its log, then encodes, then replays the rest: the earlier process's
// record with the seq Encode handed out again is refused, and the record
// encoded here applies. Before a review's fix, a replayed record left the
// check off for the rest of the process (the seq its apply raised was
// taken for one Encode had handed out), and the record encoded here was
// dropped as a replay.
func TestExternalEncodeAfterPartialReplayRefused(t *testing.T) {
	dir := t.TempDir()
	s, _, _, m := openExternal(t, dir)
	old1, old2 := encodeBit(t, s, m, 1), encodeBit(t, s, m, 2)
	must(t, s.Close())

	s, _, _, m = openExternal(t, dir)
	defer s.Close()
	if _, err := s.ApplyExternal(old1); err != nil {
		t.Fatal(err)
	}
	fresh := encodeBit(t, s, m, 40)
	if seq, _ := ExternalSeq(fresh); seq != 2 {
		t.Fatalf("the new record has seq %d, want 2 (the test's premise)", seq)
	}
	if _, err := s.ApplyExternal(old2); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ApplyExternal of the earlier process's seq 2 after seq 2 was encoded here: %v, want ErrInvalid", err)
	}
	if res, err := s.ApplyExternal(fresh); err != nil || len(res) != 1 || !res[0] || !m.Get(40) {
		t.Fatalf("ApplyExternal of the record encoded here: %v, %v, bit %v; want [true], nil, set", res, err, m.Get(40))
	}
}

// TestExternalEncodeDuringReplayGetsNextSeq: the first Encode runs while
// a replayed record of an earlier process is being applied (its seq not
// yet counted as applied): Encode hands out the seq after it. Before a
// review's fix it handed out the same seq, and the record encoded here
// was then dropped as a replay.
func TestExternalEncodeDuringReplayGetsNextSeq(t *testing.T) {
	dir := t.TempDir()
	s, _, _, m := openExternal(t, dir)
	old1 := encodeBit(t, s, m, 1)
	must(t, s.Close())

	s, _, _, m = openExternal(t, dir)
	defer s.Close()
	inRun, release := make(chan struct{}), make(chan struct{})
	s.ext.mu.Lock()
	s.ext.beforeRun = func() { close(inRun); <-release }
	s.ext.mu.Unlock()
	done := make(chan error, 1)
	go func() { _, err := s.ApplyExternal(old1); done <- err }()
	<-inRun
	s.ext.mu.Lock()
	s.ext.beforeRun = nil
	s.ext.mu.Unlock()
	fresh := encodeBit(t, s, m, 40)
	close(release)
	must(t, <-done)
	if seq, _ := ExternalSeq(fresh); seq != 2 {
		t.Fatalf("Encode during the replay of seq 1 handed out seq %d, want 2", seq)
	}
	if res, err := s.ApplyExternal(fresh); err != nil || len(res) != 1 || !res[0] || !m.Get(40) || !m.Get(1) {
		t.Fatalf("ApplyExternal of the record encoded here: %v, %v, bits 1 %v 40 %v; want [true], nil, both set", res, err, m.Get(1), m.Get(40))
	}
}

// TestExternalReplayOfOwnOldRecords: records encoded and applied here,
// more of them than the checksums the store keeps (extReleased), applied
// again are replays (nil results, no error), the oldest too; a record of
// another process with one of their seqs is refused while its seq's
// checksum is kept.
func TestExternalReplayOfOwnOldRecords(t *testing.T) {
	dir := t.TempDir()
	s, _, _, m := openExternal(t, dir)
	other := encodeBit(t, s, m, 63) // seq 1 of this "earlier process"
	must(t, s.Close())

	s, _, _, m = openExternal(t, dir)
	defer s.Close()
	recs := make([][]byte, extReleased+10)
	for i := range recs {
		recs[i] = encodeBit(t, s, m, uint64(i%60))
		if _, err := s.ApplyExternal(recs[i]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	for _, i := range []int{0, 5, len(recs) - 1} {
		if res, err := s.ApplyExternal(recs[i]); err != nil || res != nil {
			t.Fatalf("replay of record %d (seq %d): %v, %v; want nil, nil", i, i+1, res, err)
		}
	}
	// Seq 1's checksum is no longer kept: another record with it passes
	// for a replay (documented). Those of the last extReleased seqs are.
	for _, seq := range []uint64{uint64(len(recs)), uint64(len(recs) - 5), uint64(len(recs) - extReleased + 1)} {
		if _, err := s.ApplyExternal(withExtSeq(other, seq)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("another record with seq %d, applied here: %v, want ErrInvalid", seq, err)
		}
	}
}
