package blackbox_test

import (
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

// SyncInterval acknowledges once the record reached the OS; a read-only
// Open made afterwards "never answer[s] "absent" for an item acknowledged
// before Open", although the after-images of cuckoo, counting and bitmap
// changes wait in the writer's overlay until the next sync.
func TestReadOnlySeesUnsyncedSyncInterval(t *testing.T) {
	w, dir := newStore(t, &store.Options{Sync: store.SyncInterval, SyncEvery: time.Hour, CheckpointEvery: -1})
	b, _ := w.CreateBloom("b", store.BloomConfig{})
	c, _ := w.CreateCuckoo("c", store.CuckooConfig{})
	n, _ := w.CreateCounting("n", store.BloomConfig{})
	m, _ := w.CreateBitmap("m", 1000)
	ks := keys("us", 200)
	addToEach(t, ks, b, c, n)
	_, err := m.SetMany([]uint64{1, 500, 999})
	must(t, err)
	bt := w.NewBatch()
	bt.CuckooAdd(c, []byte("batched"))
	bt.BitmapSet(m, 7)
	_, err = bt.Commit()
	must(t, err)
	r := openStore(t, dir, &store.Options{ReadOnly: true})
	defer r.Close()
	rb, _ := r.Bloom("b")
	rc, _ := r.Cuckoo("c")
	rn, _ := r.Counting("n")
	rm, _ := r.Bitmap("m")
	for _, k := range ks {
		if !rb.Has(k) || !rc.Has(k) || !rn.Has(k) {
			t.Fatalf("read-only misses %s acknowledged under SyncInterval", k)
		}
	}
	if got := rc.HasMany(ks); !allTrue(got) {
		t.Error("read-only cuckoo HasMany misses keys")
	}
	if got := rn.HasMany(ks); !allTrue(got) {
		t.Error("read-only counting HasMany misses keys")
	}
	if !rc.Has([]byte("batched")) || !rm.Get(7) || !rm.Get(500) {
		t.Error("read-only misses batch / bitmap changes")
	}
	if got := rm.GetMany([]uint64{1, 500, 999, 7}); !allTrue(got) {
		t.Errorf("read-only GetMany %v", got)
	}
	if rc.Count(ks[3]) < 1 || rn.Count(ks[3]) < 1 {
		t.Error("read-only Count 0 for an acknowledged key")
	}
	if rm.Count() != 4 || rc.Items() != 201 || rn.Items() != 200 {
		t.Errorf("read-only counts: bitmap %d cuckoo %d counting %d", rm.Count(), rc.Items(), rn.Items())
	}
	rep, err := r.Check()
	if err != nil {
		t.Errorf("read-only Check beside writer: %v %+v", err, rep)
	}
	// The writer's later cuckoo changes, synced: the read-only store sees the
	// files as they are; an add after Open may be seen once applied.
	must(t, w.Checkpoint())
	if !rc.Has(ks[0]) {
		t.Error("read-only misses a key after the writer's checkpoint")
	}
}

func allTrue(b []bool) bool {
	for _, v := range b {
		if !v {
			return false
		}
	}
	return true
}

// A read-only store kept open while the writer checkpoints many times and
// deletes its WAL segments still answers every key acknowledged before its
// Open.
func TestReadOnlySurvivesWriterCheckpoints(t *testing.T) {
	w, dir := newStore(t, &store.Options{CheckpointEvery: -1, SegmentSize: 64 << 10, CheckpointBytes: 64 << 10})
	c, _ := w.CreateCuckoo("c", store.CuckooConfig{Capacity: 256})
	ks := keys("ck", 1500)
	_, err := c.AddMany(ks[:500])
	must(t, err)
	r := openStore(t, dir, &store.Options{ReadOnly: true})
	defer r.Close()
	rc, _ := r.Cuckoo("c")
	for i := 500; i < 1500; i += 100 {
		_, err := c.AddMany(ks[i : i+100]) // grows layers
		must(t, err)
		must(t, w.Checkpoint())
	}
	_, err = c.DeleteMany(ks[500:1000])
	must(t, err)
	must(t, w.Checkpoint())
	for _, k := range ks[:500] {
		if !rc.Has(k) {
			t.Fatalf("read-only lost %s after the writer's growth and checkpoints", k)
		}
	}
}
