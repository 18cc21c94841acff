package kv

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, mode := range Modes() {
		t.Run(mode.String(), func(t *testing.T) {
			s := open(t, t.TempDir(), mode)
			for i := range 100 {
				if err := s.Put(key(i), value(i)); err != nil {
					t.Fatalf("Put %d: %v", i, err)
				}
			}
			// Overwrite half, delete a quarter.
			for i := 0; i < 100; i += 2 {
				if err := s.Put(key(i), value(i+1000)); err != nil {
					t.Fatalf("Put again %d: %v", i, err)
				}
			}
			for i := 0; i < 100; i += 4 {
				if err := s.Delete(key(i)); err != nil {
					t.Fatalf("Delete %d: %v", i, err)
				}
			}
			if err := s.Delete(key(0)); err != nil {
				t.Fatalf("second Delete: %v", err)
			}
			if err := s.Delete([]byte("never")); err != nil {
				t.Fatalf("Delete of a key never put: %v", err)
			}
			for i := range 100 {
				want, wantFound := value(i), true
				switch {
				case i%4 == 0:
					want, wantFound = nil, false
				case i%2 == 0:
					want = value(i + 1000)
				}
				got, found, err := s.Get(key(i))
				if err != nil || found != wantFound || !bytes.Equal(got, want) {
					t.Errorf("Get %d = %q, %v, %v; want %q, %v", i, got, found, err, want, wantFound)
				}
			}
			if v, found, err := s.Get([]byte("never")); v != nil || found || err != nil {
				t.Errorf("Get of a key never put = %q, %v, %v", v, found, err)
			}
			// An empty value is found, empty.
			if err := s.Put([]byte("empty"), nil); err != nil {
				t.Fatal(err)
			}
			if v, found, err := s.Get([]byte("empty")); v == nil || len(v) != 0 || !found || err != nil {
				t.Errorf("Get of an empty value = %q (nil %v), %v, %v", v, v == nil, found, err)
			}
			// A key deleted and put again is back.
			if err := s.Put(key(0), value(7)); err != nil {
				t.Fatal(err)
			}
			if v, found, err := s.Get(key(0)); !bytes.Equal(v, value(7)) || !found || err != nil {
				t.Errorf("Get after delete and put = %q, %v, %v", v, found, err)
			}
			checkInvariant(t, s)
			if st := s.Stats(); st.Kept != 0 {
				t.Errorf("Stats.Kept = %d", st.Kept)
			}
		})
	}
}

// A filter-mode service keeps one cuckoo copy per key pebble holds,
// however often the key is overwritten: without that, a key put more
// than twice the bucket size would fill its buckets, and one Delete would
// leave it "maybe present".
func TestOverwriteKeepsOneCopy(t *testing.T) {
	for _, mode := range filterModes {
		t.Run(mode.String(), func(t *testing.T) {
			s := open(t, t.TempDir(), mode)
			k := []byte("k")
			for i := range 20 {
				if err := s.Put(k, value(i)); err != nil {
					t.Fatalf("Put %d: %v", i, err)
				}
			}
			if n := s.live.Count(k); n != 1 {
				t.Fatalf("cuckoo copies after 20 puts: %d, want 1", n)
			}
			if err := s.Delete(k); err != nil {
				t.Fatal(err)
			}
			if n := s.live.Count(k); n != 0 {
				t.Fatalf("cuckoo copies after Delete: %d, want 0", n)
			}
			if !s.Seen(k) {
				t.Error("Seen after Delete = false; the Bloom filter keeps every key ever put")
			}
			before := s.Stats().PebbleReads
			if _, found, err := s.Get(k); found || err != nil {
				t.Fatalf("Get after Delete: %v, %v", found, err)
			}
			if n := s.Stats().PebbleReads - before; n != 0 {
				t.Errorf("Get of a deleted key read pebble %d times", n)
			}
		})
	}
}

func TestRestart(t *testing.T) {
	const n = 2000
	for _, mode := range Modes() {
		t.Run(mode.String(), func(t *testing.T) {
			s := open(t, t.TempDir(), mode)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := range 8 {
				wg.Go(func() {
					for i := g; i < n; i += 8 {
						if err := s.Put(key(i), value(i)); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for i := 0; i < n; i += 10 {
				if err := s.Delete(key(i)); err != nil {
					t.Fatal(err)
				}
			}

			s = reopen(t, s)
			for i := range n {
				v, found, err := s.Get(key(i))
				if err != nil {
					t.Fatal(err)
				}
				deleted := i%10 == 0
				if found == deleted || (!deleted && !bytes.Equal(v, value(i))) {
					t.Errorf("after reopen, Get %d = %q, %v (deleted %v)", i, v, found, deleted)
				}
				if mode.filtered() && !s.Seen(key(i)) {
					t.Errorf("after reopen, Seen %d = false", i)
				}
				if mode.filtered() && !deleted && !s.live.Has(key(i)) {
					t.Errorf("after reopen, the cuckoo filter says %d is absent", i)
				}
			}
			checkInvariant(t, s)
			if mode.filtered() {
				if items := s.live.Items(); items != n-n/10 {
					t.Errorf("after reopen, the cuckoo filter holds %d items, want %d", items, n-n/10)
				}
			}
		})
	}
}

// In a filter mode, a Get of a key never put is answered by the filters;
// ModePebbleOnly, the control, reads pebble for each.
func TestAbsentGetSkipsPebble(t *testing.T) {
	const n, absent = 1000, 1000
	for _, mode := range Modes() {
		t.Run(mode.String(), func(t *testing.T) {
			s := open(t, t.TempDir(), mode)
			for i := range n {
				if err := s.Put(key(i), value(i)); err != nil {
					t.Fatal(err)
				}
			}
			before := s.Stats()
			for i := range absent {
				if _, found, err := s.Get(fmt.Appendf(nil, "absent-%d", i)); found || err != nil {
					t.Fatalf("Get of absent key %d: %v, %v", i, found, err)
				}
			}
			st := s.Stats()
			reads, skipped := st.PebbleReads-before.PebbleReads, st.Skipped-before.Skipped
			wantReads, wantSkipped := uint64(0), uint64(absent)
			if !mode.filtered() {
				wantReads, wantSkipped = absent, 0
			}
			// None of these keys is a false positive of both filters
			// (alone, about 1 in 100 of the Bloom filter's and 1 in
			// 8000 of the cuckoo filter's): the count is exact.
			if reads != wantReads || skipped != wantSkipped {
				t.Errorf("%d absent Gets: %d pebble reads, %d skipped; want %d, %d", absent, reads, skipped, wantReads, wantSkipped)
			}
			// Present keys are read from pebble.
			before = s.Stats()
			for i := range n {
				if _, found, err := s.Get(key(i)); !found || err != nil {
					t.Fatalf("Get %d: %v, %v", i, found, err)
				}
			}
			if reads := s.Stats().PebbleReads - before.PebbleReads; reads != n {
				t.Errorf("%d present Gets: %d pebble reads", n, reads)
			}
		})
	}
}

// A crash between the two writes of a change leaves a false positive,
// never a key pebble holds that a filter calls absent; the service goes on
// from there.
func TestCrashBetweenWrites(t *testing.T) {
	errCrash := errors.New("crash")
	// ModeExternal writes both in one pebble batch: TestExternalCrash.
	for _, mode := range []Mode{ModePerFilter, ModeBatch} {
		t.Run(mode.String(), func(t *testing.T) {
			s := open(t, t.TempDir(), mode)
			a, b := []byte("a"), []byte("b")
			if err := s.Put(b, value(1)); err != nil {
				t.Fatal(err)
			}
			s.crashPoint = func() error { return errCrash }
			if err := s.Put(a, value(0)); !errors.Is(err, errCrash) {
				t.Fatalf("Put with a crash between its writes: %v", err)
			}
			if err := s.Delete(b); !errors.Is(err, errCrash) {
				t.Fatalf("Delete with a crash between its writes: %v", err)
			}

			s = reopen(t, s)
			checkInvariant(t, s)
			for _, k := range [][]byte{a, b} {
				if !s.live.Has(k) {
					t.Errorf("%q: the cuckoo filter lost it: the filter write must be durable when the crash comes", k)
				}
				before := s.Stats().PebbleReads
				if _, found, err := s.Get(k); found || err != nil {
					t.Errorf("Get %q = %v, %v; want not found", k, found, err)
				}
				if s.Stats().PebbleReads == before {
					t.Errorf("Get %q skipped pebble; the filters should say maybe", k)
				}
			}

			// Put a again: pebble lacks it, so it gets a copy of its
			// own beside the leaked one; deleting it leaves the leak.
			if err := s.Put(a, value(2)); err != nil {
				t.Fatal(err)
			}
			if n := s.live.Count(a); n != 2 {
				t.Errorf("copies of a: %d, want 2 (leaked, own)", n)
			}
			if v, found, err := s.Get(a); !bytes.Equal(v, value(2)) || !found || err != nil {
				t.Errorf("Get a = %q, %v, %v", v, found, err)
			}
			if err := s.Delete(a); err != nil {
				t.Fatal(err)
			}
			if n := s.live.Count(a); n != 1 {
				t.Errorf("copies of a after Delete: %d, want 1 (leaked)", n)
			}
			checkInvariant(t, s)
		})
	}
}

// Concurrent puts and deletes over a few keys keep exactly one cuckoo
// copy per key pebble holds.
func TestConcurrentOneCopyPerKey(t *testing.T) {
	const goroutines, ops, keys = 8, 60, 16
	for _, mode := range filterModes {
		t.Run(mode.String(), func(t *testing.T) {
			s := open(t, t.TempDir(), mode)
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					for i := range ops {
						k := key((g*7 + i*3) % keys)
						var err error
						if (g+i)%3 == 0 {
							err = s.Delete(k)
						} else {
							err = s.Put(k, value(i))
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			checkInvariant(t, s)
			held := len(pebbleKeys(t, s))
			if items := s.live.Items(); items != uint64(held) {
				t.Errorf("cuckoo filter holds %d items, pebble %d keys", items, held)
			}
		})
	}
}

// Stats.FilterSyncs counts the filter store's fdatasyncs that a put of a
// new key waits for: one per filter in ModePerFilter, one in ModeBatch,
// none in ModePebbleOnly; an overwrite changes no filter and syncs none.
func TestFilterSyncs(t *testing.T) {
	want := map[Mode]uint64{ModePebbleOnly: 0, ModePerFilter: 2, ModeBatch: 1}
	for mode, n := range want {
		t.Run(mode.String(), func(t *testing.T) {
			s := open(t, t.TempDir(), mode)
			// The first write of the filter store's WAL also syncs the
			// space it reserves.
			if err := s.Put(key(0), value(0)); err != nil {
				t.Fatal(err)
			}
			before := s.Stats().FilterSyncs
			if err := s.Put(key(1), value(1)); err != nil {
				t.Fatal(err)
			}
			if got := s.Stats().FilterSyncs - before; got != n {
				t.Errorf("put of a new key: %d filter syncs, want %d", got, n)
			}
			before = s.Stats().FilterSyncs
			if err := s.Put(key(1), value(2)); err != nil {
				t.Fatal(err)
			}
			if got := s.Stats().FilterSyncs - before; got != 0 {
				t.Errorf("overwrite: %d filter syncs, want 0", got)
			}
		})
	}
}
