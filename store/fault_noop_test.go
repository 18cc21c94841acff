package store

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// TestFailedStoreAcknowledgesNothing checks the package doc's "No answer
// is acknowledged once the store has failed" and "Every later mutation,
// Load, Checkpoint, Create, Drop and Rename returns an error wrapping
// ErrFailed" for the calls TestSyncFailureFailsStore does not make. It
// fails the store with an EIO from every msync and WAL fdatasync during
// a Checkpoint, then, with the disk working again, makes calls that
// change nothing (a bit already set or clear, keys already present, a
// counting or cuckoo delete of an absent key, no-op batches), and Import,
// Ensure of a new name and the exports: each must return ErrFailed, not
// an answer. Close returns ErrFailed too. (TestBackupRefuses covers
// Backup, which refuses a simulated store before it looks at failure.)
func TestFailedStoreAcknowledgesNothing(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			w := newSimWorld(t, mode)
			fail := &failSwitch{err: syscall.EIO}
			w.sim.SetInjector(fail.sim(mmapbits.OpSync))
			w.fs.SetInjector(fail.wal(wal.OpSync))
			s, err := w.open(t)
			must(t, err)
			b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
			must(t, err)
			c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
			must(t, err)
			n, err := s.CreateCounting("n", BloomConfig{Capacity: 1000})
			must(t, err)
			m, err := s.CreateBitmap("m", 1024)
			must(t, err)
			for i := range 50 {
				must(t, second(b.Add(key(i))))
				must(t, c.Add(key(i)))
				must(t, n.Add(key(i)))
				must(t, second(m.Set(uint64(i))))
			}
			var export bytes.Buffer
			must(t, second(b.WriteTo(&export)))

			fail.on.Store(true)
			if err := s.Checkpoint(); !errors.Is(err, ErrFailed) {
				t.Fatalf("Checkpoint with failing syncs: %v, want ErrFailed", err)
			}
			fail.on.Store(false)

			var out bytes.Buffer
			setBatch := s.NewBatch()
			setBatch.BitmapSet(m, 3) // already set
			addBatch := s.NewBatch()
			addBatch.BloomAdd(b, key(1)) // already present
			for _, op := range []struct {
				name string
				err  error
			}{
				{"bitmap Set of a set bit", second(m.Set(3))},
				{"bitmap Clear of a clear bit", second(m.Clear(900))},
				{"bitmap SetMany of set bits", second(m.SetMany([]uint64{1, 2}))},
				{"bloom Add of a present key", second(b.Add(key(1)))},
				{"bloom AddMany of present keys", second(b.AddMany([][]byte{key(1), key(2)}))},
				{"counting Delete of an absent key", second(n.Delete([]byte("never-added")))},
				{"cuckoo Delete of an absent key", second(c.Delete([]byte("never-added")))},
				{"cuckoo AddNX of a present key", second(c.AddNX(key(1)))},
				{"cuckoo DeleteMany of an absent key", second(c.DeleteMany([][]byte{[]byte("never-added")}))},
				{"Batch of a bitmap Set of a set bit", second(setBatch.Commit())},
				{"Batch of a bloom Add of a present key", second(addBatch.Commit())},
				{"Import", s.Import("imported", bytes.NewReader(export.Bytes()))},
				{"EnsureBitmap of a new name", second(s.EnsureBitmap("new", 64))},
				{"bloom WriteTo", second(b.WriteTo(&out))},
				{"cuckoo WriteTo", second(c.WriteTo(&out))},
			} {
				if !errors.Is(op.err, ErrFailed) {
					t.Errorf("%s on a failed store: %v, want ErrFailed", op.name, op.err)
				}
			}
			if err := s.Close(); !errors.Is(err, ErrFailed) {
				t.Errorf("Close of the failed store: %v, want ErrFailed", err)
			}
		})
	}
}
