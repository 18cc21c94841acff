package store

import (
	"testing"
	"time"
)

// TestSyncIntervalLookupsReadOverlay: under SyncInterval an acknowledged
// change may wait in the overlay until the next fsync (here an hour away),
// and every lookup must find it there: single Has and HasHash (which
// therefore take the slow front under SyncInterval), HasMany and the
// counts, on counting and cuckoo filters, for adds and for the adds left
// after deletes.
func TestSyncIntervalLookupsReadOverlay(t *testing.T) {
	const n = 2000
	s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, SyncEvery: time.Hour, CheckpointEvery: -1})
	defer s.Close()
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 4 * n})
	must(t, err)
	nf, err := s.CreateCounting("n", BloomConfig{Capacity: 4 * n})
	must(t, err)
	for i := range n {
		must(t, c.Add(key(i)))
		must(t, nf.Add(key(i)))
	}
	for i := 0; i < n; i += 2 {
		if ok, err := c.Delete(key(i)); !ok || err != nil {
			t.Fatalf("cuckoo Delete(key %d) = %v, %v", i, ok, err)
		}
		if ok, err := nf.Delete(key(i)); !ok || err != nil {
			t.Fatalf("counting Delete(key %d) = %v, %v", i, ok, err)
		}
	}
	if c.b.ov.size.Load() == 0 || nf.b.ov.size.Load() == 0 {
		t.Fatalf("the changes are not waiting in the overlays (sizes %d, %d): the test shows nothing", c.b.ov.size.Load(), nf.b.ov.size.Load())
	}
	keys := make([][]byte, 0, n/2)
	for i := 1; i < n; i += 2 {
		keys = append(keys, key(i))
	}
	cm, nm := c.HasMany(keys), nf.HasMany(keys)
	for j, k := range keys {
		h := Hash(k)
		for _, r := range []struct {
			name string
			ok   bool
		}{
			{"cuckoo Has", c.Has(k)}, {"cuckoo HasHash", c.HasHash(h)}, {"cuckoo HasMany", cm[j]}, {"cuckoo Count", c.Count(k) >= 1},
			{"counting Has", nf.Has(k)}, {"counting HasHash", nf.HasHash(h)}, {"counting HasMany", nm[j]}, {"counting Count", nf.Count(k) >= 1},
		} {
			if !r.ok {
				t.Fatalf("%s(%q): absent, but its add was acknowledged (and the key not deleted)", r.name, k)
			}
		}
	}
}
