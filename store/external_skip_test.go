package store

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/filterstore/filterstore/mmapbits"
)

// TestExternalNewLayerFailureFailsStore: an external add that needs a new
// layer whose file cannot be created (a full disk, EIO) is not skipped:
// the engine holds its record, and a skip with the filter left whole and
// "ok" would make ExternalDurable tell the engine to drop it, so the key
// would read absent for good. The store fails instead, ExternalDurable
// stays below the record, and the engine's replay after a restart adds
// the key.
func TestExternalNewLayerFailureFailsStore(t *testing.T) {
	for _, kind := range []string{"bloom", "cuckoo"} {
		t.Run(kind, func(t *testing.T) {
			w := newSimWorld(t, SyncInterval)
			s, err := w.open(t)
			must(t, err)
			var bf *Bloom
			var cf *Cuckoo
			if kind == "bloom" {
				bf, err = s.CreateBloom("f", BloomConfig{Capacity: 8, ErrorRate: 0.01})
			} else {
				cf, err = s.CreateCuckoo("f", CuckooConfig{Capacity: 4, BucketSize: 2, FingerprintBits: 8, Expansion: 2, MaxIterations: 10})
			}
			must(t, err)
			var failCreate atomic.Bool
			w.sim.SetInjector(func(op mmapbits.Op, path string) error {
				if op == mmapbits.OpCreate && failCreate.Load() && strings.Contains(path, "filters") {
					return errors.New("no space left on device (injected)")
				}
				return nil
			})
			failCreate.Store(true)
			var failed []byte // the record whose apply failed
			var key []byte
			for i := 0; i < 500 && failed == nil; i++ {
				key = fmt.Appendf(nil, "k%d", i)
				bt := s.NewBatch()
				if bf != nil {
					bt.BloomAdd(bf, key)
				} else {
					bt.CuckooAdd(cf, key)
				}
				rec, err := bt.Encode()
				must(t, err)
				res, err := s.ApplyExternal(rec)
				if err != nil {
					if !errors.Is(err, ErrFailed) {
						t.Fatalf("ApplyExternal: %v, want ErrFailed", err)
					}
					failed = rec
					break
				}
				if !res[0] && (bf == nil || !bf.Has(key)) {
					t.Fatalf("external add of %q skipped with no error while the filter's new layer could not be created", key)
				}
			}
			if failed == nil {
				t.Fatal("no external add needed a new layer")
			}
			seq, err := ExternalSeq(failed)
			must(t, err)
			if d := s.ExternalDurable(); d >= seq {
				t.Fatalf("ExternalDurable %d names the failed record %d: the engine would drop it", d, seq)
			}
			failCreate.Store(false)
			w.kill(s)

			s, err = w.open(t)
			must(t, err)
			defer s.Close()
			if d := s.ExternalDurable(); d >= seq {
				t.Fatalf("after the restart ExternalDurable %d names the failed record %d", d, seq)
			}
			res, err := s.ApplyExternal(failed) // the engine's replay
			must(t, err)
			if len(res) != 1 || !res[0] {
				t.Fatalf("replayed add = %v, want [true]", res)
			}
			var present bool
			var info Info
			if bf != nil {
				f, err := s.Bloom("f")
				must(t, err)
				present, info = f.Has(key), mustInfo(t, f)
			} else {
				f, err := s.Cuckoo("f")
				must(t, err)
				present, info = f.Has(key), mustInfo(t, f)
			}
			if !present || info.State != "ok" || info.Layers < 2 {
				t.Fatalf("after the replay: has %v, state %q, %d layers; want the key, ok, a new layer", present, info.State, info.Layers)
			}
		})
	}
}

// TestExternalSkipsAFilterOnce: the ops of a run on a filter that cannot
// take them (here a NonScaling filter that fills, which marks it
// incomplete) are dropped together, not one per planning pass: a record
// of n such ops was planned n times over (seconds at 8000 ops). Ops on
// other filters apply.
func TestExternalSkipsAFilterOnce(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
	defer s.Close()
	full, err := s.CreateBloom("full", BloomConfig{Capacity: 10, NonScaling: true})
	must(t, err)
	other, err := s.CreateBloom("other", BloomConfig{Capacity: 10000})
	must(t, err)
	bt := s.NewBatch()
	const n = 4000
	for i := range n {
		bt.BloomAdd(full, key(i))
		bt.BloomAdd(other, key(i))
	}
	rec, err := bt.Encode()
	must(t, err)
	before := s.ext.replans.Load()
	res, err := s.ApplyExternal(rec)
	must(t, err)
	if got := s.ext.replans.Load() - before; got != 1 {
		t.Errorf("the run was planned again %d times, want 1", got)
	}
	if st := mustInfo(t, full).State; st != "incomplete" {
		t.Fatalf("the filled filter is %q, want incomplete", st)
	}
	for i := range n {
		if res[2*i] {
			t.Fatalf("op %d on the filled filter reports true", 2*i)
		}
		if !other.Has(key(i)) || !full.Has(key(i)) {
			t.Fatalf("key %d reads absent", i)
		}
	}
}

// TestEncodeBoundsWALRecord: Encode refuses a batch whose WAL record
// could exceed the WAL's limit (with ErrInvalid, before the engine
// commits anything): applied, its record could never be logged, and the
// store would fail on it again at every replay. 600000 bitmap sets (31
// bytes each in the WAL) are refused; 500000 Bloom adds (18 bytes) are
// not, and apply.
func TestEncodeBoundsWALRecord(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
	defer s.Close()
	m, err := s.CreateBitmap("m", 1<<20)
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1 << 20})
	must(t, err)
	bt := s.NewBatch()
	for i := range uint64(600000) {
		bt.BitmapSet(m, i)
	}
	if _, err := bt.Encode(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("Encode of 600000 bitmap sets: %v, want ErrInvalid naming the WAL's limit", err)
	}
	bt = s.NewBatch()
	for i := range 500000 {
		bt.BloomAdd(b, key(i))
	}
	rec, err := bt.Encode()
	must(t, err)
	if _, err := s.ApplyExternal(rec); err != nil {
		t.Fatalf("ApplyExternal of 500000 Bloom adds: %v", err)
	}
	if !b.Has(key(499999)) {
		t.Fatal("the last add reads absent")
	}
}

// TestExternalOversizedCuckooRecord: a record within Encode's bound whose
// cuckoo adds displace fingerprints enough to take its WAL record past
// the limit cannot be logged whole. Its cuckoo filter is marked
// incomplete (answering "maybe" for every key, the skipped ones
// included), the record's other ops apply, and the store goes on: failing
// it would fail it again at every replay of the record.
func TestExternalOversizedCuckooRecord(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
	defer s.Close()
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 4000, NonScaling: true, MaxIterations: 500})
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	for i := range 3600 { // about 90% full: most adds from here displace
		if err := c.Add(key(i)); err != nil {
			break
		}
	}
	bt := s.NewBatch()
	for i := range 50 {
		bt.CuckooAdd(c, key(10000+i))
		bt.BloomAdd(b, key(10000+i))
	}
	limit := extRecordLimit
	defer func() { extRecordLimit = limit }()
	extRecordLimit = extWALBound(bt.ops) // what one write per cuckoo add takes
	rec, err := bt.Encode()
	must(t, err)
	res, err := s.ApplyExternal(rec)
	must(t, err)
	if st := mustInfo(t, c).State; st != "incomplete" {
		t.Fatalf("the cuckoo filter is %q, want incomplete", st)
	}
	for i := range 50 {
		if res[2*i] || !res[2*i+1] {
			t.Fatalf("op results %v, want the cuckoo adds false and the Bloom adds true", res)
		}
		if !c.Has(key(10000+i)) || !b.Has(key(10000+i)) {
			t.Fatalf("key %d reads absent", 10000+i)
		}
	}
	must(t, s.log.Sync())
	seq, err := ExternalSeq(rec)
	must(t, err)
	if d := s.ExternalDurable(); d < seq {
		t.Fatalf("ExternalDurable %d after a WAL sync, want %d", d, seq)
	}
	if err := s.failed(); err != nil {
		t.Fatalf("the store failed: %v", err)
	}
}

// TestExternalAmbiguousDeleteSkipsOneOp: an external cuckoo delete of a
// key whose fingerprint matches in two layers is refused (ErrAmbiguous)
// and skipped alone, as Delete refuses it: the store does not fail, the
// filter stays ok, the record's other ops on the same filter apply, and
// the run is planned once (a record of many such deletes is not planned
// again per delete).
func TestExternalAmbiguousDeleteSkipsOneOp(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, CheckpointEvery: -1})
	defer s.Close()
	c := ambiguousCuckoo(t, s)
	bt := s.NewBatch()
	bt.CuckooDelete(c, []byte("twice"))
	bt.CuckooAdd(c, []byte("after"))
	bt.CuckooDelete(c, key(1))
	rec, err := bt.Encode()
	must(t, err)
	before := s.ext.replans.Load()
	res, err := s.ApplyExternal(rec)
	if err != nil {
		t.Fatalf("ApplyExternal: %v", err)
	}
	if got := s.ext.replans.Load() - before; got != 0 {
		t.Errorf("the run was planned again %d times, want 0", got)
	}
	if len(res) != 3 || res[0] || !res[1] || !res[2] {
		t.Fatalf("results %v, want [false true true]", res)
	}
	if st := mustInfo(t, c).State; st != "ok" {
		t.Fatalf("the filter is %q, want ok", st)
	}
	if c.Count([]byte("twice")) != 2 || !c.Has([]byte("after")) {
		t.Fatalf("Count(twice) = %d, Has(after) = %v", c.Count([]byte("twice")), c.Has([]byte("after")))
	}
}
