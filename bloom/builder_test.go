package bloom

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestBuilderMatchesAddLoop: whatever the lanes, the mode (owned or
// atomic), a base or a seen function, and however Add and AddKeys calls
// and Waits interleave, a Builder leaves the words a loop of AddHash would and
// counts the same new adds. Keys repeat, in one Add call and across
// calls, and the filter is small so that lanes own few blocks and chunks
// fill and refill.
func TestBuilderMatchesAddLoop(t *testing.T) {
	r := testseed.New(t)
	rounds := 60
	if testing.Short() {
		rounds = 15
	}
	for round := range rounds {
		g, err := Plan(uint64(1+r.IntN(50000)), 0.001+r.Float64()/10)
		if err != nil {
			t.Fatal(err)
		}
		owned := r.IntN(2) == 0
		lanes := 1 + r.IntN(7)
		var base, ref *Filter
		ref, _ = New(g, nil)
		if owned && r.IntN(2) == 0 {
			base, _ = New(g, nil)
			for range r.IntN(2000) {
				h := r.Uint64()
				base.AddHash(h)
				ref.AddHash(h)
			}
			ref.SetCount(0)
		}
		var seen func(uint64) bool
		if r.IntN(3) == 0 {
			seen = func(h uint64) bool { return h%5 == 0 }
		}
		got, _ := New(g, nil)
		b := NewBuilder(got, lanes, owned, base, seen)
		var gotAdded, wantAdded uint64
		var hist [][]byte
		var ks *Keys = new(Keys)
		for range 1 + r.IntN(6) {
			// Keys as bytes; a third of the calls give their hashes (Add),
			// the others the keys (AddKeys), some of them only a prefix.
			keys := make([][]byte, r.IntN(30000))
			for i := range keys {
				if len(hist) > 0 && r.IntN(5) == 0 {
					keys[i] = hist[r.IntN(len(hist))]
				} else {
					keys[i] = fmt.Appendf(nil, "key-%d", r.Uint64())
				}
				hist = append(hist, keys[i])
			}
			if r.IntN(3) == 0 {
				hs := make([]uint64, len(keys))
				for i, k := range keys {
					hs[i] = Hash(k)
				}
				b.Add(hs)
				clear(hs) // the caller may reuse hs once Add returns
			} else {
				for _, k := range keys {
					ks.Append(k)
				}
				if n := r.IntN(len(keys) + 1); n < len(keys) && r.IntN(2) == 0 {
					keys = keys[:n]
				}
				ks = b.AddKeys(ks, len(keys))
				if ks.Len() != 0 {
					t.Fatalf("AddKeys returned a batch of %d keys, want an empty one", ks.Len())
				}
			}
			for _, k := range keys {
				h := Hash(k)
				if seen != nil && seen(h) {
					continue
				}
				if ref.AddHash(h) {
					wantAdded++
				}
			}
			if r.IntN(2) == 0 {
				gotAdded += b.Wait()
			}
		}
		gotAdded += b.Close()
		if gotAdded != wantAdded {
			t.Fatalf("round %d (%d blocks, %d lanes, owned %v, base %v, seen %v): %d new adds, want %d",
				round, g.Blocks, b.Lanes(), owned, base != nil, seen != nil, gotAdded, wantAdded)
		}
		words := slices.Clone(got.Words())
		if base != nil {
			for i, w := range base.Words() {
				words[i] |= w
			}
		}
		if i := firstDiff(words, ref.Words()); i >= 0 {
			t.Fatalf("round %d (%d blocks, %d lanes, owned %v): word %d is %#x, want %#x",
				round, g.Blocks, b.Lanes(), owned, i, words[i], ref.Words()[i])
		}
	}
}

func firstDiff(a, b []uint64) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestBuilderLanesOwnTheirBlocks: every lane's range is non-empty, the
// ranges tile the blocks in order, and the lane Add picks for a block is
// the one whose range holds it, for block counts around the edges of the
// divide-free path.
func TestBuilderLanesOwnTheirBlocks(t *testing.T) {
	r := testseed.New(t)
	counts := []uint64{1, 2, 3, 5, 64, 1000, 1<<32 - 1, 1 << 32, 1<<32 + 1, 1 << 40}
	for range 50 {
		counts = append(counts, 1+r.Uint64N(1<<34))
	}
	for _, blocks := range counts {
		for _, lanes := range []uint64{1, 2, 3, 7, 16, 64, 1000} {
			lanes = min(lanes, blocks)
			per := (blocks + lanes - 1) / lanes
			d := newLaneDiv(per, blocks)
			probe := []uint64{0, blocks - 1, min(per-1, blocks-1), min(per, blocks-1), min(per+1, blocks-1)}
			for range 200 {
				probe = append(probe, r.Uint64N(blocks))
			}
			for _, block := range probe {
				if got, want := d.lane(block), block/per; got != want {
					t.Fatalf("blocks %d, lanes %d: block %d goes to lane %d, want %d", blocks, lanes, block, got, want)
				}
				if d.lane(block) >= lanes {
					t.Fatalf("blocks %d, lanes %d: block %d goes to lane %d", blocks, lanes, block, d.lane(block))
				}
			}
		}
	}
	// The divide-free path against division for every divisor's worst
	// dividends: just below multiples of it.
	for range 20000 {
		per := 2 + r.Uint64N(1<<32-2)
		d := newLaneDiv(per, 1<<32)
		q := r.Uint64N((1<<32-1)/per + 1)
		for _, block := range []uint64{q * per, q*per + per - 1, q*per - 1} {
			if block >= 1<<32 {
				continue
			}
			hi, _ := bits.Mul64(block, d.magic)
			if hi != block/per {
				t.Fatalf("%d / %d = %d by the magic, want %d", block, per, hi, block/per)
			}
		}
	}
}

// TestBuilderWaitWithoutAdds: Wait and Close with nothing queued return
// 0 and do not block.
func TestBuilderWaitWithoutAdds(t *testing.T) {
	g, _ := Plan(1000, 0.01)
	f, _ := New(g, nil)
	b := NewBuilder(f, 4, true, nil, nil)
	if n := b.Wait(); n != 0 {
		t.Fatalf("Wait with nothing queued = %d", n)
	}
	b.Add(nil)
	if n := b.Close(); n != 0 {
		t.Fatalf("Close with nothing queued = %d", n)
	}
}

// TestCountingBuilderMatchesAddLoop: a counting Builder, owned (plain
// stores) or not, whatever its lanes and however Add, AddKeys and Wait
// calls interleave, leaves the words of a loop of AddHash over the same
// keys, saturated counters included (keys repeat, within a call and
// across calls), Wait counts every key given, and Items does not move.
// Merged (MergeInto, in several word ranges) into a filter that already
// holds keys, the build leaves that filter's words equal to a loop of
// AddHash over its keys and then the built ones.
func TestCountingBuilderMatchesAddLoop(t *testing.T) {
	r := testseed.New(t)
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	for round := range rounds {
		g := Geometry{Blocks: 1 + r.Uint64N(200), K: 1 + r.Uint32N(MaxK), Salt: r.Uint64()}
		ref, err := NewCounting(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := NewCounting(g, nil)
		live, _ := NewCounting(g, nil)
		merged, _ := NewCounting(g, nil) // live's keys, then got's, one by one
		for range r.IntN(3000) {
			k := fmt.Appendf(nil, "key-%d", r.IntN(600))
			live.Add(k)
			merged.Add(k)
		}
		owned := r.IntN(2) == 0
		b := NewCountingBuilder(got, 1+r.IntN(7), owned)
		var added, want uint64
		ks := new(Keys)
		for range 1 + r.IntN(6) {
			keys := make([][]byte, r.IntN(5000))
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "key-%d", r.IntN(400)) // repeats: counters saturate
			}
			if r.IntN(2) == 0 {
				hs := make([]uint64, len(keys))
				for i, k := range keys {
					hs[i] = Hash(k)
				}
				b.Add(hs)
				clear(hs)
			} else {
				for _, k := range keys {
					ks.Append(k)
				}
				if n := r.IntN(len(keys) + 1); r.IntN(2) == 0 {
					keys = keys[:n]
				}
				ks = b.AddKeys(ks, len(keys))
			}
			for _, k := range keys {
				ref.Add(k)
				merged.Add(k)
			}
			want += uint64(len(keys))
			if r.IntN(2) == 0 {
				added += b.Wait()
			}
		}
		added += b.Close()
		if added != want || got.Items() != 0 {
			t.Fatalf("round %d (%+v, %d lanes): Wait counted %d keys, want %d; Items %d, want 0",
				round, g, b.Lanes(), added, want, got.Items())
		}
		if i := firstDiff(got.Words(), ref.Words()); i >= 0 {
			t.Fatalf("round %d (%+v, %d lanes, owned %v): word %d is %#x, want %#x",
				round, g, b.Lanes(), owned, i, got.Words()[i], ref.Words()[i])
		}
		words := g.Words()
		cut := r.Uint64N(words + 1)
		got.MergeInto(live, cut, words)
		got.MergeInto(live, 0, cut)
		if i := firstDiff(live.Words(), merged.Words()); i >= 0 {
			t.Fatalf("round %d (%+v): merged word %d is %#x, want %#x (live %#x + built %#x)",
				round, g, i, live.Words()[i], merged.Words()[i], live.Words()[i], got.Words()[i])
		}
	}
}

// TestAddCounters: addCounters adds each of the 16 4-bit counters of two
// words on its own, saturating at MaxCounter, for random words and for
// words of extreme counters.
func TestAddCounters(t *testing.T) {
	r := testseed.New(t)
	extremes := []uint64{0, ^uint64(0), 0x1111111111111111, 0x8888888888888888, 0x7777777777777777,
		0xf0f0f0f0f0f0f0f0, 0x0f0f0f0f0f0f0f0f, 0x123456789abcdef0}
	for i := range 200_000 {
		a, b := r.Uint64(), r.Uint64()
		if i < len(extremes)*len(extremes) {
			a, b = extremes[i/len(extremes)], extremes[i%len(extremes)]
		}
		var want uint64
		for j := range uint(CountersPerWord) {
			sh := j * CounterBits
			want |= min(a>>sh&MaxCounter+b>>sh&MaxCounter, MaxCounter) << sh
		}
		if got := addCounters(a, b); got != want {
			t.Fatalf("addCounters(%#x, %#x) = %#x, want %#x", a, b, got, want)
		}
	}
}

// TestPages: pages cuts word slices starting anywhere in a page into
// parts that each lie in one page and together cover the slice in order.
func TestPages(t *testing.T) {
	words := alignedWords(4 * pageSize / 8)
	for _, start := range []int{0, 1, 7, 511, 512, 513} {
		for _, n := range []int{0, 1, 511, 512, 513, 1500} {
			ws := words[start : start+n]
			next := 0
			for from, to := range pages(ws) {
				if from != next || to <= from || to > n {
					t.Fatalf("start %d, %d words: part [%d, %d) after %d", start, n, from, to, next)
				}
				first := uintptr(unsafe.Pointer(&ws[from])) / pageSize
				last := uintptr(unsafe.Pointer(&ws[to-1])) / pageSize
				if first != last || (from > 0 && uintptr(unsafe.Pointer(&ws[from]))%pageSize != 0) {
					t.Fatalf("start %d, %d words: part [%d, %d) spans pages %d..%d or starts inside one", start, n, from, to, first, last)
				}
				next = to
			}
			if next != n {
				t.Fatalf("start %d, %d words: parts end at %d", start, n, next)
			}
		}
	}
}

// TestBuilderAfterClose: Close twice returns 0 the second time; Add and
// AddKeys after Close panic with a message naming the misuse, not with a
// send on a closed channel (which they did, as Close twice did: an
// adversarial review's finding).
func TestBuilderAfterClose(t *testing.T) {
	g, err := Plan(1000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBuilder(f, 2, false, nil, nil)
	b.Add([]uint64{1, 2, 3})
	if n := b.Close(); n != 3 {
		t.Fatalf("Close: %d new adds, want 3", n)
	}
	if n := b.Close(); n != 0 {
		t.Fatalf("Close again: %d, want 0", n)
	}
	for name, use := range map[string]func(){
		"Add":     func() { b.Add([]uint64{4}) },
		"AddKeys": func() { b.AddKeys(&Keys{Buf: []byte("k"), Ends: []int{1}}, 1) },
	} {
		func() {
			defer func() {
				if r := recover(); r != "bloom: Builder used after Close" {
					t.Fatalf("%s after Close: recovered %v, want the misuse named", name, r)
				}
			}()
			use()
		}()
	}
}

// TestBuilderAddKeysMalformed: a batch that does not hold the n keys
// AddKeys is told of (n past its keys, Ends past Buf or falling) panics
// on the caller's goroutine, where it can be recovered, and the Builder
// goes on; it panicked on a Builder goroutine (slice bounds out of range),
// which ended the process (an adversarial review's finding).
func TestBuilderAddKeysMalformed(t *testing.T) {
	g, err := Plan(1000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBuilder(f, 2, false, nil, nil)
	for name, ks := range map[string]struct {
		k *Keys
		n int
	}{
		"n past the keys": {&Keys{Buf: []byte("k"), Ends: []int{1}}, 5},
		"end past Buf":    {&Keys{Buf: []byte("abc"), Ends: []int{1, 9}}, 2},
		"ends falling":    {&Keys{Buf: []byte("abc"), Ends: []int{2, 1}}, 2},
		"negative end":    {&Keys{Buf: []byte("abc"), Ends: []int{-1}}, 1},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s: AddKeys did not panic", name)
				}
			}()
			b.AddKeys(ks.k, ks.n)
		}()
	}
	ks := &Keys{}
	ks.Append([]byte("good"))
	b.AddKeys(ks, 1)
	if n := b.Close(); n != 1 {
		t.Fatalf("Close: %d new adds, want 1", n)
	}
	if !f.Has([]byte("good")) {
		t.Fatal("the good batch's key is absent")
	}
}

// TestBuilderLanesBounded: a Builder asked for more lanes than
// MaxBuilderLanes gets MaxBuilderLanes (its memory grows with the square
// of its lanes: about 26 MiB at 256 in an adversarial review's run).
func TestBuilderLanesBounded(t *testing.T) {
	g, err := Plan(1_000_000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBuilder(f, 10_000, false, nil, nil)
	defer b.Close()
	if n := b.Lanes(); n != MaxBuilderLanes {
		t.Fatalf("Lanes() = %d, want %d", n, MaxBuilderLanes)
	}
}

// TestBuilderLanePanicReachesWait: a panic of a lane's adds (here seen's;
// a memory fault of a mapped filter's words is one too, which the lane
// asks to get as a panic) does not end the process on the lane's
// goroutine: Wait raises it on the caller's once every lane is done, the
// lane adds nothing more until then, and the Builder goes on afterwards;
// a panic still waiting when Close is called is raised by Close, which
// stops the goroutines first. Before, the panic ended the process. The
// panic carries the lane's stack, with seen's frame in it.
func TestBuilderLanePanicReachesWait(t *testing.T) {
	g, err := Plan(100_000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	const bad = uint64(12345)
	seen := func(h uint64) bool {
		if h == bad {
			panic("seen: bad hash")
		}
		return false
	}
	hs := make([]uint64, 10_000)
	for i := range hs {
		hs[i] = Hash([]byte{byte(i), byte(i >> 8), 7})
	}
	b := NewBuilder(f, 4, false, nil, seen)
	// waitPanic returns the value call panicked with, unwrapped, after
	// checking that it carries seen's frame; nil if it did not panic.
	waitPanic := func(call func() uint64) (r any) {
		defer func() {
			r = recover()
			if r == nil {
				return
			}
			lp, ok := r.(*lanePanic)
			if !ok {
				t.Fatalf("panic %v (%T), want a lanePanic", r, r)
			}
			if !strings.Contains(lp.Error(), "TestBuilderLanePanicReachesWait.func1") {
				t.Fatalf("the panic's text does not give seen's frame:\n%s", lp.Error())
			}
			r = lp.v
		}()
		call()
		return nil
	}
	b.Add(hs[:5000])
	b.Add([]uint64{bad})
	b.Add(hs[5000:])
	if r := waitPanic(b.Wait); r != "seen: bad hash" {
		t.Fatalf("Wait after a lane's panic: recovered %v, want seen's panic", r)
	}
	// The Builder goes on: every key given now is added.
	more := make([]uint64, 1000)
	for i := range more {
		more[i] = Hash([]byte{byte(i), byte(i >> 8), 9})
	}
	b.Add(more)
	if r := waitPanic(b.Wait); r != nil {
		t.Fatalf("Wait with no panic: recovered %v", r)
	}
	for i, h := range more {
		if !f.HasHash(h) {
			t.Fatalf("key %d given after the panic is absent", i)
		}
	}
	b.Add([]uint64{bad})
	if r := waitPanic(b.Close); r != "seen: bad hash" {
		t.Fatalf("Close with a lane's panic waiting: recovered %v, want seen's panic", r)
	}
	if r := waitPanic(b.Close); r != nil {
		t.Fatalf("Close again: recovered %v", r)
	}
}
