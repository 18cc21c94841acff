package store

// The one model of acknowledged state that every crash test of this
// package checks a recovered store against: the simulated power losses
// (crash_sim_test.go, crash_fault_test.go), FuzzCrashRecovery
// (crash_fuzz_test.go) and the real SIGKILL test (crash_real_test.go, in
// package store_test, hence the exported names).
//
// A test tells the model what happened, op by op:
//
//	Apply(op)     op was acknowledged
//	InFlight(op)  op's outcome is unknown: it was running when the
//	              process died, or it met an injected fault
//	Sync()        a sync point: every op acknowledged so far survives a
//	              power loss (a WAL sync, a checkpoint, a recovery)
//	Crash(power)  the store crashed: a power loss (power) or a process
//	              death; under SyncInterval a power loss may recover any
//	              state from the last sync point on
//	Verify(s)     what s, opened after the crash, gets wrong
//	Settle(s)     s recovered and checkpointed: its bitmap is now known
//	              and durable
//
// Per filter kind the model keeps:
//
//   - Bloom: the acknowledged keys (each marked durable once a sync point
//     passed it) and how many adds may or may not have happened. I1: every
//     acknowledged key answers Has; Card is at most the keys plus the
//     maybes.
//   - Cuckoo, counting: a CountRange per key, lo..hi, the counts a
//     recovered store may hold: an acknowledged add or delete moves both
//     bounds, an op in flight widens one. I1: Count(k) is at least lo
//     (counting counters saturate at 15); Items is within the sums of the
//     bounds. For the cuckoo filter the model may also keep the layer each
//     add landed in, when the test observes it.
//   - Bitmap: the acknowledged words, a mask of bits whose value is
//     unknown (written by an op in flight), and under SyncInterval the
//     words at the last sync point and after each op since: a power loss
//     must leave a consistent prefix, one of those states. Otherwise every
//     known bit reads as the last acknowledged op left it. Count equals the
//     set bits.
//
// Under SyncAlways an acknowledged op is durable, so every ack is a sync
// point and no crash loses one.

import (
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// CrashBits is the size of the bitmap of the crash tests.
const CrashBits = 4096

// CrashFilters names the four filters, one of each kind, of a crash test's
// store.
type CrashFilters struct{ Bloom, Cuckoo, Counting, Bitmap string }

// CrashFilter is a filter kind of the model.
type CrashFilter uint8

// The filter kinds of the model.
const (
	CrashBloom CrashFilter = iota
	CrashCuckoo
	CrashCounting
	CrashBitmap
)

// CrashOp is one change to one of the model's filters; build it with
// BloomAdd, CuckooAdd and the others.
type CrashOp struct {
	Filter CrashFilter
	Key    string // Bloom, cuckoo, counting
	Delete bool   // cuckoo, counting: a delete, else an add
	Off    uint64 // bitmap
	Clear  bool   // bitmap: a clear, else a set
	Layer  int    // cuckoo: the layer the op changed; -1 if not known
}

// BloomAdd is a Bloom add of k.
func BloomAdd(k string) CrashOp { return CrashOp{Filter: CrashBloom, Key: k, Layer: -1} }

// CuckooAdd is a cuckoo add of k.
func CuckooAdd(k string) CrashOp { return CrashOp{Filter: CrashCuckoo, Key: k, Layer: -1} }

// CuckooDelete is a cuckoo delete of k.
func CuckooDelete(k string) CrashOp {
	return CrashOp{Filter: CrashCuckoo, Key: k, Delete: true, Layer: -1}
}

// CountingAdd is a counting add of k.
func CountingAdd(k string) CrashOp { return CrashOp{Filter: CrashCounting, Key: k, Layer: -1} }

// CountingDelete is a counting delete of k.
func CountingDelete(k string) CrashOp {
	return CrashOp{Filter: CrashCounting, Key: k, Delete: true, Layer: -1}
}

// BitSet is a bitmap Set of off.
func BitSet(off uint64) CrashOp { return CrashOp{Filter: CrashBitmap, Off: off, Layer: -1} }

// BitClear is a bitmap Clear of off.
func BitClear(off uint64) CrashOp {
	return CrashOp{Filter: CrashBitmap, Off: off, Clear: true, Layer: -1}
}

// InLayer returns op with the cuckoo layer it changed.
func (op CrashOp) InLayer(l int) CrashOp { op.Layer = l; return op }

func (op CrashOp) String() string {
	switch op.Filter {
	case CrashBloom:
		return "bloom add " + op.Key
	case CrashBitmap:
		if op.Clear {
			return fmt.Sprintf("bitmap clear %d", op.Off)
		}
		return fmt.Sprintf("bitmap set %d", op.Off)
	}
	name, what := "cuckoo", "add"
	if op.Filter == CrashCounting {
		name = "counting"
	}
	if op.Delete {
		what = "delete"
	}
	return name + " " + what + " " + op.Key
}

// CountRange is what the model knows of a key's count in a cuckoo or
// counting filter: 0 <= Lo <= Hi.
type CountRange struct {
	Lo, Hi int // as of the last acknowledged op
	wlo    int // under SyncInterval: the least Lo since the last sync point
	whi    int // and the greatest Hi
}

// CrashModel is the acknowledged state of a crash test's store.
type CrashModel struct {
	names      CrashFilters
	window     bool            // SyncInterval: track the states since the last sync point
	bloom      map[string]bool // acknowledged adds; true once a sync point passed
	bloomMaybe int             // adds that may or may not have happened
	counts     [2]map[string]CountRange
	layers     map[string][]int // cuckoo entries each key surely owns, per layer
	bits       []uint64         // acknowledged bitmap words
	unknown    []uint64         // bits an op in flight may or may not have changed
	history    [][]uint64       // with window: the words at the last sync point and after each op since
	prefix     [][]uint64       // after Crash: the states a power loss may have left
	undo       []func()         // when rewindable
	rewindable bool
}

// NewCrashModel returns the model of an empty store of the given filters,
// written under mode.
func NewCrashModel(mode SyncMode, names CrashFilters) *CrashModel {
	m := &CrashModel{
		names:   names,
		window:  mode == SyncInterval,
		bloom:   map[string]bool{},
		counts:  [2]map[string]CountRange{{}, {}},
		layers:  map[string][]int{},
		bits:    make([]uint64, CrashBits/64),
		unknown: make([]uint64, CrashBits/64),
	}
	m.Sync()
	return m
}

// Rewindable makes the model keep what Rewind needs, from now until the
// next Settle.
func (m *CrashModel) Rewindable() { m.rewindable = true }

// Mark returns the position Rewind rewinds to: the model as it is now.
func (m *CrashModel) Mark() int { return len(m.undo) }

// Rewind undoes every Apply and InFlight since Mark returned n. A Sync
// since then is not undone.
func (m *CrashModel) Rewind(n int) {
	for len(m.undo) > n {
		m.undo[len(m.undo)-1]()
		m.undo = m.undo[:len(m.undo)-1]
	}
}

// Keys returns the keys the model holds for f (Bloom: the acknowledged
// ones), sorted.
func (m *CrashModel) Keys(f CrashFilter) []string {
	var out []string
	switch f {
	case CrashBloom:
		for k := range m.bloom {
			out = append(out, k)
		}
	case CrashCuckoo, CrashCounting:
		for k := range m.counts[f-CrashCuckoo] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Range returns the counts k may have in the cuckoo or counting filter.
func (m *CrashModel) Range(f CrashFilter, k string) CountRange {
	return m.counts[f-CrashCuckoo][k]
}

// Owned returns how many entries k surely owns in each cuckoo layer, as
// far as the ops gave their layers.
func (m *CrashModel) Owned(k string) []int { return m.layers[k] }

// Bit returns bit off as acknowledged, and whether it is known.
func (m *CrashModel) Bit(off uint64) (set, known bool) {
	w, b := off/64, uint64(1)<<(off%64)
	return m.bits[w]&b != 0, m.unknown[w]&b == 0
}

// Words returns the acknowledged bitmap words.
func (m *CrashModel) Words() []uint64 { return slices.Clone(m.bits) }

// Apply records an acknowledged op. It fails on a delete of a key that
// the model may hold no copy of.
func (m *CrashModel) Apply(op CrashOp) error {
	m.endPrefix()
	switch op.Filter {
	case CrashBloom:
		if _, ok := m.bloom[op.Key]; !ok {
			m.bloom[op.Key] = !m.window
			m.onUndo(func() { delete(m.bloom, op.Key) })
		}
	case CrashCuckoo, CrashCounting:
		d := 1
		if op.Delete {
			d = -1
		}
		if r := m.Range(op.Filter, op.Key); r.Lo+d < 0 {
			return fmt.Errorf("%s: the model holds %d..%d copies", op, r.Lo, r.Hi)
		}
		m.move(op, d, d)
	case CrashBitmap:
		w, b := op.Off/64, uint64(1)<<(op.Off%64)
		old := m.bits[w]
		if op.Clear {
			m.bits[w] &^= b
		} else {
			m.bits[w] |= b
		}
		m.onUndo(func() { m.bits[w] = old })
	}
	if m.window {
		n := len(m.history)
		m.history = append(m.history, slices.Clone(m.bits))
		m.onUndo(func() { m.history = m.history[:min(n, len(m.history))] })
	}
	return nil
}

// InFlight records an op whose outcome is unknown: the model widens to
// both outcomes, until a Settle learns the bitmap's.
func (m *CrashModel) InFlight(op CrashOp) {
	m.endPrefix()
	switch op.Filter {
	case CrashBloom:
		if _, ok := m.bloom[op.Key]; !ok {
			m.bloomMaybe++
			m.onUndo(func() { m.bloomMaybe-- })
		}
	case CrashCuckoo, CrashCounting:
		if op.Delete {
			m.move(op, -1, 0)
		} else {
			m.move(op, 0, 1)
		}
	case CrashBitmap:
		w, b := op.Off/64, uint64(1)<<(op.Off%64)
		if set, known := m.Bit(op.Off); known && set == op.Clear {
			m.unknown[w] |= b
			m.onUndo(func() { m.unknown[w] &^= b })
		}
	}
}

// move shifts k's bounds by dlo and dhi (and its layer's entries by dlo).
func (m *CrashModel) move(op CrashOp, dlo, dhi int) {
	counts := m.counts[op.Filter-CrashCuckoo]
	old, had := counts[op.Key]
	r := old
	r.Lo += dlo
	r.Hi += dhi
	r.wlo, r.whi = min(r.wlo, r.Lo), max(r.whi, r.Hi)
	counts[op.Key] = r
	var layers []int
	if op.Layer >= 0 {
		layers = slices.Clone(m.layers[op.Key])
		for len(m.layers[op.Key]) <= op.Layer {
			m.layers[op.Key] = append(m.layers[op.Key], 0)
		}
		m.layers[op.Key][op.Layer] += dlo
	}
	m.onUndo(func() {
		if had {
			counts[op.Key] = old
		} else {
			delete(counts, op.Key)
		}
		if op.Layer >= 0 {
			m.layers[op.Key] = layers
		}
	})
}

func (m *CrashModel) onUndo(fn func()) {
	if m.rewindable {
		m.undo = append(m.undo, fn)
	}
}

// Sync records a sync point: everything acknowledged so far survives a
// power loss.
func (m *CrashModel) Sync() {
	m.endPrefix()
	if !m.window {
		return
	}
	for k := range m.bloom {
		m.bloom[k] = true
	}
	for _, counts := range m.counts {
		for k, r := range counts {
			r.wlo, r.whi = r.Lo, r.Hi
			counts[k] = r
		}
	}
	m.history = [][]uint64{slices.Clone(m.bits)}
}

// Crash records a crash: a power loss (power) or a process death. Under
// SyncInterval a power loss may recover any state from the last sync
// point on: each count may be anywhere in its range since, each Bloom key
// added since may be gone, and the bitmap must be one of the states since
// (Verify). A process death, or any crash under SyncAlways, keeps every
// acknowledged op.
func (m *CrashModel) Crash(power bool) {
	if !power || !m.window {
		return
	}
	for k, durable := range m.bloom {
		if !durable {
			delete(m.bloom, k)
			m.bloomMaybe++
		}
	}
	for _, counts := range m.counts {
		for k, r := range counts {
			r.Lo, r.Hi = r.wlo, r.whi
			counts[k] = r
		}
	}
	m.prefix = m.history
	// Cuckoo layers: an add since the sync point may be gone.
	for k, per := range m.layers {
		if r := m.counts[0][k]; sum(per) > r.Lo {
			m.layers[k] = nil
		}
	}
}

// endPrefix ends what a Crash left for Verify without a Settle: the bits
// that differ between the states a power loss may have left stay unknown.
func (m *CrashModel) endPrefix() {
	for _, h := range m.prefix {
		for i := range h {
			m.unknown[i] |= h[i] ^ m.bits[i]
		}
	}
	m.prefix = nil
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// Settle learns the bitmap from s, a store that recovered (and so
// checkpointed) and passed Verify: what it holds is durable. It is a sync
// point, and drops what Rewind needs.
func (m *CrashModel) Settle(s *Store) error {
	bm, err := s.Bitmap(m.names.Bitmap)
	switch {
	case err == nil:
		m.bits = bitmapWords(bm)
	case errors.Is(err, ErrNotFound):
		clear(m.bits) // not created yet (Verify checked that it may be missing)
	default:
		return err
	}
	clear(m.unknown)
	m.prefix = nil
	m.history = nil
	m.undo = nil
	m.Sync()
	return nil
}

// bitmapWords reads bm through Get.
func bitmapWords(bm *Bitmap) []uint64 {
	ws := make([]uint64, CrashBits/64)
	for off := range uint64(CrashBits) {
		if bm.Get(off) {
			ws[off/64] |= 1 << (off % 64)
		}
	}
	return ws
}

// Verify checks s, a store opened after a crash (writable, read-only, or
// the failed store still running), against the model and returns what it
// gets wrong, at most 20 lines: Check reports no damage; I1 for every
// filter (no false negative for an acknowledged key, counts at least what
// was acknowledged); item counts within the model's bounds; the bitmap
// equal to the acknowledged state, or after a power loss under
// SyncInterval to one state since the last sync point, leaving out the
// bits of ops in flight; the bitmap's Count equal to its set bits; and in
// a writable store that has not failed (one just opened has nothing
// pending) the mapped bitmap words equal to what Get reads. A filter may
// be missing only while the model holds nothing for it.
func (m *CrashModel) Verify(s *Store) []string {
	var bad []string
	report := func(format string, args ...any) {
		if len(bad) < 20 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	// The recovering writer cannot tell damage from what the dead one
	// left in its pages, so it verifies none; it must not report any.
	if rep, err := s.Check(); err != nil {
		report("Check after the crash: %v (%+v)", err, rep)
	}
	missing := func(what string, err error, empty bool) {
		if !empty || !errors.Is(err, ErrNotFound) {
			report("%s: %v", what, err)
		}
	}
	if b, err := s.Bloom(m.names.Bloom); err != nil {
		missing("bloom filter", err, len(m.bloom) == 0)
	} else {
		for _, k := range m.Keys(CrashBloom) {
			if !b.Has([]byte(k)) {
				report("I1: bloom lost acknowledged %s", k)
			}
		}
		if card, most := b.Card(), uint64(len(m.bloom)+m.bloomMaybe); card > most {
			report("bloom Card %d exceeds the %d adds made", card, most)
		}
	}
	// counts checks I1 through count and items against the bounds.
	counts := func(f CrashFilter, name string, count func([]byte) uint64, items uint64, saturate int) {
		var lo, hi uint64
		for _, k := range m.Keys(f) {
			r := m.Range(f, k)
			lo += uint64(r.Lo)
			hi += uint64(r.Hi)
			if want := min(r.Lo, saturate); want > 0 {
				if got := count([]byte(k)); got < uint64(want) {
					report("I1: %s Count(%s) = %d, acknowledged %d..%d", name, k, got, r.Lo, r.Hi)
				}
			}
		}
		if items < lo || items > hi {
			report("%s Items = %d, outside the acknowledged %d..%d", name, items, lo, hi)
		}
	}
	if c, err := s.Cuckoo(m.names.Cuckoo); err != nil {
		missing("cuckoo filter", err, len(m.counts[0]) == 0)
	} else {
		counts(CrashCuckoo, "cuckoo", c.Count, c.Items(), 1<<30)
	}
	if n, err := s.Counting(m.names.Counting); err != nil {
		missing("counting filter", err, len(m.counts[1]) == 0)
	} else {
		counts(CrashCounting, "counting", n.Count, n.Items(), 15)
	}
	bm, err := s.Bitmap(m.names.Bitmap)
	if err != nil {
		touched := false
		for i := range m.bits {
			touched = touched || m.bits[i]|m.unknown[i] != 0
		}
		missing("bitmap", err, !touched)
		return bad
	}
	got := bitmapWords(bm)
	set := 0
	for _, w := range got {
		set += bits.OnesCount64(w)
	}
	// A failed store is left out: a bitmap change whose record was logged
	// (buffered) but never made durable is counted, while under
	// SyncAlways its bit never reaches the map, so the failed store's
	// Count can be one above its set bits. (Not acknowledged either way.)
	if s.failed() == nil && bm.Count() != uint64(set) {
		report("bitmap Count = %d, but %d bits are set", bm.Count(), set)
	}
	if bm.b.ro == nil && s.failed() == nil && bm.bm != nil && !slices.Equal(bm.bm.Words(), got) {
		report("bitmap: the mapped words differ from what Get reads in a store just opened")
	}
	equal := func(want []uint64) bool {
		for i := range want {
			if (got[i]^want[i])&^m.unknown[i] != 0 {
				return false
			}
		}
		return true
	}
	switch {
	case m.prefix != nil:
		if !slices.ContainsFunc(m.prefix, equal) {
			report("bitmap matches no state from the last sync point on (%d states)", len(m.prefix))
		}
	case !equal(m.bits):
		var diff []string
		for i := range got {
			for d := (got[i] ^ m.bits[i]) &^ m.unknown[i]; d != 0; d &= d - 1 {
				off := i*64 + bits.TrailingZeros64(d)
				diff = append(diff, fmt.Sprintf("%d (reads %v)", off, got[i]&(1<<(off%64)) != 0))
			}
		}
		if len(diff) > 10 {
			diff = append(diff[:10], "...")
		}
		report("bitmap differs from the last acknowledged state in bits %s", strings.Join(diff, ", "))
	}
	return bad
}

// checkModel fails t with everything Verify finds wrong in s.
func checkModel(t testing.TB, seed uint64, what string, s *Store, m *CrashModel) {
	t.Helper()
	if bad := m.Verify(s); len(bad) > 0 {
		t.Fatalf("seed %d: %s:\n%s", seed, what, strings.Join(bad, "\n"))
	}
}

// crashImage is every filter layer's words and every filter's item
// counts: with nothing in flight, a crash under SyncAlways must leave them
// exactly as they were.
type crashImage struct {
	words  map[string][]uint64 // by "filter/layer"
	counts []uint64
}

func imageOf(s *Store) crashImage {
	im := crashImage{words: map[string][]uint64{}}
	var names []string
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, h := range s.filters {
		names = append(names, name)
		for i, r := range h.base().regions {
			// Atomic loads: under SyncInterval the background apply may
			// still be storing after-images.
			ws := r.Words()
			cp := make([]uint64, len(ws))
			for j := range ws {
				cp[j] = atomic.LoadUint64(&ws[j])
			}
			im.words[fmt.Sprintf("%s/%d", name, i)] = cp
		}
	}
	slices.Sort(names)
	for _, name := range names {
		im.counts = append(im.counts, s.filters[name].base().items()...)
	}
	return im
}

// diff describes how im differs from want; "" if it does not.
func (im crashImage) diff(want crashImage) string {
	got, exp := slices.Sorted(maps.Keys(im.words)), slices.Sorted(maps.Keys(want.words))
	if !slices.Equal(got, exp) {
		return fmt.Sprintf("filter layers %v, want %v", got, exp)
	}
	for _, name := range exp {
		if !slices.Equal(im.words[name], want.words[name]) {
			return name + " differs"
		}
	}
	if !slices.Equal(im.counts, want.counts) {
		return fmt.Sprintf("counts %v, want %v", im.counts, want.counts)
	}
	return ""
}
