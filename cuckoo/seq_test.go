package cuckoo

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/internal/testseed"
)

// within runs f and fails the test if it does not return within d (the
// goroutine is left running: a lookup that spins forever cannot be
// stopped).
func within[T any](t *testing.T, d time.Duration, what string, f func() T) (T, time.Duration) {
	t.Helper()
	type result struct {
		v  T
		el time.Duration
	}
	ch := make(chan result, 1)
	go func() {
		start := time.Now()
		v := f()
		ch <- result{v, time.Since(start)}
	}()
	select {
	case r := <-ch:
		return r.v, r.el
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		panic("unreachable")
	}
}

// absentHash returns a hash that f does not hold.
func absentHash(t *testing.T, f *Filter) uint64 {
	for h := uint64(1); h < 1000; h++ {
		if f.CountHash(mix(h)) == 0 {
			return mix(h)
		}
	}
	t.Fatal("no absent hash found")
	return 0
}

// TestStuckSeqBounded: a writer that died in the middle of a move leaves the
// shared counter odd forever; lookups that miss give the safe answer after
// about 10 ms instead of spinning. A counter that keeps moving is bounded
// the same way.
func TestStuckSeqBounded(t *testing.T) {
	c, err := NewChain(Config{Capacity: 1000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < 500; i++ {
		if err := c.AddHash(mix(i)); err != nil {
			t.Fatal(err)
		}
	}
	f := c.Layers()[0]
	absent, present := absentHash(t, f), mix(7)
	stuck := new(uint64)
	*stuck = 41 // odd: a move in progress, by a writer that died
	f.ShareSeq(stuck)

	for _, tc := range []struct {
		name string
		run  func() any
		want any
	}{
		{"HasHash absent", func() any { return f.HasHash(absent) }, true},
		{"HasHashIn absent", func() any { return f.HasHashIn(f.own, absent) }, true},
		{"Front.HasHash absent", func() any { return NewFront(f, nil).HasHash(absent) }, true},
		{"CountHash absent", func() any { return f.CountHash(absent) }, uint64(CountUnknown)},
		{"CountHash present", func() any { return f.CountHash(present) }, uint64(CountUnknown)},
		{"CountHashIn absent", func() any { return f.CountHashIn(f.own, absent) }, uint64(CountUnknown)},
		{"Chain.CountHash", func() any { return c.CountHash(present) }, uint64(CountUnknown)},
		{"Chain.HasHash absent", func() any { return c.HasHash(absent) }, true},
	} {
		f.stuck.Store(0) // forget the wait of the case before: each waits
		got, el := within(t, time.Second, tc.name, tc.run)
		if got != tc.want {
			t.Fatalf("%s with a stuck counter = %v, want %v", tc.name, got, tc.want)
		}
		if el < maxRetryWait {
			t.Fatalf("%s gave up after %v, before %v", tc.name, el, maxRetryWait)
		}
		t.Logf("%s = %v after %v", tc.name, got, el)
	}
	// Once a lookup waited the counter out, the next ones that miss give
	// the safe answer at once while it holds the same odd value (they
	// used to wait 10 ms each: 100 of them a second).
	start := time.Now()
	for range 100 {
		if !f.HasHash(absent) || f.CountHash(absent) != CountUnknown || !NewFront(f, nil).HasHash(absent) {
			t.Fatal("a lookup with the counter known stuck was not the safe answer")
		}
	}
	if el := time.Since(start); el > 300*time.Millisecond {
		t.Fatalf("300 lookups with the counter known stuck took %v: each waited again", el)
	}
	// A chain's count is unknown if one layer's is: the sum must not wrap.
	c2, _ := NewChain(Config{Capacity: 100, Expansion: 2}, nil)
	var k uint64
	for ; len(c2.Layers()) < 2; k++ {
		if err := c2.AddHash(mix(k)); err != nil {
			t.Fatal(err)
		}
	}
	c2.AddHash(mix(k)) // in the newest layer
	c2.Layers()[0].ShareSeq(stuck)
	if got, _ := within(t, time.Second, "Chain.CountHash, two layers", func() uint64 { return c2.CountHash(mix(k)) }); got != CountUnknown {
		t.Fatalf("Chain.CountHash with one stuck layer of two = %d, want CountUnknown", got)
	}

	// A hit needs no stable counter.
	if got, el := within(t, time.Second, "HasHash present", func() bool { return f.HasHash(present) }); !got || el > maxRetryWait {
		t.Fatalf("HasHash(present) = %v after %v", got, el)
	}
	if got := atomic.LoadUint64(stuck); got != 41 {
		t.Fatalf("lookups changed the counter to %d", got)
	}

	// A counter that never stops moving (a move completes between every
	// two bucket loads) is bounded too.
	moving := new(uint64)
	g, _ := New(f.Geometry(), f.Words())
	g.ShareSeq(moving)
	w := movingWords{words: g.Words(), seq: moving}
	if got, _ := within(t, time.Second, "HasHashIn, moving counter", func() bool { return g.HasHashIn(w, absent) }); !got {
		t.Fatal("HasHashIn(absent) with a moving counter = false")
	}
	if g.stuck.Load() != 0 {
		t.Fatalf("a counter that kept moving was taken for stuck at %d", g.stuck.Load())
	}
	if got, _ := within(t, time.Second, "CountHashIn, moving counter", func() uint64 { return g.CountHashIn(w, absent) }); got != CountUnknown {
		t.Fatalf("CountHashIn(absent) with a moving counter = %d", got)
	}

	// The next writer's move steps the stuck counter past the dead one's:
	// it is even afterwards, and misses answer false at once again.
	if err := f.Apply(nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := atomic.LoadUint64(stuck); got != 44 {
		t.Fatalf("counter after a move over a stuck one = %d, want 44", got)
	}
	if got, el := within(t, time.Second, "HasHash after recovery", func() bool { return f.HasHash(absent) }); got || el > maxRetryWait {
		t.Fatalf("HasHash(absent) after recovery = %v after %v", got, el)
	}
	if got := f.CountHash(present); got != 1 {
		t.Fatalf("CountHash(present) after recovery = %d", got)
	}
}

// movingWords reads words, completing a move (adding 2 to seq) before every
// load.
type movingWords struct {
	words []uint64
	seq   *uint64
}

func (w movingWords) Load(i uint64) uint64 {
	atomic.AddUint64(w.seq, 2)
	return atomic.LoadUint64(&w.words[i])
}

func (w movingWords) Store(i, v uint64) { panic("movingWords is read-only") }

// pauseWords reads a filter's words, and blocks the first load of word at
// until the test lets it go: a reader stopped between its two bucket loads.
type pauseWords struct {
	words          []uint64
	at             uint64
	done           bool
	paused, resume chan struct{}
}

func (w *pauseWords) Load(i uint64) uint64 {
	if i == w.at && !w.done {
		w.done = true
		w.paused <- struct{}{}
		<-w.resume
	}
	return atomic.LoadUint64(&w.words[i])
}

func (w *pauseWords) Store(i, v uint64) { panic("pauseWords is read-only") }

// missDuringMove runs reader.HasHashIn(h) with the reader stopped after its
// load of bucket i1 and before its load of i2, runs move (which moves h's
// fingerprint from i2 to i1 through another Filter) in that window, and
// returns the lookup's answer.
func missDuringMove(t *testing.T, reader *Filter, h uint64, move func()) bool {
	t.Helper()
	_, _, i2 := reader.g.Locate(h)
	w := &pauseWords{words: reader.words, at: i2, paused: make(chan struct{}), resume: make(chan struct{})}
	res := make(chan bool)
	go func() { res <- reader.HasHashIn(w, h) }()
	select {
	case <-w.paused:
	case r := <-res:
		t.Fatalf("lookup returned %v before loading i2", r)
	}
	move()
	close(w.resume)
	r, _ := within(t, time.Second, "lookup", func() bool { return <-res })
	return r
}

// TestSharedSeqAcrossFilters: two Filters over the same words stand for a
// writer and a reader process mapping one layer file. A move the writer
// makes between the reader's two bucket loads is seen, through the shared
// counter, so the reader retries instead of missing. Deterministic: the
// reader is stopped between its loads.
func TestSharedSeqAcrossFilters(t *testing.T) {
	t.Run("Apply", func(t *testing.T) {
		g := Geometry{Buckets: 1000, BucketSize: 4, FingerprintBits: 16}
		writer, _ := New(g, nil)
		reader, _ := New(g, writer.Words())
		seq := new(uint64)
		writer.ShareSeq(seq)
		reader.ShareSeq(seq)
		h := uint64(1)
		for ; ; h++ {
			if i1, _, i2 := g.Locate(mix(h)); i1 != i2 {
				break
			}
		}
		h = mix(h)
		i1, fp, i2 := g.Locate(h)
		if err := writer.Apply([]uint64{i2}, []uint64{fp}); err != nil {
			t.Fatal(err)
		}
		got := missDuringMove(t, reader, h, func() {
			// Copy into i1, then clear i2: the order of a real move.
			if err := writer.Apply([]uint64{i1, i2}, []uint64{fp, 0}); err != nil {
				t.Fatal(err)
			}
		})
		if !got {
			t.Fatal("the reader missed a fingerprint the writer moved during its lookup")
		}
	})
	t.Run("InsertTo", func(t *testing.T) {
		// b=1: every bucket but one holds fingerprint 1; x sits in its
		// bucket i2 and its i1 is the only free bucket, so inserting z,
		// which has x's bucket as a root, moves x from i2 to i1.
		g := Geometry{Buckets: 64, BucketSize: 1, FingerprintBits: 16, Salt: 5}
		var hx, hz uint64
		for n := uint64(1); hx == 0; n++ {
			if i1, fp, i2 := g.Locate(mix(n)); i1 != i2 && fp != 1 {
				hx = mix(n)
			}
		}
		x1, fpx, x2 := g.Locate(hx)
		for n := uint64(1 << 20); hz == 0; n++ {
			z1, fpz, z2 := g.Locate(mix(n))
			other := z1
			if z1 == x2 {
				other = z2
			} else if z2 != x2 {
				continue
			}
			if z1 != z2 && fpz != fpx && other != x1 && g.Alt(other, 1) != x1 {
				hz = mix(n)
			}
		}
		writer, _ := New(g, nil)
		reader, _ := New(g, writer.Words())
		seq := new(uint64)
		writer.ShareSeq(seq)
		reader.ShareSeq(seq)
		w := writer.Words()
		for i := range w {
			w[i] = 1
		}
		w[x1], w[x2] = 0, fpx
		got := missDuringMove(t, reader, hx, func() {
			if err := writer.InsertTo(writer.own, hz, 0); err != nil {
				t.Fatal(err)
			}
			if writer.moves.Load() != 1 || w[x1] != fpx || w[x2] == fpx {
				t.Fatalf("insert did not move x from i2 to i1: %d moves, buckets %x %x", writer.moves.Load(), w[x1], w[x2])
			}
		})
		if !got {
			t.Fatal("the reader missed a fingerprint the writer's insert moved during its lookup")
		}
	})
}

// TestConcurrentSeqGuardShared is TestConcurrentSeqGuard across Filter
// values over one words slice, as a writer and reader processes mapping one
// file: readers that share the writer's counter (ShareSeq) never miss. Half
// of them read through slowWords, which widens the window between a
// lookup's two bucket loads, so that a reader without the writer's counter
// misses often: one such reader, with its own counter, is logged for
// comparison.
func TestConcurrentSeqGuardShared(t *testing.T) {
	seed := testseed.Seed(t)
	g := Geometry{Buckets: 2011, BucketSize: 4, FingerprintBits: 16, Salt: seed}
	writer, _ := New(g, nil)
	reader, _ := New(g, writer.Words())
	unshared, _ := New(g, writer.Words())
	seq := new(uint64)
	writer.ShareSeq(seq)
	reader.ShareSeq(seq)
	slow := slowWords(writer.Words())
	hash := func(i uint64) uint64 { return mix(i + seed) }
	var n uint64
	for ; writer.InsertHash(hash(n)) == nil; n++ {
	}
	stable := n * 3 / 4
	var done atomic.Uint64
	var stop atomic.Bool
	done.Store(stable)
	other := readers(1, seed, &done, &stop, func(i uint64) bool { return unshared.HasHashIn(slow, hash(i)) })
	guarded := readers(2, seed+1, &done, &stop, func(i uint64) bool {
		if i&1 == 0 {
			return reader.HasHashIn(slow, hash(i))
		}
		return reader.HasHash(hash(i))
	})
	rounds := 1000
	if racedetect.Enabled {
		rounds = 100
	}
	lo, hi := stable, n
	for round := 0; round < rounds; round++ {
		for i := lo; i < hi; i++ {
			writer.DeleteHash(hash(i))
		}
		for lo = hi; writer.InsertHash(hash(hi)) == nil; hi++ {
		}
	}
	stop.Store(true)
	oc, om := other.wait()
	gc, gm := guarded.wait()
	t.Logf("%d fingerprints moved; own counter: %d checks, %d false negatives; shared counter: %d checks, %d false negatives",
		writer.moves.Load(), oc, om, gc, gm)
	if gm != 0 {
		t.Fatalf("readers sharing the counter: %d false negatives", gm)
	}
	if got := atomic.LoadUint64(seq); got == 0 || got&1 != 0 {
		t.Fatalf("shared counter %d after the writer stopped, want even and moved", got)
	}
}

// slowWords reads words and then spins a little, as a reader descheduled
// between its two bucket loads would.
type slowWords []uint64

var slowSink atomic.Uint64

func (w slowWords) Load(i uint64) uint64 {
	v := atomic.LoadUint64(&w[i])
	x := v
	for k := 0; k < 200; k++ {
		x = x*6364136223846793005 + 1
	}
	if x == 0 {
		slowSink.Add(1)
	}
	return v
}

func (w slowWords) Store(i, v uint64) { panic("slowWords is read-only") }

// TestShareSeqMisaligned: ShareSeq refuses a word atomics cannot use.
func TestShareSeqMisaligned(t *testing.T) {
	f, _ := New(Geometry{Buckets: 8, BucketSize: 4, FingerprintBits: 16}, nil)
	bad := []*uint64{nil}
	if !racedetect.Enabled { // checkptr (on with -race) rejects the conversion itself
		b := make([]uint64, 2)
		bad = append(bad, (*uint64)(unsafe.Add(unsafe.Pointer(&b[0]), 1)))
	}
	for _, p := range bad {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("ShareSeq(%p) did not panic", p)
				}
			}()
			f.ShareSeq(p)
		}()
	}
}
