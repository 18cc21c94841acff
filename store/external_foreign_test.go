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
