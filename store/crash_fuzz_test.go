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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/fuzzcorpus"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// FuzzCrashRecovery drives the simulated crash world of crash_sim_test.go
// (filter files behind mmapbits.Sim, the WAL behind wal.MemFS, the filters
// of createSimFilters) from the fuzzer's bytes, with the failing syncs and
// writes of fault_sync_test.go.
//
// Input layout (reads past the end are zeros):
//
//	header: mode      u8   bit 0 set: SyncInterval, else SyncAlways
//	        final     u64  seed of the final power loss
//	        corrupt   u8   bit 0 set: flip a WAL byte at the end (below)
//	        segment   u8   which WAL segment, modulo their number
//	        offset    u16  where in it (bit 15: counted from its end)
//	        xor       u8   the bits to flip (| 1)
//	op:     key       u8   key "k<key%100>"
//	        code      u8   code%13, then the op's own bytes:
//	  0 Bloom add; 1 cuckoo add; 2 cuckoo delete; 3 counting add;
//	  4 counting delete; 5, 6 bitmap set, clear (u16 offset);
//	  7 checkpoint; 8 WAL sync; 10 cuckoo adds of one hot key (u8 count);
//	  11 lookups (u16 offset);
//	  9 crash (u8 how, u64 seed): how bit 0 clear: a power loss; set: the
//	    process dies (after a Close, with bit 1), its successor reopens
//	    and goes on, until a later crash or the final power loss;
//	  12 arm a fault (u8 f): the (f/4+1)-th next operation of kind f%4
//	    fails: 0 a WAL write (ENOSPC), 1 a WAL fdatasync, 2 a sync of the
//	    WAL directory, 3 an msync of a filter file (EIO). A failed sync
//	    has Linux's semantics (the seams model them): what it should have
//	    written is lost to a power loss, though still read back. A WAL
//	    write fault that hits a new segment's header is not a failure:
//	    the log postpones the segment and the store goes on.
//
// Operations run until the input or maxCrashOps ends, with at most
// maxCrashRounds crashes among them; then the final power loss. A power
// loss keeps each dirty filter page's memory or disk image and the WAL's
// synced prefix plus a possibly torn part of the rest, both drawn from a
// *rand.Rand seeded from the input. A fault is disarmed at each crash.
//
// Properties:
//   - F: the change that meets an injected fault fails with an error
//     wrapping ErrFailed and the fault's; from then on every change fails
//     so (a Bloom add of a present key included), Close returns ErrFailed,
//     and lookups still answer every acknowledged op (CrashModel.Verify,
//     the bitmap exactly). No fault goes unreported.
//
// and after each recovery:
//   - I4: Open succeeds (a torn tail is truncated silently).
//   - I3: recovery replays exactly the records after the last checkpoint:
//     as many as the recovered LSN is past the checkpoint LSN.
//   - I2: the recovered LSN is at most the last LSN logged, and at least
//     that of the last acknowledged op, except after a power loss under
//     SyncInterval: there, at least that of the last successful WAL sync
//     or checkpoint (a failed sync is none). Under SyncAlways, with no
//     failure in the round, the recovered filter words and item counts
//     equal the pre-crash state, after a power loss (as
//     TestSimulatedPowerLossSyncAlways checks) and a process death alike.
//   - I1: the recovered state honours the model (crashmodel_test.go) of
//     every acknowledged op up to the recovered LSN, which the model is
//     rewound to (CrashModel.Verify: no Bloom false negative, cuckoo and
//     counting counts at least the model's, item counts within its
//     bounds), and the bitmap equals it exactly. The sequence then goes on
//     from that state. An op that logs several records (op 10) is one
//     state per record.
//
// The op that meets a fault is not acknowledged, but its record may
// survive: it is in flight for the model, which widens each count it
// touches to both outcomes and leaves a bitmap bit it wrote out of the
// exact comparison until a recovery settles it.
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
// a WAL segment flipped and the store reopened (I4): a flip in the last
// record of the last segment is a torn tail, so Open must succeed; a flip
// anywhere else must make Open fail with an error wrapping ErrCorrupt.
//
// The catalog and lock file are real files, in memory where the machine
// has a memory file system (fuzzcorpus.MemTempDir): on a disk, bbolt's
// fsyncs would cost about as much as everything else an input does.
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
		r.crashAndCheck(finalSeed, 0)
		if corrupt {
			r.corruptWAL(int(corruptSeg), int(corruptOff), corruptXor)
			return
		}
		if err := r.s.Close(); err != nil {
			t.Fatalf("Close after the last recovery: %v", err)
		}
		r.w.sim.SetInjector(nil)
		r.w.fs.SetInjector(nil)
		checkSumsAfterClose(t, finalSeed, r.w)
	})
}

// Bounds on the work of one input.
const (
	maxCrashOps    = 150 // operations
	maxCrashRounds = 3   // crashes among them, the final power loss aside
)

// Crash kinds: the how byte of op 9.
const (
	crashKill  = 1 << iota // the process dies instead of the power
	crashClose             // with crashKill: it closes the store first
)

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

// faultKind is an operation of the seams that FuzzCrashRecovery can fail.
type faultKind uint8

const (
	faultWALWrite   faultKind = iota // a WAL segment write: ENOSPC
	faultWALSync                     // a WAL segment fdatasync: EIO
	faultWALSyncDir                  // a sync of the WAL directory: EIO
	faultMsync                       // a filter file msync: EIO
	numFaultKinds
)

// errno is the error a fault of kind k injects.
func (k faultKind) errno() error {
	if k == faultWALWrite {
		return syscall.ENOSPC
	}
	return syscall.EIO
}

// crashFaults is FuzzCrashRecovery's injector: once armed, it lets skip
// operations of its kind through and fails the next one. It fires at most
// once between two disarms, so the failure a store reports is the one it
// injected; operations after it succeed again (retrying would "work").
type crashFaults struct {
	mu    sync.Mutex
	armed bool
	kind  faultKind
	skip  int
	fired error // the error injected since the last disarm, if any
}

// arm replaces the armed fault, unless one fired already.
func (f *crashFaults) arm(kind faultKind, skip int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fired == nil {
		f.armed, f.kind, f.skip = true, kind, skip
	}
}

func (f *crashFaults) disarm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.fired = false, nil
}

// injected returns the error injected since the last disarm, nil if none.
func (f *crashFaults) injected() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired
}

func (f *crashFaults) hit(kind faultKind) error { return f.hitFile(kind, "") }

// hitFile is hit for an operation on the file name. A WAL write fault
// (ENOSPC) that hits a new segment's temporary file is absorbed: the log
// goes on in its active segment (wal's postponed rotation), so the store
// reports nothing and the fault counts as not fired.
func (f *crashFaults) hitFile(kind faultKind, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed || f.kind != kind {
		return nil
	}
	if f.skip > 0 {
		f.skip--
		return nil
	}
	if kind == faultWALWrite && strings.HasSuffix(name, ".tmp") {
		f.armed = false
		return kind.errno()
	}
	f.armed, f.fired = false, kind.errno()
	return f.fired
}

// install puts f in front of w's seams; a crash replaces w.fs, so it is
// installed again after each.
func (f *crashFaults) install(w *simWorld) {
	w.sim.SetInjector(func(op mmapbits.Op, _ string) error {
		if op == mmapbits.OpSync {
			return f.hit(faultMsync)
		}
		return nil
	})
	w.fs.SetInjector(func(op wal.Op, name string) error {
		switch op {
		case wal.OpWrite:
			return f.hitFile(faultWALWrite, name)
		case wal.OpSync:
			return f.hit(faultWALSync)
		case wal.OpSyncDir:
			return f.hit(faultWALSyncDir)
		}
		return nil
	})
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
	m        *CrashModel // rewindable
	faults   *crashFaults
	replayed int64
	rounds   int

	// The current round: the WAL's last LSN after each op (index 0: the
	// round's start), the model's undo length after each op, and the op
	// index of the last successful WAL sync or checkpoint.
	lsnAt    []uint64
	undoAt   []int
	syncedAt int
	// failed is the error of the change that met the injected fault, and
	// failedAt the index of the state after it in lsnAt; nil, 0 while the
	// store works. That change is in flight for the model.
	failed   error
	failedAt int
}

func newCrashRun(t *testing.T, mode SyncMode) *crashRun {
	w := newSimWorld(t, mode)
	w.dir = fuzzcorpus.MemTempDir(t)
	// No background fsync, so that what a crash keeps depends only on the
	// input; WAL syncs are ops of the sequence.
	w.opts.SyncEvery = time.Hour
	r := &crashRun{t: t, w: w, m: NewCrashModel(mode, simFilters), faults: &crashFaults{}}
	r.m.Rewindable()
	r.faults.install(w)
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
	r.undoAt = []int{r.m.Mark()}
	r.syncedAt = 0
	r.failed, r.failedAt = nil, 0
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

// changed checks the error of a change and reports whether the change was
// acknowledged (F): a change succeeds until an injected fault fires; the
// one that meets it and every later one fail with an error wrapping
// ErrFailed and the injected error. The first such failure is recorded.
func (r *crashRun) changed(what string, err error) bool {
	r.t.Helper()
	fault := r.faults.injected()
	switch {
	case err == nil && fault == nil:
		return true
	case err == nil:
		r.fatalf("F: %s succeeded after an injected failure (%v)", what, fault)
	case fault == nil:
		r.fatalf("%s: %v", what, err)
	case !errors.Is(err, ErrFailed) || !errors.Is(err, fault):
		r.fatalf("F: %s after an injected failure (%v): %v, want an error wrapping ErrFailed and it", what, fault, err)
	}
	if r.failed == nil {
		r.failed, r.failedAt = err, len(r.lsnAt)
	}
	return false
}

// failing reports whether the op now running is the one that met the
// fault: its outcome is unknown.
func (r *crashRun) failing() bool { return r.failed != nil && r.failedAt == len(r.lsnAt) }

// cuckooAdd adds k to c and records in the model the layer it landed in.
func (r *crashRun) cuckooAdd(c *Cuckoo, k string) {
	h := Hash([]byte(k))
	before := cuckooEntries(c, h)
	err := c.Add([]byte(k))
	after := cuckooEntries(c, h)
	if errors.Is(err, ErrFull) && r.faults.injected() == nil {
		if !slices.Equal(before, after) {
			r.fatalf("cuckoo add of %s failed with %v but changed its entries %v -> %v", k, err, before, after)
		}
		return // refused, not acknowledged
	}
	if !r.changed("cuckoo add", err) {
		if r.failing() {
			r.m.InFlight(CuckooAdd(k))
		}
		return
	}
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
	r.must("model", r.m.Apply(CuckooAdd(k).InLayer(landed)))
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
	k := fmt.Sprintf("k%d", in.u8()%100)
	switch op := in.u8() % 13; op {
	case 0:
		_, err := b.Add([]byte(k))
		if r.changed("bloom add", err) {
			r.must("model", m.Apply(BloomAdd(k)))
		} else if r.failing() {
			m.InFlight(BloomAdd(k))
		}
	case 1:
		r.cuckooAdd(c, k)
	case 2:
		// Store.Cuckoo.Delete refuses (false, ErrAmbiguous) a key matching
		// in two or more layers, and otherwise deletes from the one layer it
		// matches. Deleting a key that owns no entry there would remove
		// another key's: not issued.
		counts := cuckooEntries(c, Hash([]byte(k)))
		var matches []int
		for i, n := range counts {
			if n > 0 {
				matches = append(matches, i)
			}
		}
		owned := m.Owned(k)
		if len(matches) == 0 || (len(matches) == 1 && (matches[0] >= len(owned) || owned[matches[0]] == 0)) {
			break
		}
		ok, err := c.Delete([]byte(k))
		if errors.Is(err, ErrAmbiguous) && r.faults.injected() == nil {
			after := cuckooEntries(c, Hash([]byte(k)))
			if ok || len(matches) < 2 || !slices.Equal(after, counts) {
				r.fatalf("cuckoo delete of %s, matching in layers %v: %v, %v, entries %v -> %v; want a refusal changing nothing",
					k, matches, ok, err, counts, after)
			}
			break // refused, not acknowledged
		}
		if !r.changed("cuckoo delete", err) {
			if r.failing() && len(matches) == 1 {
				m.InFlight(CuckooDelete(k).InLayer(matches[0]))
			}
			break
		}
		if ok != (len(matches) == 1) {
			r.fatalf("cuckoo delete of %s, matching in layers %v (owning %v), returned %v", k, matches, owned, ok)
		}
		if after := cuckooEntries(c, Hash([]byte(k))); ok {
			counts[matches[0]]--
			if !slices.Equal(after, counts) {
				r.fatalf("cuckoo delete of %s: entries per layer %v, want %v", k, after, counts)
			}
			r.must("model", m.Apply(CuckooDelete(k).InLayer(matches[0])))
		} else if !slices.Equal(after, counts) {
			r.fatalf("refused cuckoo delete of %s changed its entries %v -> %v", k, counts, after)
		}
	case 3:
		if r.changed("counting add", n.Add([]byte(k))) {
			r.must("model", m.Apply(CountingAdd(k)))
		} else if r.failing() {
			m.InFlight(CountingAdd(k))
		}
	case 4:
		if cr := m.Range(CrashCounting, k); cr.Lo > 0 {
			ok, err := n.Delete([]byte(k))
			if !r.changed("counting delete", err) {
				if r.failing() {
					m.InFlight(CountingDelete(k))
				}
				break
			}
			if !ok {
				r.fatalf("counting delete of %s (count %d..%d) found nothing", k, cr.Lo, cr.Hi)
			}
			r.must("model", m.Apply(CountingDelete(k)))
		}
	case 5, 6:
		off := uint64(in.u16()) % CrashBits
		var err error
		o := BitSet(off)
		if op == 5 {
			_, err = bm.Set(off)
		} else {
			_, err = bm.Clear(off)
			o = BitClear(off)
		}
		if r.changed("bitmap write", err) {
			r.must("model", m.Apply(o))
		} else if r.failing() {
			m.InFlight(o)
		}
	case 7:
		if r.changed("checkpoint", s.Checkpoint()) {
			r.syncedAt = len(r.lsnAt)
		}
	case 8:
		if r.failed != nil {
			break // the store would not sync any more; nothing to check
		}
		err := s.log.Sync()
		if err != nil {
			err = s.fail(err) // what the store does when it sees the failure
		}
		if r.changed("wal sync", err) {
			// Apply what became durable now rather than whenever the
			// background goroutine runs, so the crash is deterministic.
			s.applySynced()
			r.syncedAt = len(r.lsnAt)
		}
	case 9:
		how, seed := in.u8(), in.u64()
		if r.rounds < maxCrashRounds {
			r.crashAndCheck(seed, how)
			return
		}
	case 10:
		// Each add is a record of its own, so each is a state a
		// recovery may stop at.
		for i := range 1 + in.u8()%6 {
			if i > 0 {
				r.step()
			}
			r.cuckooAdd(c, k)
		}
	case 11:
		b.Has([]byte(k))
		c.Count([]byte(k))
		n.Count([]byte(k))
		bm.Get(uint64(in.u16()) % CrashBits)
	case 12:
		f := in.u8()
		r.faults.arm(faultKind(f%byte(numFaultKinds)), int(f/byte(numFaultKinds)))
	}
	if fault := r.faults.injected(); fault != nil && r.failed == nil {
		r.fatalf("F: an injected failure (%v) went unreported", fault)
	}
	r.step()
}

// step ends a state of the round: one op, or one record of an op that
// logs several.
func (r *crashRun) step() {
	r.lsnAt = append(r.lsnAt, r.s.log.LastLSN())
	r.undoAt = append(r.undoAt, r.m.Mark())
}

// crashAndCheck crashes as how says (see crashKill) with the given seed,
// recovers and checks I1-I4, then starts a new round from the recovered
// state.
func (r *crashRun) crashAndCheck(seed uint64, how byte) {
	t, s, w := r.t, r.s, r.w
	rng := rand.New(rand.NewPCG(seed, uint64(r.rounds)))
	mode := w.opts.Sync
	kill := how&crashKill != 0
	r.faults.disarm()
	lastLSN := s.log.LastLSN()
	// floor is the LSN recovery must reach: the last acknowledged op's,
	// or for a power loss under SyncInterval the last sync's (lsnAt has
	// one more entry than ops, so syncedAt indexes the state after it).
	floor := lastLSN
	if r.failed != nil {
		floor = r.lsnAt[r.failedAt-1]
	}
	if !kill && mode == SyncInterval {
		floor = r.lsnAt[min(r.syncedAt, len(r.lsnAt)-1)]
	}
	if r.failed != nil {
		// F: the failed store still answers every acknowledged op.
		checkModel(t, seed, fmt.Sprintf("round %d: the store failed by %v", r.rounds, r.failed), s, r.m)
	}
	// exact: the recovered words and counts must equal these.
	exact := r.failed == nil && mode == SyncAlways
	var before crashImage
	if exact {
		before = imageOf(s)
	}
	ckpt := s.checkpointLSN.Load()
	switch {
	case kill && how&crashClose != 0:
		err := s.Close()
		if r.failed == nil && err != nil {
			r.fatalf("Close: %v", err)
		}
		if r.failed != nil && !errors.Is(err, ErrFailed) {
			r.fatalf("F: Close of the store failed by %v: %v, want ErrFailed", r.failed, err)
		}
		ckpt = s.checkpointLSN.Load()
		w.sim.Kill()
		w.fs = w.fs.Kill()
	case kill:
		w.kill(s)
		s.log.Close() // the dead process's log: it writes to the discarded file system
	default:
		w.powerLoss(s, rng)
	}
	r.faults.install(w)
	r.replayed = 0
	s, err := w.open(t)
	if err != nil {
		r.fatalf("seed %d, crash %#x: I4: recovery failed: %v", seed, how, err)
	}
	r.s = s
	recovered := s.checkpointLSN.Load()
	if recovered < ckpt {
		r.fatalf("seed %d, crash %#x: checkpoint LSN went back from %d to %d", seed, how, ckpt, recovered)
	}
	if want := int64(recovered - ckpt); r.replayed != want {
		r.fatalf("seed %d, crash %#x: I3: recovery replayed %d records to get from checkpoint %d to LSN %d", seed, how, r.replayed, ckpt, recovered)
	}
	if recovered > lastLSN || recovered < floor {
		r.fatalf("seed %d, crash %#x: I2: recovered to LSN %d; must keep %d, last logged %d (failure: %v)", seed, how, recovered, floor, lastLSN, r.failed)
	}
	// The recovered state is the state after the last op whose records
	// all survived.
	i := len(r.lsnAt) - 1
	for i > 0 && r.lsnAt[i] > recovered {
		i--
	}
	r.m.Rewind(r.undoAt[i])
	checkModel(t, seed, fmt.Sprintf("round %d: the state after op %d of %d, recovered after crash %#x", r.rounds, i, len(r.lsnAt)-1, how), s, r.m)
	if d := imageOf(s).diff(before); exact && d != "" {
		r.fatalf("seed %d, crash %#x: after recovery: %s", seed, how, d)
	}
	// Recovery settled what the op in flight left uncertain in the bitmap.
	r.must("settle the model", r.m.Settle(s))
	r.rounds++
	r.startRound()
}

// corruptWAL abandons the store, flips bits of one byte of one WAL
// segment, and reopens: I4.
func (r *crashRun) corruptWAL(segSel, offSel int, xor byte) {
	t, w := r.t, r.w
	r.s.abandonForTest()
	dir := filepath.Join(w.dir, format.WALName)
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
	le := binary.LittleEndian
	// crash and fault encode op 9 and op 12.
	crash := func(how byte, seed uint64) []byte { return le.AppendUint64([]byte{0, 9, how}, seed) }
	fault := func(kind faultKind, skip int) []byte {
		return []byte{0, 12, byte(kind) + byte(skip)*byte(numFaultKinds)}
	}
	// every puts op at every n-th position of ops, varying its seed.
	every := func(n, ops int, op func(i int) []byte) map[int][]byte {
		at := map[int][]byte{}
		for i := n; i <= ops; i += n {
			at[i] = op(i)
		}
		return at
	}
	// seq builds a header and ops ops: at each position the op that at
	// gives, elsewhere one drawn from weights (op code -> relative weight).
	seq := func(name string, mode byte, finalSeed uint64, corrupt, seg byte, off uint16, ops int, at map[int][]byte, weights map[byte]int, seed uint64) {
		b := []byte{mode}
		b = le.AppendUint64(b, finalSeed)
		b = append(b, corrupt, seg)
		b = le.AppendUint16(b, off)
		b = append(b, 0x10)
		var table []byte
		for op := byte(0); op < 13; op++ {
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
			if op, ok := at[i]; ok {
				b = append(b, op...)
				continue
			}
			op := table[next()%uint64(len(table))]
			b = append(b, byte(next()%100), op)
			switch op {
			case 5, 6, 11:
				b = le.AppendUint16(b, uint16(next()))
			case 9:
				b = append(b, 0)
				b = le.AppendUint64(b, next())
			case 10:
				b = append(b, byte(next()))
			case 12:
				b = append(b, byte(next()))
			}
		}
		seeds[name] = b
	}
	powerLoss := func(i int) []byte { return crash(0, uint64(i)) }
	all := map[byte]int{0: 4, 1: 4, 2: 3, 3: 3, 4: 2, 5: 3, 6: 2, 7: 1, 8: 1, 10: 1, 11: 1}
	seq("always-3-crashes", 0, 1, 0, 0, 0, 140, every(35, 140, powerLoss), all, 1)
	seq("interval-3-crashes", 1, 2, 0, 0, 0, 140, every(35, 140, powerLoss), all, 2)
	seq("interval-syncs", 1, 3, 0, 0, 0, 120, every(40, 120, powerLoss), map[byte]int{0: 2, 1: 2, 2: 1, 3: 2, 5: 3, 6: 2, 8: 3}, 3)
	seq("always-cuckoo-grows", 0, 4, 0, 0, 0, 140, every(70, 140, powerLoss), map[byte]int{1: 3, 2: 2, 10: 2, 7: 1}, 4)
	seq("interval-cuckoo-grows", 1, 5, 0, 0, 0, 140, every(70, 140, powerLoss), map[byte]int{1: 3, 2: 2, 10: 2, 8: 1}, 5)
	seq("always-corrupt-header", 0, 6, 1, 0, 5, 60, nil, all, 6)
	seq("always-corrupt-middle", 0, 7, 1, 0, 200, 80, nil, all, 7)
	seq("interval-corrupt-tail", 1, 8, 1, 0xff, 0x8000|3, 80, nil, all, 8)
	seq("always-corrupt-tail-length", 0, 10, 1, 0xff, 0x8000|20, 80, nil, all, 10)
	seq("always-corrupt-before-tail", 0, 11, 1, 0xff, 0x8000|60, 80, nil, all, 11)
	seq("always-checkpoint-then-crash", 0, 9, 1, 0, 30, 60, nil, map[byte]int{0: 1, 1: 1, 3: 1, 5: 1, 7: 2}, 9)

	// Process deaths: the successor reopens, goes on, and the final power
	// loss must keep what it recovered (with a Close first, for kill-close).
	kill := func(i int) []byte { return crash(crashKill, uint64(i)) }
	killClose := func(i int) []byte { return crash(crashKill|crashClose, uint64(i)) }
	seq("always-kills", 0, 12, 0, 0, 0, 140, every(35, 140, kill), all, 12)
	seq("interval-kills", 1, 13, 0, 0, 0, 140, every(35, 140, kill), all, 13)
	seq("interval-kill-close", 1, 14, 0, 0, 0, 120, every(40, 120, killClose), all, 14)

	// Injected faults, one per round, each followed by more changes (all
	// refused) and a crash. Under SyncInterval the WAL fdatasync failure
	// loses the acknowledged records written since the last sync for the
	// disk while they still read back: a process death then must not lose
	// them (the reopen makes them durable, so the final power loss keeps
	// them); a power loss may.
	faults := func(rounds ...[3]int) map[int][]byte { // {kind, skip, crash how}
		at := map[int][]byte{}
		for i, f := range rounds {
			at[i*40+10] = fault(faultKind(f[0]), f[1])
			at[i*40+35] = crash(byte(f[2]), uint64(i))
		}
		return at
	}
	writes := map[byte]int{0: 4, 1: 3, 2: 2, 3: 3, 4: 2, 5: 3, 6: 2, 8: 2, 11: 1}
	seq("always-fail-wal-write", 0, 15, 0, 0, 0, 120, faults([3]int{int(faultWALWrite), 5, 0}, [3]int{int(faultWALWrite), 0, crashKill}, [3]int{int(faultWALWrite), 12, crashKill | crashClose}), writes, 15)
	seq("always-fail-wal-sync", 0, 16, 0, 0, 0, 120, faults([3]int{int(faultWALSync), 3, 0}, [3]int{int(faultWALSync), 8, crashKill}, [3]int{int(faultWALSync), 0, crashKill | crashClose}), writes, 16)
	seq("interval-fail-wal-sync-then-kill", 1, 17, 0, 0, 0, 120, faults([3]int{int(faultWALSync), 0, crashKill}, [3]int{int(faultWALSync), 1, crashKill | crashClose}, [3]int{int(faultWALSync), 0, 0}), writes, 17)
	seq("interval-fail-wal-write", 1, 18, 0, 0, 0, 120, faults([3]int{int(faultWALWrite), 4, 0}, [3]int{int(faultWALWrite), 9, crashKill}, [3]int{int(faultWALWrite), 2, 0}), writes, 18)
	ckpts := map[byte]int{0: 4, 1: 3, 2: 2, 3: 3, 4: 2, 5: 3, 6: 2, 7: 3, 8: 1}
	seq("always-fail-msync", 0, 19, 0, 0, 0, 120, faults([3]int{int(faultMsync), 0, 0}, [3]int{int(faultMsync), 1, crashKill}, [3]int{int(faultMsync), 0, crashKill | crashClose}), ckpts, 19)
	seq("interval-fail-msync", 1, 20, 0, 0, 0, 120, faults([3]int{int(faultMsync), 0, crashKill}, [3]int{int(faultMsync), 2, 0}, [3]int{int(faultMsync), 0, crashKill | crashClose}), ckpts, 20)
	seq("always-fail-wal-syncdir", 0, 21, 0, 0, 0, 120, faults([3]int{int(faultWALSyncDir), 0, 0}, [3]int{int(faultWALSyncDir), 1, crashKill}, [3]int{int(faultWALSyncDir), 0, crashKill | crashClose}), ckpts, 21)
	seq("interval-fail-wal-syncdir", 1, 22, 0, 0, 0, 120, faults([3]int{int(faultWALSyncDir), 1, 0}, [3]int{int(faultWALSyncDir), 0, crashKill}, [3]int{int(faultWALSyncDir), 0, 0}), ckpts, 22)
	return seeds
}

// TestCrashCorpus checks (or, with FILTERSTORE_WRITE_CORPUS=1, writes) the
// seed corpus of FuzzCrashRecovery.
func TestCrashCorpus(t *testing.T) {
	fuzzcorpus.Check(t, "FuzzCrashRecovery", crashFuzzSeeds())
}
