package blackbox_test

import (
	"os"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

// Commit: "ErrInvalid (... a batch whose WAL record would pass the WAL's
// limit of 16 MiB, about 900,000 Bloom adds: split it)"; AddMany: "one WAL
// write and one sync (more only past the WAL's 16 MiB record limit, about
// 900,000 new keys a record)".
func TestRecordLimit(t *testing.T) {
	if os.Getenv("FILTERSTORE_BLACKBOX_SLOW") == "" {
		t.Skip("about 2.5 s (1e6 keys); set FILTERSTORE_BLACKBOX_SLOW=1")
	}
	s, _ := newStore(t, &store.Options{CheckpointEvery: -1, CheckpointBytes: 1 << 30})
	b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 3_000_000})
	const n = 1_000_000
	hs := make([]uint64, n)
	for i := range hs {
		hs[i] = store.Hash(keyN("lim", i))
	}
	bt := s.NewBatch()
	for _, h := range hs {
		bt.BloomAddHash(b, h)
	}
	start := time.Now()
	_, err := bt.Commit()
	wantIs(t, "Commit of 1e6 Bloom adds", err, store.ErrInvalid)
	if b.HasHash(hs[0]) && b.HasHash(hs[n-1]) {
		t.Error("refused batch set bits")
	}
	st0 := s.Stats().WAL
	res, err := b.AddManyHash(hs)
	must(t, err)
	st1 := s.Stats().WAL
	newKeys := 0
	for _, r := range res {
		if r {
			newKeys++
		}
	}
	t.Logf("AddManyHash of %d (%d new): %d records, %d syncs, %v", n, newKeys, st1.Records-st0.Records, st1.Syncs-st0.Syncs, time.Since(start))
	if st1.Records-st0.Records != 2 {
		t.Errorf("AddMany of 1e6 new keys took %d records, want 2 (about 900,000 a record)", st1.Records-st0.Records)
	}
}
