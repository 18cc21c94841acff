package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/internal/format"
)

// Regression tests for what the tenth session's adversarial reviews found.

// withExtSeq returns rec, an external record, with its seq replaced and
// its CRC fixed: a whole record of this store, as an engine's log could
// hold after damage the CRC does not catch, or a hand-made one.
func withExtSeq(rec []byte, seq uint64) []byte {
	out := append([]byte(nil), rec[:len(rec)-4]...)
	binary.LittleEndian.PutUint64(out[13:], seq)
	return binary.LittleEndian.AppendUint32(out, crc.Checksum(out))
}

// TestExternalLastSeqRefused: a record whose seq is MaxUint64 was applied,
// and the store's seqs wrapped to 0: Encode handed out seq 0, a record its
// own decoder refuses (so AbortExternal could not release it either), and
// every later ApplyExternal waited behind it forever. Now such a record is
// refused as damaged, Encode fails with ErrFull once the last seq is
// taken, and Open refuses a catalog that records a seq beyond the last.
func TestExternalLastSeqRefused(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100})
	must(t, err)
	encode := func(key string) ([]byte, error) {
		bt := s.NewBatch()
		bt.BloomAdd(b, []byte(key))
		return bt.Encode()
	}
	rec, err := encode("x")
	must(t, err)
	must(t, s.AbortExternal(rec))
	// Records made by hand, as an earlier process's: applied before this
	// process encodes (after an Encode, a record not encoded here with a
	// seq past the first it handed out is refused).
	must(t, s.Close())
	s = mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
	b, err = s.Bloom("b")
	must(t, err)
	last := withExtSeq(rec, math.MaxUint64)
	if _, err := s.ApplyExternal(last); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ApplyExternal of a record with seq MaxUint64: %v, want ErrCorrupt", err)
	}
	if _, err := ExternalSeq(last); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ExternalSeq of a record with seq MaxUint64: %v, want ErrCorrupt", err)
	}
	// The last seq a record can carry applies; then Encode has none left.
	if _, err := s.ApplyExternal(withExtSeq(rec, math.MaxUint64-1)); err != nil {
		t.Fatalf("ApplyExternal of a record with seq MaxUint64-1: %v", err)
	}
	if _, err := encode("y"); !errors.Is(err, ErrFull) {
		t.Fatalf("Encode after seq MaxUint64-1 applied: %v, want ErrFull", err)
	}
	if !b.Has([]byte("x")) {
		t.Fatal("the key of the last record reads absent")
	}
	must(t, s.Close())

	// A catalog recording seq MaxUint64 (written by hand: no store does).
	db, err := bolt.Open(filepath.Join(dir, format.CatalogName), 0o644, nil)
	must(t, err)
	must(t, db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket([]byte(format.BucketMeta)).Put([]byte(format.KeyExternal), binary.LittleEndian.AppendUint64(nil, math.MaxUint64)); err != nil {
			return err
		}
		return catalog.Seal(tx) // the checksum passes: the seq is what is refused
	}))
	must(t, db.Close())
	if s, err := Open(dir, nil); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open of a catalog whose external seq is MaxUint64: %v, want ErrCorrupt", err)
	}
}

// TestExternalMarksDroppedWithoutExternalDurable: the store kept one mark
// per applied external record until ExternalDurable was called, so an
// engine that reads it only at restart (as the protocol allows) grew the
// list for the store's whole life (200,000 marks after 200,000 applies).
// Now a checkpoint drops the marks it covers and every background sync
// those it made durable.
func TestExternalMarksDroppedWithoutExternalDurable(t *testing.T) {
	// No background sync during the test (it trims marks too, and would
	// race the checks): the test syncs itself.
	s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, SyncEvery: time.Hour, CheckpointEvery: -1})
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 10000})
	must(t, err)
	var seq uint64
	apply := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			bt := s.NewBatch()
			bt.BloomAdd(b, []byte{byte(i), byte(i >> 8), byte(seq)})
			rec, err := bt.Encode()
			must(t, err)
			if _, err := s.ApplyExternal(rec); err != nil {
				t.Fatal(err)
			}
			seq++
		}
	}
	marks := func() int {
		s.ext.marksMu.Lock()
		defer s.ext.marksMu.Unlock()
		return len(s.ext.marks)
	}
	apply(500)
	if n := marks(); n != 500 {
		t.Fatalf("%d marks after 500 applies with no sync", n)
	}
	s.checkpointedExternal(seq) // what a checkpoint that covered them all calls
	if n := marks(); n != 0 {
		t.Fatalf("%d marks after a checkpoint covered every applied record", n)
	}
	apply(500)
	must(t, s.Checkpoint())
	if n := marks(); n != 0 {
		t.Fatalf("%d marks after Checkpoint", n)
	}
	apply(500)
	must(t, s.log.Sync())
	s.applySynced() // what the background goroutine runs after each sync
	if n := marks(); n != 0 {
		t.Fatalf("%d marks after a sync covered every applied record", n)
	}
	if got := s.ExternalDurable(); got != seq {
		t.Fatalf("ExternalDurable %d after %d records applied and synced", got, seq)
	}
}

// TestReadOnlyExternalDurable: a read-only open reported 0, though its
// catalog records the seq its writer's last checkpoint covered.
func TestReadOnlyExternalDurable(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{Sync: SyncInterval})
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100})
	must(t, err)
	for i := 0; i < 5; i++ {
		bt := s.NewBatch()
		bt.BloomAdd(b, []byte{byte(i)})
		rec, err := bt.Encode()
		must(t, err)
		if _, err := s.ApplyExternal(rec); err != nil {
			t.Fatal(err)
		}
	}
	must(t, s.Close())
	r := mustOpen(t, dir, &Options{ReadOnly: true})
	defer r.Close()
	if got := r.ExternalDurable(); got != 5 {
		t.Fatalf("read-only ExternalDurable %d, want 5 (the catalog's)", got)
	}
}

// TestExternalOutOfOrderReplayRefused: after a restart nothing is pending,
// so an engine that replays its records on several goroutines can apply
// seq 2 before seq 1; seq 1 then read as a replay of an applied record
// (seq <= applied) and returned nil, nil with none of its ops applied: its
// cuckoo key read absent. Now a seq that was passed over (and an aborted
// one applied after all) is refused with ErrInvalid, while a replay of a
// record that did apply still changes nothing.
func TestExternalOutOfOrderReplayRefused(t *testing.T) {
	dir := t.TempDir()
	opts := &Options{Sync: SyncInterval, CheckpointEvery: -1}
	s := mustOpen(t, dir, opts)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
	must(t, err)
	var recs [][]byte
	for i := 0; i < 3; i++ {
		bt := s.NewBatch()
		bt.CuckooAdd(c, []byte{'k', byte(i)})
		rec, err := bt.Encode()
		must(t, err)
		recs = append(recs, rec)
	}
	for _, rec := range recs {
		must(t, s.AbortExternal(rec)) // the store "crashes" before any applies
	}
	must(t, s.Close())

	s = mustOpen(t, dir, opts)
	defer s.Close()
	c, err = s.Cuckoo("c")
	must(t, err)
	if d := s.ExternalDurable(); d != 0 {
		t.Fatalf("ExternalDurable %d, want 0", d)
	}
	// The replay, out of order: seq 2 first.
	if _, err := s.ApplyExternal(recs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyExternal(recs[0]); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ApplyExternal of seq 1 after seq 2: %v, want ErrInvalid", err)
	}
	// A replay of a record that applied changes nothing, as before.
	if res, err := s.ApplyExternal(recs[1]); err != nil || res != nil {
		t.Fatalf("ApplyExternal of seq 2 again: %v, %v; want nil, nil", res, err)
	}
	if _, err := s.ApplyExternal(recs[2]); err != nil {
		t.Fatal(err)
	}
	if n := c.Count([]byte{'k', 1}); n != 1 {
		t.Fatalf("count of seq 2's key %d, want 1", n)
	}

	// Within one process: an aborted seq applied after a later one.
	var more [][]byte
	for i := 0; i < 2; i++ {
		bt := s.NewBatch()
		bt.CuckooAdd(c, []byte{'m', byte(i)})
		rec, err := bt.Encode()
		must(t, err)
		more = append(more, rec)
	}
	must(t, s.AbortExternal(more[0]))
	if _, err := s.ApplyExternal(more[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyExternal(more[0]); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ApplyExternal of an aborted seq after a later one applied: %v, want ErrInvalid", err)
	}
}

// TestWALExternalLastSeqRefused: a WAL external record with seq MaxUint64,
// which a build before the fix logged when it applied such a record, was
// recovered at Open: ExternalDurable then reported MaxUint64 (the engine
// may delete every record), every apply was skipped, and the store's own
// Close wrote a catalog the next Open refused. Now Open refuses the WAL
// record as damaged, before it changes anything.
func TestWALExternalLastSeqRefused(t *testing.T) {
	dir := t.TempDir()
	opts := &Options{Sync: SyncInterval, CheckpointEvery: -1}
	s := mustOpen(t, dir, opts)
	_, err := s.CreateBloom("b", BloomConfig{Capacity: 100})
	must(t, err)
	must(t, s.Checkpoint())
	s.gate.RLock()
	_, err = s.log.Append(format.AppendWALRecord(nil, format.WALRecord{Op: format.WALOpExternal, Seq: math.MaxUint64}))
	s.gate.RUnlock()
	must(t, err)
	must(t, s.log.Sync())
	s.killForTest()
	if s, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			t.Logf("ExternalDurable %d", s.ExternalDurable())
			s.Close()
		}
		t.Fatalf("Open of a WAL holding an external record of seq MaxUint64: %v, want ErrCorrupt", err)
	}
}

// copyPart copies the entry rel (a file or a directory) of the store src
// into dst, as one step of a plain file copy.
func copyPart(t *testing.T, src, dst, rel string) {
	t.Helper()
	p := filepath.Join(src, rel)
	if fi, err := os.Stat(p); err != nil {
		t.Fatal(err)
	} else if !fi.IsDir() {
		b, err := os.ReadFile(p)
		must(t, err)
		must(t, os.MkdirAll(dst, 0o755))
		must(t, os.WriteFile(filepath.Join(dst, rel), b, 0o644))
		return
	}
	copyTree(t, p, filepath.Join(dst, rel))
}

// TestPlainCopyOfLiveStoreOpensBroken: a store copied file by file while
// its writer ran, wal/ before filters/ (cp -r's order), with changes
// between the two. Replaying the copied WAL's older after-images into the
// newer files put cuckoo slots back to values from before later inserts
// moved entries: 29 of 850 acknowledged keys read absent, the filter "ok"
// and Check clean (an adversarial test). Now a file whose stamp is past
// the WAL's end (a change applied to it, or a checkpoint, after the WAL
// was copied) opens broken, naming why. Copied in the other order (filter
// files first: what a crash leaves), every filter opens ok with every
// acknowledged key.
func TestPlainCopyOfLiveStoreOpensBroken(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		for _, walFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/walFirst=%v", mode, walFirst), func(t *testing.T) {
				src := t.TempDir()
				dst := filepath.Join(t.TempDir(), "copy")
				s := mustOpen(t, src, &Options{Sync: mode, CheckpointEvery: -1, SyncEvery: time.Hour})
				c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1024, NonScaling: true})
				must(t, err)
				n, err := s.CreateCounting("n", BloomConfig{Capacity: 2000})
				must(t, err)
				m, err := s.CreateBitmap("m", 4096)
				must(t, err)
				key := func(i int) []byte { return []byte(fmt.Sprintf("key-%d", i)) }
				settle := func() {
					// SyncInterval: the background sync that puts the
					// changes in the files, run here.
					if mode == SyncInterval {
						must(t, s.log.Sync())
						s.applySynced()
					}
				}
				const acked = 850
				for i := 0; i < acked; i++ {
					must(t, c.Add(key(i)))
					must(t, n.Add(key(i)))
					_, err := m.Set(uint64(i))
					must(t, err)
					if i == 700 {
						must(t, s.Checkpoint())
					}
				}
				settle()
				first, second := "wal", "filters"
				if !walFirst {
					first, second = second, first
				}
				copyPart(t, src, dst, first)
				for i := acked; i < 1100; i++ { // cuckoo kicks move older keys
					if c.Add(key(i)) != nil {
						break
					}
					must(t, n.Add(key(i)))
					_, err := m.Set(uint64(i))
					must(t, err)
				}
				settle()
				copyPart(t, src, dst, second)
				copyPart(t, src, dst, format.CatalogName)
				copyPart(t, src, dst, sessionFile)
				must(t, s.Close())

				cp := mustOpen(t, dst, nil)
				defer cp.Close()
				for _, name := range []string{"c", "n", "m"} {
					var f infoer
					switch name {
					case "c":
						f, err = cp.Cuckoo(name)
					case "n":
						f, err = cp.Counting(name)
					default:
						f, err = cp.Bitmap(name)
					}
					must(t, err)
					_, ierr := f.Info()
					if walFirst {
						if !errors.Is(ierr, ErrCorrupt) || !strings.Contains(ierr.Error(), "newer than the WAL") {
							t.Errorf("filter %s of a copy whose WAL was copied first: Info %v, want broken, newer than the WAL", name, ierr)
						}
						continue
					}
					if ierr != nil {
						t.Errorf("filter %s of a copy whose files were copied first: %v", name, ierr)
					}
				}
				if walFirst {
					return
				}
				cc, err := cp.Cuckoo("c")
				must(t, err)
				nn, err := cp.Counting("n")
				must(t, err)
				mm, err := cp.Bitmap("m")
				must(t, err)
				for i := 0; i < acked; i++ {
					if !cc.Has(key(i)) || !nn.Has(key(i)) || !mm.Get(uint64(i)) {
						t.Fatalf("key %d of a copy whose files were copied first reads absent", i)
					}
				}
				rep, err := cp.Check()
				must(t, err)
				if len(rep.Problems) > 0 {
					t.Fatalf("Check of a copy whose files were copied first: %v", rep.Problems)
				}
			})
		}
	}
}
