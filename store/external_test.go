package store

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

func openExternal(t *testing.T, dir string) (*Store, *Bloom, *Cuckoo, *Bitmap) {
	t.Helper()
	s := mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
	b, err := s.EnsureBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	c, err := s.EnsureCuckoo("c", CuckooConfig{Capacity: 1000})
	must(t, err)
	m, err := s.EnsureBitmap("m", 64)
	must(t, err)
	return s, b, c, m
}

// TestExternalApply: Encode changes nothing, ApplyExternal applies, a
// second apply of the same record changes nothing, and after a reopen
// ExternalDurable names the record.
func TestExternalApply(t *testing.T) {
	dir := t.TempDir()
	s, b, c, m := openExternal(t, dir)
	bt := s.NewBatch()
	bt.BloomAdd(b, []byte("x"))
	bt.CuckooAdd(c, []byte("x"))
	bt.BitmapSet(m, 5)
	rec, err := bt.Encode()
	must(t, err)
	if seq, err := ExternalSeq(rec); err != nil || seq != 1 {
		t.Fatalf("ExternalSeq = %d, %v; want 1", seq, err)
	}
	if b.Has([]byte("x")) || c.Has([]byte("x")) {
		t.Fatal("Encode changed a filter")
	}
	res, err := s.ApplyExternal(rec)
	if err != nil || !slices.Equal(res, []bool{true, true, true}) {
		t.Fatalf("ApplyExternal = %v, %v", res, err)
	}
	if !b.Has([]byte("x")) || !c.Has([]byte("x")) {
		t.Fatal("applied keys read absent")
	}
	if !m.Get(5) {
		t.Fatal("applied bit reads clear")
	}
	if res, err := s.ApplyExternal(rec); err != nil || res != nil {
		t.Fatalf("second ApplyExternal = %v, %v; want nil, nil", res, err)
	}
	if info, err := c.Info(); err != nil || info.Items != 1 {
		t.Fatalf("cuckoo Info after a repeated apply = %+v, %v; want 1 item", info, err)
	}
	must(t, s.Close())
	s, _, c, _ = openExternal(t, dir)
	defer s.Close()
	if d := s.ExternalDurable(); d != 1 {
		t.Fatalf("ExternalDurable after reopen = %d, want 1", d)
	}
	if !c.Has([]byte("x")) {
		t.Fatal("key lost over a reopen")
	}
	// New records continue the sequence.
	bt = s.NewBatch()
	bt.CuckooDelete(c, []byte("x"))
	rec, err = bt.Encode()
	must(t, err)
	if seq, _ := ExternalSeq(rec); seq != 2 {
		t.Fatalf("seq after reopen = %d, want 2", seq)
	}
	if res, err := s.ApplyExternal(rec); err != nil || !slices.Equal(res, []bool{true}) {
		t.Fatalf("delete = %v, %v", res, err)
	}
}

// TestExternalOrder: a record waits for every record encoded before it to
// be applied or aborted.
func TestExternalOrder(t *testing.T) {
	s, b, _, _ := openExternal(t, t.TempDir())
	defer s.Close()
	enc := func(k string) []byte {
		bt := s.NewBatch()
		bt.BloomAdd(b, []byte(k))
		rec, err := bt.Encode()
		must(t, err)
		return rec
	}
	r1, r2, r3 := enc("1"), enc("2"), enc("3")
	done := make(chan error, 1)
	go func() { _, err := s.ApplyExternal(r3); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("record 3 applied before 1 and 2: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if b.Has([]byte("3")) {
		t.Fatal("record 3 visible before 1 and 2 were resolved")
	}
	must(t, second(s.ApplyExternal(r1)))
	must(t, s.AbortExternal(r2))
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("record 3 still waits after 1 was applied and 2 aborted")
	}
	if !b.Has([]byte("1")) || b.Has([]byte("2")) || !b.Has([]byte("3")) {
		t.Fatal("wrong keys applied")
	}
	// A waiting apply returns when the store closes.
	enc("4") // never applied or aborted: record 5 waits for it
	r5 := enc("5")
	go func() { _, err := s.ApplyExternal(r5); done <- err }()
	time.Sleep(20 * time.Millisecond)
	must(t, s.Close())
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("waiting apply after Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting apply did not return at Close")
	}
}

// TestExternalFailureWakesWaiters: when the store fails (its background
// WAL sync failed) while applies wait behind a lower seq, they return the
// failure instead of waiting for a seq that will never apply, and none of
// them applies.
func TestExternalFailureWakesWaiters(t *testing.T) {
	fs := wal.NewMemFS()
	s, err := Open(t.TempDir(), WithSeams(Options{Sync: SyncInterval, CheckpointEvery: -1}, mmapbits.NewSim(), fs))
	must(t, err)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100})
	must(t, err)
	var recs [][]byte
	for _, k := range []string{"1", "2", "3", "4"} {
		bt := s.NewBatch()
		bt.BloomAdd(b, []byte(k))
		rec, err := bt.Encode()
		must(t, err)
		recs = append(recs, rec)
	}
	done := make(chan error, 3)
	for _, rec := range recs[1:] {
		go func() { _, err := s.ApplyExternal(rec); done <- err }()
	}
	time.Sleep(20 * time.Millisecond) // let them wait for seq 1
	// The background WAL sync fails the store; the apply of seq 1 then
	// returns the failure.
	errDisk := errors.New("injected sync failure")
	fs.SetInjector(func(op wal.Op, name string) error {
		if op == wal.OpSync {
			return errDisk
		}
		return nil
	})
	if _, err := b.Add([]byte("x")); err != nil { // a record to sync
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.failed() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, err := s.ApplyExternal(recs[0]); !errors.Is(err, errDisk) {
		t.Fatalf("apply of seq 1 on a store whose WAL sync failed: %v", err)
	}
	for range 3 {
		select {
		case err := <-done:
			if !errors.Is(err, errDisk) {
				t.Errorf("an apply waiting behind the failed one returned %v, want the failure", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("an apply waiting behind a failed one still waits")
		}
	}
	for _, k := range []string{"2", "3", "4"} {
		if b.Has([]byte(k)) {
			t.Errorf("%s applied behind a failed record", k)
		}
	}
}

// TestExternalBadInput: every misuse is a typed error and changes nothing.
func TestExternalBadInput(t *testing.T) {
	s, b, c, m := openExternal(t, t.TempDir())
	defer s.Close()
	other, ob, _, _ := openExternal(t, t.TempDir())
	defer other.Close()
	always := mustOpen(t, t.TempDir(), nil)
	defer always.Close()
	ab, err := always.CreateBloom("a", BloomConfig{})
	must(t, err)
	for _, tc := range []struct {
		name string
		bt   func() *Batch
		want error
	}{
		{"SyncAlways store", func() *Batch { bt := always.NewBatch(); bt.BloomAdd(ab, []byte("k")); return bt }, ErrInvalid},
		{"nil handle", func() *Batch { bt := s.NewBatch(); bt.BloomAdd(nil, []byte("k")); return bt }, ErrInvalid},
		{"handle of another store", func() *Batch { bt := s.NewBatch(); bt.BloomAdd(ob, []byte("k")); return bt }, ErrInvalid},
		{"bitmap offset out of range", func() *Batch { bt := s.NewBatch(); bt.BitmapSet(m, 64); return bt }, ErrInvalid},
	} {
		if _, err := tc.bt().Encode(); !errors.Is(err, tc.want) {
			t.Errorf("%s: Encode: %v, want %v", tc.name, err, tc.want)
		}
	}
	bt := s.NewBatch()
	bt.CuckooAdd(c, []byte("k"))
	rec, err := bt.Encode()
	must(t, err)
	if _, err := bt.Encode(); !errors.Is(err, ErrInvalid) {
		t.Errorf("second Encode: %v, want ErrInvalid", err)
	}
	if _, err := other.ApplyExternal(rec); !errors.Is(err, ErrInvalid) {
		t.Errorf("another store's record: %v, want ErrInvalid", err)
	}
	for i := range rec {
		bad := slices.Clone(rec)
		bad[i] ^= 0x40
		if _, err := s.ApplyExternal(bad); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) {
			t.Fatalf("record with byte %d damaged: %v, want ErrCorrupt", i, err)
		}
	}
	for _, bad := range [][]byte{nil, []byte("FSXB"), rec[:len(rec)-1]} {
		if _, err := s.ApplyExternal(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("record %q: %v, want ErrCorrupt", bad, err)
		}
		if _, err := ExternalSeq(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ExternalSeq(%q): %v, want ErrCorrupt", bad, err)
		}
	}
	if c.Has([]byte("k")) || b.Has([]byte("k")) {
		t.Fatal("bad input changed a filter")
	}
	// A filter dropped between Encode and ApplyExternal: its op is
	// skipped, the others apply.
	bt = s.NewBatch()
	bt.CuckooAdd(c, []byte("d"))
	bt.BloomAdd(b, []byte("d"))
	rec2, err := bt.Encode()
	must(t, err)
	must(t, second(s.ApplyExternal(rec)))
	must(t, s.Drop("c"))
	res, err := s.ApplyExternal(rec2)
	if err != nil || !slices.Equal(res, []bool{false, true}) || !b.Has([]byte("d")) {
		t.Fatalf("apply with a dropped filter = %v, %v", res, err)
	}
}

const extCrashSeqs = 60

// TestSimulatedPowerLossExternal: an engine log (a slice: records it
// committed, in its commit order, durable once committed) and a store in
// external-log mode whose files and WAL lose power at random points. After
// each loss the store reopens, reports ExternalDurable = D, and the engine
// replays its records after D in seq order (and some at or below D, which
// must change nothing). The store must then match a reference store that
// applied every committed record once, in seq order, and never crashed:
// the bitmap word for word and the bitmap and counting item counts exactly;
// and every key the committed records leave in the Bloom, cuckoo and
// counting filters must be present (their words differ from the
// reference's: each filter's salt, and after a reopen the cuckoo's kick
// order, is its own). Records are
// aborted at random, and some are committed by the engine in the other
// order than they were encoded.
func TestSimulatedPowerLossExternal(t *testing.T) {
	seeds := crashSeeds(t, testseed.Seed(t))
	n := extCrashSeqs
	if testing.Short() {
		n = 10
	}
	for _, seed := range seeds[:min(len(seeds), n)] {
		extCrashSequence(t, seed)
	}
}

func extCrashSequence(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 4))
	w, rw := newSimWorld(t, SyncInterval), newSimWorld(t, SyncInterval)
	s, err := w.open(t)
	must(t, err)
	ref, err := rw.open(t)
	must(t, err)
	createSimFilters(t, s)
	createSimFilters(t, ref)
	var engine [][]byte // committed records, in the engine's commit order
	applied := 0        // engine[:applied] are in ref
	bloomKeys := map[uint64]bool{}
	// truthC and truthN count each key's copies in the cuckoo and
	// counting filters as the committed records leave them.
	truthC, truthN := map[uint64]int{}, map[uint64]int{}
	var pendingTruth func()
	for round := 0; round < 3; round++ {
		b, _ := s.Bloom("b")
		c, _ := s.Cuckoo("c")
		n, _ := s.Counting("n")
		m, _ := s.Bitmap("m")
		// Deletes are of keys the committed records (and the batch's
		// earlier ops) leave present: deleting an absent key may remove
		// another's matching fingerprint or counters, which no recovery
		// can undo and this test is not about.
		encode := func() []byte {
			bt := s.NewBatch()
			tc, tn := maps.Clone(truthC), maps.Clone(truthN)
			for range 1 + rng.IntN(4) {
				k := []byte(fmt.Sprintf("k%d", rng.IntN(60)))
				h := Hash(k)
				switch rng.IntN(7) {
				case 0:
					bt.BloomAdd(b, k)
				case 1, 2:
					if tc[h] < 1 { // one copy per key: no ErrFull
						bt.CuckooAdd(c, k)
						tc[h]++
					}
				case 3:
					if tc[h] > 0 {
						bt.CuckooDelete(c, k)
						tc[h]--
					}
				case 4:
					bt.CountingAdd(n, k)
					tn[h]++
				case 5:
					if tn[h] > 0 {
						bt.CountingDelete(n, k)
						tn[h]--
					}
				default:
					if off := rng.Uint64N(CrashBits); rng.IntN(2) == 0 {
						bt.BitmapSet(m, off)
					} else {
						bt.BitmapClear(m, off)
					}
				}
			}
			rec, err := bt.Encode()
			if err != nil {
				t.Fatalf("seed %d: Encode: %v", seed, err)
			}
			pendingTruth = func() { truthC, truthN = tc, tn }
			return rec
		}
		apply := func(rec []byte) {
			if _, err := s.ApplyExternal(rec); err != nil {
				t.Fatalf("seed %d: ApplyExternal: %v", seed, err)
			}
		}
		for range 10 + rng.IntN(50) {
			switch r := rng.IntN(20); {
			case r == 0:
				must(t, s.AbortExternal(encode()))
			case r == 1:
				// The engine commits two records in the other order.
				r1 := encode()
				pendingTruth()
				r2 := encode()
				pendingTruth()
				engine = append(engine, r2, r1)
				done := make(chan struct{})
				go func() { apply(r2); close(done) }()
				apply(r1)
				<-done
			case r == 2:
				must(t, s.Checkpoint())
			case r == 3:
				must(t, s.log.Sync())
			default:
				rec := encode()
				pendingTruth()
				engine = append(engine, rec)
				apply(rec)
			}
		}
		w.crash(s, rng)
		if s, err = w.open(t); err != nil {
			t.Fatalf("seed %d round %d: recovery: %v", seed, round, err)
		}
		d := s.ExternalDurable()
		for _, rec := range bySeq(engine) {
			seq, _ := ExternalSeq(rec)
			res, err := s.ApplyExternal(rec)
			if err != nil {
				t.Fatalf("seed %d round %d: replay of %d (durable %d): %v", seed, round, seq, d, err)
			}
			if seq <= d && res != nil {
				t.Fatalf("seed %d round %d: replay of %d, at or below ExternalDurable %d, changed something", seed, round, seq, d)
			}
		}
		// The reference applies the round's new records once, in seq
		// order; its answers give each key's cuckoo and counting count.
		for _, rec := range bySeq(engine[applied:]) {
			seq, ops, err := s.decodeExternal(rec)
			must(t, err)
			ref.resolve(ops)
			must(t, ref.applyRun([]*extApply{{seq: seq, ops: ops}}))
			for _, op := range ops {
				if op.kind == batchBloomAdd {
					bloomKeys[op.arg] = true
				}
			}
		}
		applied = len(engine)
		what := fmt.Sprintf("seed %d round %d (durable %d, %d records committed)", seed, round, d, len(engine))
		must(t, s.Checkpoint())
		must(t, ref.Checkpoint())
		// Bitmaps are exact; cuckoo and counting filters hold what the
		// reference holds (their salts differ, so not word for word) and
		// as many items; every Bloom add is there.
		if got, want := imageOf(s).words["m/0"], imageOf(ref).words["m/0"]; !slices.Equal(got, want) {
			t.Fatalf("%s: bitmap differs from the reference", what)
		}
		if got, want := nonBloomCounts(s), nonBloomCounts(ref); !slices.Equal(got, want) {
			t.Fatalf("%s: item counts (bitmap, counting) %v, reference %v", what, got, want)
		}
		bf, _ := s.Bloom("b")
		cf, _ := s.Cuckoo("c")
		nf, _ := s.Counting("n")
		for h := range bloomKeys {
			if !bf.HasHash(h) {
				t.Fatalf("%s: a committed Bloom add reads absent", what)
			}
		}
		for h, k := range truthC {
			if k > 0 && !cf.HasHash(h) {
				t.Fatalf("%s: a key the committed records leave in the cuckoo filter (%d copies) reads absent", what, k)
			}
		}
		for h, k := range truthN {
			if k > 0 && !nf.HasHash(h) {
				t.Fatalf("%s: a key the committed records leave in the counting filter (%d) reads absent", what, k)
			}
		}
	}
	must(t, s.Close())
	must(t, ref.Close())
}

// nonBloomCounts returns the item counts of the bitmap and counting
// filters of createSimFilters.
func nonBloomCounts(s *Store) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint64
	for _, name := range []string{"m", "n"} {
		out = append(out, s.filters[name].base().items()...)
	}
	return out
}

// bySeq returns external records sorted by their seq.
func bySeq(recs [][]byte) [][]byte {
	out := slices.Clone(recs)
	slices.SortFunc(out, func(x, y []byte) int {
		a, _ := ExternalSeq(x)
		b, _ := ExternalSeq(y)
		return cmp.Compare(a, b)
	})
	return out
}

// TestExternalFullSurvivesCrash: an external add that finds its filter
// full marks the filter incomplete, and that mark survives a crash that
// follows: the engine drops its record once ExternalDurable names it, so
// after the crash nothing but the mark keeps the filter from answering
// "absent" for a key the engine holds.
func TestExternalFullSurvivesCrash(t *testing.T) {
	w := newSimWorld(t, SyncInterval)
	s, err := w.open(t)
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 4, BucketSize: 2, FingerprintBits: 8, NonScaling: true, MaxIterations: 20})
	must(t, err)
	var lost []byte
	var seq uint64
	for i := 0; i < 200 && lost == nil; i++ {
		k := fmt.Appendf(nil, "k%d", i)
		bt := s.NewBatch()
		bt.CuckooAdd(c, k)
		rec, err := bt.Encode()
		must(t, err)
		res, err := s.ApplyExternal(rec)
		must(t, err)
		if !res[0] {
			lost, seq = k, uint64(i+1)
		}
	}
	if lost == nil {
		t.Fatal("no external add ran out of room")
	}
	must(t, s.log.Sync())
	if d := s.ExternalDurable(); d < seq {
		t.Fatalf("ExternalDurable %d after a WAL sync, want >= %d", d, seq)
	}
	w.kill(s) // the engine has dropped every record <= seq

	s, err = w.open(t)
	must(t, err)
	defer s.Close()
	infos, err := s.List()
	must(t, err)
	if len(infos) != 1 || infos[0].State != "incomplete" {
		t.Fatalf("after the crash List = %+v, want the filter incomplete", infos)
	}
	c, err = s.Cuckoo("c")
	must(t, err)
	if !c.Has(lost) {
		t.Errorf("after the crash the filter answers absent for %q, whose add did not fit", lost)
	}
}

// TestExternalBrokenFilterStaysIncomplete: a record the engine replays
// onto a broken filter (its file damaged) cannot apply there and is
// skipped; once the record is durable the engine drops it, so a file put
// back later must not bring the filter back whole but for the skipped
// key: the filter opens incomplete.
func TestExternalBrokenFilterStaysIncomplete(t *testing.T) {
	dir := t.TempDir()
	opts := &Options{Sync: SyncInterval, CheckpointEvery: -1}
	s := mustOpen(t, dir, opts)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	must(t, second(b.Add(key(1))))
	bt := s.NewBatch()
	bt.BloomAdd(b, key(2))
	rec, err := bt.Encode() // the engine holds it; the process dies before the apply
	must(t, err)
	path := s.layerPath(b.b.id, 0)
	must(t, s.Close())
	good, err := os.ReadFile(path)
	must(t, err)
	must(t, os.Truncate(path, 4096))

	s = mustOpen(t, dir, opts)
	res, err := s.ApplyExternal(rec) // the engine's replay
	must(t, err)
	if len(res) != 1 || res[0] {
		t.Fatalf("apply onto a broken filter = %v, want [false]", res)
	}
	seq, err := ExternalSeq(rec)
	must(t, err)
	must(t, s.Close())

	must(t, os.WriteFile(path, good, 0o644)) // the operator restores the file
	s = mustOpen(t, dir, opts)
	defer s.Close()
	if d := s.ExternalDurable(); d < seq {
		t.Fatalf("ExternalDurable %d, want >= %d: the engine would replay the record", d, seq)
	}
	infos, err := s.List()
	must(t, err)
	if len(infos) != 1 || infos[0].State != "incomplete" {
		t.Fatalf("List after the restore = %+v, want the filter incomplete", infos)
	}
	b, err = s.Bloom("b")
	must(t, err)
	if !b.Has(key(2)) {
		t.Errorf("the restored filter answers absent for the key its skipped record added")
	}
}

// TestExternalApplyVisibleToReadOnlyOpen: a read-only open made after
// ApplyExternal returned answers each applied op, for every kind, though
// the store's WAL is not synced yet (SyncEvery an hour away): ApplyExternal
// returns once its record reached the operating system, as a SyncInterval
// add does, so the reader's scan of the WAL finds it. (The cuckoo,
// counting and bitmap changes reach the files only after the sync.)
func TestExternalApplyVisibleToReadOnlyOpen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{Sync: SyncInterval, SyncEvery: time.Hour, CheckpointEvery: -1})
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 1000})
	must(t, err)
	m, err := s.CreateBitmap("m", 64)
	must(t, err)
	for i := range 3 {
		k := []byte(fmt.Sprint("acked-", i))
		bt := s.NewBatch()
		bt.BloomAdd(b, k)
		bt.CuckooAdd(c, k)
		bt.CountingAdd(n, k)
		bt.BitmapSet(m, uint64(7+i))
		rec, err := bt.Encode()
		must(t, err)
		if res, err := s.ApplyExternal(rec); err != nil || !slices.Equal(res, []bool{true, true, true, true}) {
			t.Fatalf("ApplyExternal = %v, %v", res, err)
		}
		r := mustOpen(t, dir, &Options{ReadOnly: true})
		rb, _ := r.Bloom("b")
		rc, _ := r.Cuckoo("c")
		rn, _ := r.Counting("n")
		rm, _ := r.Bitmap("m")
		got := fmt.Sprint(rb.Has(k), rc.Has(k), rn.Has(k), rm.Get(uint64(7+i)))
		must(t, r.Close())
		if got != "true true true true" {
			t.Fatalf("record %d: a read-only open after ApplyExternal returned answers Bloom, cuckoo, counting, bitmap %s, want all true", i, got)
		}
	}
}

// TestApplyExternalRacingClose: ApplyExternal calls racing Close neither
// fail the store nor make Close fail: a record the log wrote before Close
// needs no more, and one it did not is the engine's to replay.
func TestApplyExternalRacingClose(t *testing.T) {
	rounds := 100
	if testing.Short() {
		rounds = 20
	}
	failed, closeErrs := 0, 0
	for range rounds {
		s := mustOpen(t, t.TempDir(), &Options{Sync: SyncInterval, SyncEvery: time.Hour, CheckpointEvery: -1, Logger: slog.New(slog.DiscardHandler)})
		b, err := s.CreateBloom("b", BloomConfig{Capacity: 100_000})
		must(t, err)
		done := make(chan struct{}, 2)
		for g := range 2 {
			go func() {
				defer func() { done <- struct{}{} }()
				for i := 0; ; i++ {
					bt := s.NewBatch()
					bt.BloomAdd(b, []byte(fmt.Sprint(g, i)))
					rec, err := bt.Encode()
					if err != nil {
						return
					}
					if _, err := s.ApplyExternal(rec); err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("ApplyExternal racing Close: %v, want nil or ErrClosed", err)
						}
						return
					}
				}
			}()
		}
		time.Sleep(2 * time.Millisecond)
		if err := s.Close(); err != nil {
			closeErrs++
			t.Logf("Close: %v", err)
		}
		<-done
		<-done
		if s.failed() != nil {
			failed++
		}
	}
	if closeErrs+failed > 0 {
		t.Errorf("of %d rounds: %d Close errors, %d stores failed", rounds, closeErrs, failed)
	}
}

// TestApplyExternalNeedsSyncInterval: an engine replaying its records
// into a store reopened with SyncAlways gets ErrInvalid and changes
// nothing (under SyncAlways lookups read no overlay, so a staged cuckoo
// or counting add would read absent); reopened with SyncInterval, the
// replay applies and every lookup finds the keys.
func TestApplyExternalNeedsSyncInterval(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 1000})
	must(t, err)
	bt := s.NewBatch()
	bt.CuckooAdd(c, []byte("x"))
	bt.CountingAdd(n, []byte("x"))
	rec, err := bt.Encode()
	must(t, err)
	must(t, s.AbortExternal(rec)) // the engine's commit is replayed below
	must(t, s.Close())

	s = mustOpen(t, dir, &Options{Sync: SyncAlways, CheckpointEvery: -1})
	for _, r := range [][]byte{rec, []byte("not a record")} {
		if res, err := s.ApplyExternal(r); !errors.Is(err, ErrInvalid) || res != nil {
			t.Fatalf("ApplyExternal(%.8q) under SyncAlways = %v, %v; want ErrInvalid", r, res, err)
		}
	}
	must(t, s.Close())

	// A read-only store refuses a record, whole or garbage, as read-only.
	s = mustOpen(t, dir, &Options{ReadOnly: true, Sync: SyncInterval})
	for _, r := range [][]byte{rec, []byte("not a record"), nil} {
		if res, err := s.ApplyExternal(r); !errors.Is(err, ErrReadOnly) || res != nil {
			t.Fatalf("ApplyExternal(%.8q) on a read-only store = %v, %v; want ErrReadOnly", r, res, err)
		}
	}
	must(t, s.Close())

	s = mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
	defer s.Close()
	if res, err := s.ApplyExternal(rec); err != nil || !slices.Equal(res, []bool{true, true}) {
		t.Fatalf("ApplyExternal under SyncInterval = %v, %v", res, err)
	}
	c, _ = s.Cuckoo("c")
	n, _ = s.Counting("n")
	if !c.Has([]byte("x")) || !n.Has([]byte("x")) || c.Count([]byte("x")) == 0 || n.Count([]byte("x")) == 0 {
		t.Fatal("the replayed record's keys read absent")
	}
}
