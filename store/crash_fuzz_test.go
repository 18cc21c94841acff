package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/filterstore/filterstore/wal"

	"github.com/filterstore/filterstore/internal/fuzzcorpus"
)

// FuzzCrashRecovery drives the simulated power-loss world of
// crash_sim_test.go (filter files behind mmapbits.Sim, the WAL behind
// wal.MemFS, the filters of createSimFilters) from the fuzzer's bytes.
//
// Input layout: a header (durability mode; the final crash's seed; the
// corruption step, see below), then operations until the input or
// maxCrashOps ends: Bloom adds, cuckoo adds (also runs of one hot key) and
// deletes, counting adds and deletes, bitmap sets and clears, checkpoints,
// WAL syncs, and up to 3 crashes, each with a seed from the input; a last
// crash ends the sequence. A crash keeps each dirty filter page's memory or
// disk image and the WAL's synced prefix plus a possibly torn part of the
// rest, both drawn from a *rand.Rand seeded from the input.
//
// Properties after each recovery:
//   - I4: Open succeeds (a torn tail is truncated silently).
//   - I3: recovery replays exactly the records after the last checkpoint:
//     as many as the recovered LSN is past the checkpoint LSN.
//   - I2: the recovered LSN is at least that of the last WAL sync or
//     checkpoint and at most the last LSN logged; under SyncAlways it is
//     the last LSN logged, and the filter words and item counts equal the
//     pre-crash state exactly (as TestSimulatedPowerLossSyncAlways checks).
//   - I1: the recovered state honours the model of every acknowledged op up
//     to the recovered LSN (checkRecovered: no Bloom false negative, cuckoo
//     and counting counts at least the model's), and the bitmap equals it
//     exactly. The sequence then goes on from that state.
//
// Cuckoo deletes: the model records which layer each add landed in (the
// layer whose count for the key grew). Store.Cuckoo.Delete refuses a key
// whose fingerprint matches in two or more layers and otherwise deletes
// from the one layer it matches, so a delete of a key owning an entry can
// never remove another key's (the false-positive hazard of cuckoo/doc.go).
// The test checks the refusal, and does not issue a delete of a key whose
// one matching layer holds none of its entries (that would delete a key
// never added there, and the per-key model would no longer hold).
//
// Finally, if the header asks for it, the store is abandoned, one byte of
// a WAL segment flipped (the header picks the segment, the offset from its
// start or end, and the bits) and the store reopened (I4): a flip in the
// last record of the last segment is a torn tail, so Open must succeed; a
// flip anywhere else must make Open fail with an error wrapping ErrCorrupt.
//
// Seeds: testdata/fuzz/FuzzCrashRecovery (see crashFuzzSeeds).
func FuzzCrashRecovery(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzInput{b: data}
		mode := SyncAlways
		if in.u8()&1 == 1 {
			mode = SyncInterval
		}
		finalSeed := in.u64()
		corrupt, corruptSeg, corruptOff, corruptXor := in.u8()&1 == 1, in.u8(), in.u16(), in.u8()|1
		r := newCrashRun(t, mode)
		for ops := 0; in.more() && ops < maxCrashOps; ops++ {
			r.op(in)
		}
		r.crashAndCheck(finalSeed)
		if corrupt {
			r.corruptWAL(int(corruptSeg), int(corruptOff), corruptXor)
			return
		}
		if err := r.s.Close(); err != nil {
			t.Fatalf("Close after the last recovery: %v", err)
		}
	})
}

// maxCrashOps bounds the operations of one input.
const maxCrashOps = 150

// fuzzInput decodes the fuzzer's bytes; reads past the end return zeros.
type fuzzInput struct {
	b   []byte
	off int
}

func (in *fuzzInput) more() bool { return in.off < len(in.b) }

func (in *fuzzInput) u8() byte {
	in.off++
	if in.off > len(in.b) {
		return 0
	}
	return in.b[in.off-1]
}

func (in *fuzzInput) u16() uint16 { return uint16(in.u8()) | uint16(in.u8())<<8 }

func (in *fuzzInput) u64() uint64 {
	var b [8]byte
	for i := range b {
		b[i] = in.u8()
	}
	return binary.LittleEndian.Uint64(b[:])
}

// crashModel is the acknowledged state as of each op of the current
// round: the opModel of crash_sim_test.go, with cuckoo entries kept per
// layer, and an undo log to rewind it to the op a SyncInterval recovery
// stopped at.
type crashModel struct {
	bloom  map[string]bool
	cuckoo map[string][]int // entries each key owns, per layer
	count  map[string]int
	bits   map[uint64]bool
	undo   []func()
}

func newCrashModel() *crashModel {
	return &crashModel{bloom: map[string]bool{}, cuckoo: map[string][]int{}, count: map[string]int{}, bits: map[uint64]bool{}}
}

func (m *crashModel) addBloom(k string) {
	if !m.bloom[k] {
		m.bloom[k] = true
		m.undo = append(m.undo, func() { delete(m.bloom, k) })
	}
}

func (m *crashModel) addCuckoo(k string, layer, d int) {
	for len(m.cuckoo[k]) <= layer {
		m.cuckoo[k] = append(m.cuckoo[k], 0)
	}
	m.cuckoo[k][layer] += d
	m.undo = append(m.undo, func() { m.cuckoo[k][layer] -= d })
}

func (m *crashModel) addCount(k string, d int) {
	m.count[k] += d
	m.undo = append(m.undo, func() { m.count[k] -= d })
}

func (m *crashModel) setBit(off uint64, v bool) {
	old, had := m.bits[off]
	m.bits[off] = v
	m.undo = append(m.undo, func() {
		if had {
			m.bits[off] = old
		} else {
			delete(m.bits, off)
		}
	})
}

// rewind undoes the changes after the first n.
func (m *crashModel) rewind(n int) {
	for len(m.undo) > n {
		m.undo[len(m.undo)-1]()
		m.undo = m.undo[:len(m.undo)-1]
	}
}

// opModel returns the model in the form checkRecovered takes.
func (m *crashModel) opModel() *opModel {
	o := newModel()
	for k, v := range m.bloom {
		o.bloom[k] = v
	}
	for k, per := range m.cuckoo {
		for _, n := range per {
			o.cuckoo[k] += n
		}
	}
	for k, v := range m.count {
		o.count[k] = v
	}
	for k, v := range m.bits {
		o.bits[k] = v
	}
	return o
}

// replayCounter is a slog.Handler that records how many records the
// store's recovery says it replayed.
type replayCounter struct{ n *int64 }

func (h replayCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h replayCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h replayCounter) WithGroup(string) slog.Handler            { return h }

func (h replayCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "recovered" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "records" {
				if v, ok := a.Value.Any().(int64); ok {
					*h.n = v
				}
			}
			return true
		})
	}
	return nil
}

// crashRun is one input's world.
type crashRun struct {
	t        *testing.T
	w        *simWorld
	s        *Store
	m        *crashModel
	replayed int64
	rounds   int

	// The current round: the WAL's last LSN after each op (index 0: the
	// round's start), the model's undo length after each op, and the op
	// index of the last WAL sync or checkpoint.
	lsnAt    []uint64
	undoAt   []int
	syncedAt int
}

func newCrashRun(t *testing.T, mode SyncMode) *crashRun {
	w := newSimWorld(t, mode)
	// No background fsync, so that what a crash keeps depends only on the
	// input; WAL syncs are ops of the sequence.
	w.opts.SyncEvery = time.Hour
	r := &crashRun{t: t, w: w, m: newCrashModel()}
	w.opts.Logger = slog.New(replayCounter{&r.replayed})
	s, err := w.open(t)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	createSimFilters(t, s)
	r.s = s
	r.startRound()
	return r
}

func (r *crashRun) startRound() {
	r.lsnAt = []uint64{max(r.s.log.LastLSN(), r.s.checkpointLSN.Load())}
	r.undoAt = []int{len(r.m.undo)}
	r.syncedAt = 0
}

// cuckooEntries returns, per layer, how many entries of h's fingerprint the
// cuckoo filter holds, as acknowledged (overlay included).
func cuckooEntries(c *Cuckoo, h uint64) []uint64 {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	layers := *c.layers.Load()
	out := make([]uint64, len(layers))
	for i, l := range layers {
		out[i] = l.CountHashIn(overlayView{b, i, b.regions[i].Words()}, h)
	}
	return out
}

func (r *crashRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("round %d: "+format, append([]any{r.rounds}, args...)...)
}

func (r *crashRun) must(op string, err error) {
	r.t.Helper()
	if err != nil {
		r.fatalf("%s: %v", op, err)
	}
}

// op decodes and runs one operation, updating the model for what was
// acknowledged.
func (r *crashRun) op(in *fuzzInput) {
	s, m := r.s, r.m
	b, err := s.Bloom("b")
	r.must("Bloom", err)
	c, err := s.Cuckoo("c")
	r.must("Cuckoo", err)
	n, err := s.Counting("n")
	r.must("Counting", err)
	bm, err := s.Bitmap("m")
	r.must("Bitmap", err)
	cuckooAdd := func(k string) {
		h := Hash([]byte(k))
		before := cuckooEntries(c, h)
		err := c.Add([]byte(k))
		after := cuckooEntries(c, h)
		if errors.Is(err, ErrFull) {
			if !slices.Equal(before, after) {
				r.fatalf("cuckoo add of %s failed with %v but changed its entries %v -> %v", k, err, before, after)
			}
			return // refused, not acknowledged
		}
		r.must("cuckoo add", err)
		before = append(before, make([]uint64, len(after)-len(before))...)
		landed := -1
		for i := range after {
			if after[i] == before[i]+1 && landed < 0 {
				landed = i
			} else if after[i] != before[i] {
				landed = -2
			}
		}
		if landed < 0 {
			r.fatalf("cuckoo add of %s: entries per layer %v -> %v", k, before, after)
		}
		m.addCuckoo(k, landed, 1)
	}
	k := fmt.Sprintf("k%d", in.u8()%100)
	switch op := in.u8() % 12; op {
	case 0:
		_, err := b.Add([]byte(k))
		r.must("bloom add", err)
		m.addBloom(k)
	case 1:
		cuckooAdd(k)
	case 2:
		// Store.Cuckoo.Delete refuses (false, nil) a key matching in two
		// or more layers, and otherwise deletes from the one layer it
		// matches. Deleting a key that owns no entry there would remove
		// another key's: not issued.
		counts := cuckooEntries(c, Hash([]byte(k)))
		var matches []int
		for i, n := range counts {
			if n > 0 {
				matches = append(matches, i)
			}
		}
		if len(matches) == 0 || (len(matches) == 1 && (matches[0] >= len(m.cuckoo[k]) || m.cuckoo[k][matches[0]] == 0)) {
			break
		}
		ok, err := c.Delete([]byte(k))
		r.must("cuckoo delete", err)
		if ok != (len(matches) == 1) {
			r.fatalf("cuckoo delete of %s, matching in layers %v (owning %v), returned %v", k, matches, m.cuckoo[k], ok)
		}
		if after := cuckooEntries(c, Hash([]byte(k))); ok {
			counts[matches[0]]--
			if !slices.Equal(after, counts) {
				r.fatalf("cuckoo delete of %s: entries per layer %v, want %v", k, after, counts)
			}
			m.addCuckoo(k, matches[0], -1)
		} else if !slices.Equal(after, counts) {
			r.fatalf("refused cuckoo delete of %s changed its entries %v -> %v", k, counts, after)
		}
	case 3:
		r.must("counting add", n.Add([]byte(k)))
		m.addCount(k, 1)
	case 4:
		if m.count[k] > 0 {
			ok, err := n.Delete([]byte(k))
			r.must("counting delete", err)
			if !ok {
				r.fatalf("counting delete of %s (count %d) found nothing", k, m.count[k])
			}
			m.addCount(k, -1)
		}
	case 5, 6:
		off := uint64(in.u16()) % simBits
		set := op == 5
		var err error
		if set {
			_, err = bm.Set(off)
		} else {
			_, err = bm.Clear(off)
		}
		r.must("bitmap write", err)
		m.setBit(off, set)
	case 7:
		r.must("checkpoint", s.Checkpoint())
		r.syncedAt = len(r.lsnAt)
	case 8:
		r.must("wal sync", s.log.Sync())
		// Apply what became durable now rather than whenever the
		// background goroutine runs, so the crash is deterministic.
		s.applySynced()
		r.syncedAt = len(r.lsnAt)
	case 9:
		seed := in.u64()
		if r.rounds < 3 {
			r.crashAndCheck(seed)
			return
		}
	case 10:
		for range 1 + in.u8()%6 {
			cuckooAdd(k)
		}
	case 11:
		b.Has([]byte(k))
		c.Count([]byte(k))
		n.Count([]byte(k))
		bm.Get(uint64(in.u16()) % simBits)
	}
	r.lsnAt = append(r.lsnAt, s.log.LastLSN())
	r.undoAt = append(r.undoAt, len(m.undo))
}

// crashAndCheck crashes with the given seed, recovers and checks I1-I4,
// then starts a new round from the recovered state.
func (r *crashRun) crashAndCheck(seed uint64) {
	t, s, w := r.t, r.s, r.w
	rng := rand.New(rand.NewPCG(seed, uint64(r.rounds)))
	mode := w.opts.Sync
	// synced is the op index of the last sync: lsnAt has one more entry
	// than ops, so syncedAt indexes the state after that op.
	syncedLSN := r.lsnAt[min(r.syncedAt, len(r.lsnAt)-1)]
	lastLSN := s.log.LastLSN()
	ckpt := s.checkpointLSN.Load()
	var words map[string][]uint64
	var counts []uint64
	if mode == SyncAlways {
		words, counts = snapshotWords(s), snapshotCounts(s)
	}
	w.crash(s, rng)
	r.replayed = 0
	s, err := w.open(t)
	if err != nil {
		r.fatalf("seed %d: I4: recovery failed: %v", seed, err)
	}
	r.s = s
	recovered := s.checkpointLSN.Load()
	if recovered < ckpt {
		r.fatalf("seed %d: checkpoint LSN went back from %d to %d", seed, ckpt, recovered)
	}
	if want := int64(recovered - ckpt); r.replayed != want {
		r.fatalf("seed %d: I3: recovery replayed %d records to get from checkpoint %d to LSN %d", seed, r.replayed, ckpt, recovered)
	}
	if recovered > lastLSN || recovered < syncedLSN {
		r.fatalf("seed %d: I2: recovered to LSN %d; synced %d, last logged %d", seed, recovered, syncedLSN, lastLSN)
	}
	if mode == SyncAlways && recovered != lastLSN {
		r.fatalf("seed %d: I2: SyncAlways recovered to LSN %d, last acknowledged %d", seed, recovered, lastLSN)
	}
	// The recovered state is the state after the last op whose records
	// all survived.
	i := len(r.lsnAt) - 1
	for i > 0 && r.lsnAt[i] > recovered {
		i--
	}
	r.m.rewind(r.undoAt[i])
	want := r.m.opModel()
	checkRecovered(t, seed, s, want)
	bm, err := s.Bitmap("m")
	r.must("Bitmap", err)
	if got := bm.bm.Words(); !slices.Equal(got, want.bitWords()) {
		r.fatalf("seed %d: the recovered bitmap differs from the state after op %d of %d", seed, i, len(r.lsnAt)-1)
	}
	if mode == SyncAlways {
		after := snapshotWords(s)
		if !slices.Equal(keysOf(words), keysOf(after)) {
			r.fatalf("seed %d: filter layers %v after recovery, %v before", seed, keysOf(after), keysOf(words))
		}
		for name, ws := range words {
			if !slices.Equal(ws, after[name]) {
				r.fatalf("seed %d: %s differs after recovery", seed, name)
			}
		}
		if got := snapshotCounts(s); !slices.Equal(got, counts) {
			r.fatalf("seed %d: counts %v after recovery, want %v", seed, got, counts)
		}
	}
	r.rounds++
	r.startRound()
}

// corruptWAL abandons the store, flips bits of one byte of one WAL
// segment, and reopens: I4.
func (r *crashRun) corruptWAL(segSel, offSel int, xor byte) {
	t, w := r.t, r.w
	r.s.abandonForTest()
	dir := filepath.Join(w.dir, walDir)
	names, err := w.fs.List(dir)
	r.must("list WAL", err)
	var segs []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			segs = append(segs, filepath.Join(dir, n))
		}
	}
	if len(segs) == 0 {
		r.fatalf("no WAL segment in %v", names)
	}
	slices.Sort(segs)
	seg := segSel % len(segs)
	data, err := w.fs.ReadFile(segs[seg])
	r.must("read segment", err)
	if len(data) == 0 {
		return
	}
	// offSel's top bit counts the offset from the end, so that inputs
	// reach the tail record whatever the segment's length.
	off := (offSel & 0x7fff) % len(data)
	if offSel&0x8000 != 0 {
		off = len(data) - 1 - off
	}
	// The tail record: the last one of the last segment.
	tailStart := -1
	if seg == len(segs)-1 && len(data) > wal.SegmentHeaderSize {
		rd := wal.NewReader(bytes.NewReader(data[wal.SegmentHeaderSize:]))
		for {
			if _, _, err := rd.Next(); err != nil {
				break
			}
			tailStart = wal.SegmentHeaderSize + int(rd.Offset())
		}
	}
	data[off] ^= xor
	r.must("write segment", w.fs.WriteFile(segs[seg], data))
	s, err := w.open(t)
	inTail := tailStart >= 0 && off >= tailStart
	switch {
	case inTail && err != nil:
		r.fatalf("I4: a flipped byte at offset %d of the tail record (at %d) of %s: Open failed: %v", off, tailStart, segs[seg], err)
	case !inTail && (err == nil || !errors.Is(err, ErrCorrupt)):
		if s != nil {
			s.Close()
		}
		r.fatalf("I4: a flipped byte at offset %d of %s (%d bytes, tail record at %d, segment %d of %d): Open returned %v, want ErrCorrupt",
			off, segs[seg], len(data), tailStart, seg+1, len(segs), err)
	}
	if s != nil {
		r.must("Close after a torn tail", s.Close())
	}
}

// crashFuzzSeeds are the inputs checked in under
// testdata/fuzz/FuzzCrashRecovery.
func crashFuzzSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	// seq builds a header and ops ops drawn from weights (op code ->
	// relative weight), with a mid-sequence crash after every crashEvery
	// ops.
	seq := func(name string, mode byte, finalSeed uint64, corrupt, seg byte, off uint16, ops, crashEvery int, weights map[byte]int, seed uint64) {
		le := binary.LittleEndian
		b := []byte{mode}
		b = le.AppendUint64(b, finalSeed)
		b = append(b, corrupt, seg)
		b = le.AppendUint16(b, off)
		b = append(b, 0x10)
		var table []byte
		for op := byte(0); op < 12; op++ {
			for range weights[op] {
				table = append(table, op)
			}
		}
		x := seed
		next := func() uint64 { // splitmix64
			x += 0x9e3779b97f4a7c15
			z := x
			z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
			z = (z ^ z>>27) * 0x94d049bb133111eb
			return z ^ z>>31
		}
		for i := 1; i <= ops; i++ {
			op := table[next()%uint64(len(table))]
			if crashEvery > 0 && i%crashEvery == 0 {
				op = 9
			}
			b = append(b, byte(next()%100), op)
			switch op {
			case 5, 6, 11:
				b = le.AppendUint16(b, uint16(next()))
			case 9:
				b = le.AppendUint64(b, next())
			case 10:
				b = append(b, byte(next()))
			}
		}
		seeds[name] = b
	}
	all := map[byte]int{0: 4, 1: 4, 2: 3, 3: 3, 4: 2, 5: 3, 6: 2, 7: 1, 8: 1, 10: 1, 11: 1}
	seq("always-3-crashes", 0, 1, 0, 0, 0, 140, 35, all, 1)
	seq("interval-3-crashes", 1, 2, 0, 0, 0, 140, 35, all, 2)
	seq("interval-syncs", 1, 3, 0, 0, 0, 120, 40, map[byte]int{0: 2, 1: 2, 2: 1, 3: 2, 5: 3, 6: 2, 8: 3}, 3)
	seq("always-cuckoo-grows", 0, 4, 0, 0, 0, 140, 70, map[byte]int{1: 3, 2: 2, 10: 2, 7: 1}, 4)
	seq("interval-cuckoo-grows", 1, 5, 0, 0, 0, 140, 70, map[byte]int{1: 3, 2: 2, 10: 2, 8: 1}, 5)
	seq("always-corrupt-header", 0, 6, 1, 0, 5, 60, 0, all, 6)
	seq("always-corrupt-middle", 0, 7, 1, 0, 200, 80, 0, all, 7)
	seq("interval-corrupt-tail", 1, 8, 1, 0xff, 0x8000|3, 80, 0, all, 8)
	seq("always-corrupt-tail-length", 0, 10, 1, 0xff, 0x8000|20, 80, 0, all, 10)
	seq("always-corrupt-before-tail", 0, 11, 1, 0xff, 0x8000|60, 80, 0, all, 11)
	seq("always-checkpoint-then-crash", 0, 9, 1, 0, 30, 60, 0, map[byte]int{0: 1, 1: 1, 3: 1, 5: 1, 7: 2}, 9)
	return seeds
}

// TestCrashCorpus checks (or, with FILTERSTORE_WRITE_CORPUS=1, writes) the
// seed corpus of FuzzCrashRecovery.
func TestCrashCorpus(t *testing.T) {
	fuzzcorpus.Check(t, "FuzzCrashRecovery", crashFuzzSeeds())
}
