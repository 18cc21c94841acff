package kv

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

// queued reports how many puts wait for the next write group.
func queued(s *Service) int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.pending)
}

// groupKeys returns n keys of distinct key-lock stripes (two puts of one
// stripe wait for each other, so they could not share a group).
func groupKeys(n int) [][]byte {
	var keys [][]byte
	used := map[uint64]bool{}
	for i := 0; len(keys) < n; i++ {
		k := key(i)
		if stripe := store.Hash(k) % uint64(len(keyLocks{})); !used[stripe] {
			used[stripe] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// heldGroups starts n ModeBatch puts of groupKeys(n), keys[i] with value(i), on
// goroutines of their own, the first alone: its write group waits, before
// it writes anything, until the other n-1 are queued behind it, so that
// they form the next group, which starts once the first put has
// returned (so that crashPoint sees the groups in order), by running
// second, if not nil. It returns the
// keys and the puts' errors once all have returned.
func heldGroups(t *testing.T, s *Service, n int, second func()) ([][]byte, []error) {
	t.Helper()
	keys := groupKeys(n)
	led, firstDone := make(chan struct{}), make(chan struct{})
	starts := 0
	s.groupStart = func() {
		switch starts++; starts {
		case 1:
			close(led)
			deadline := time.Now().Add(10 * time.Second)
			for queued(s) < n-1 {
				if time.Now().After(deadline) {
					t.Errorf("%d puts queued behind the first after 10 s, want %d", queued(s), n-1)
					break
				}
				time.Sleep(time.Millisecond)
			}
		case 2:
			<-firstDone
			if second != nil {
				second()
			}
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(firstDone)
		errs[0] = s.Put(keys[0], value(0))
	})
	<-led // the first put leads
	for i := 1; i < n; i++ {
		wg.Go(func() { errs[i] = s.Put(keys[i], value(i)) })
	}
	wg.Wait()
	s.groupStart = nil
	return keys, errs
}

// TestWriteGroups: in ModeBatch, puts that arrive while a write group
// commits form the next one, which costs one filter WAL sync and one
// pebble batch for all of them; every put is then durable in both.
func TestWriteGroups(t *testing.T) {
	const n = 16
	s := open(t, t.TempDir(), ModeBatch)
	// The filter WAL's first write also syncs the space it reserves.
	if err := s.Put([]byte("warm"), value(0)); err != nil {
		t.Fatal(err)
	}
	groups, syncs := s.Stats().Groups, s.Stats().FilterSyncs
	keys, errs := heldGroups(t, s, n, nil)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	st := s.Stats()
	if got := st.Groups - groups; got != 2 {
		t.Errorf("%d puts in %d write groups, want 2 (the first alone, then the %d queued behind it)", n, got, n-1)
	}
	if got := st.FilterSyncs - syncs; got != 2 {
		t.Errorf("%d puts in 2 groups took %d filter WAL syncs, want 2", n, got)
	}
	s = reopen(t, s)
	checkInvariant(t, s)
	for i := range n {
		if v, found, err := s.Get(keys[i]); !found || err != nil || string(v) != string(value(i)) {
			t.Errorf("Get %s after reopening = %q, %v, %v", keys[i], v, found, err)
		}
	}
	if items := s.live.Items(); items != n+1 {
		t.Errorf("the cuckoo filter holds %d items, want %d (one per key)", items, n+1)
	}
}

// TestWriteGroupCrash: a crash between a group's two writes returns the
// crash to every put of the group and leaves each of its keys in the
// filters and none in pebble: false positives, never a key pebble holds
// that a filter calls absent.
func TestWriteGroupCrash(t *testing.T) {
	const n = 8
	errCrash := errors.New("crash")
	s := open(t, t.TempDir(), ModeBatch)
	calls := 0
	s.crashPoint = func() error {
		if calls++; calls == 1 {
			return nil // the first put's group
		}
		return errCrash
	}
	keys, errs := heldGroups(t, s, n, nil)
	s.crashPoint = nil
	if errs[0] != nil {
		t.Fatalf("the first put: %v", errs[0])
	}
	for i := 1; i < n; i++ {
		if !errors.Is(errs[i], errCrash) {
			t.Fatalf("put %d of the crashed group: %v, want the crash", i, errs[i])
		}
	}
	s = reopen(t, s)
	checkInvariant(t, s)
	if got := len(pebbleKeys(t, s)); got != 1 {
		t.Errorf("pebble holds %d keys, want 1: the crashed group reached pebble", got)
	}
	for i := 1; i < n; i++ {
		if !s.seen.Has(keys[i]) || !s.live.Has(keys[i]) {
			t.Errorf("%s: a filter lost it: a group's filter writes are durable before its pebble batch", keys[i])
		}
		if _, found, err := s.Get(keys[i]); found || err != nil {
			t.Errorf("Get %s = %v, %v; want not found", keys[i], found, err)
		}
	}
}

// TestWriteGroupFilterFailure: when a group's filter Batch fails, its
// puts commit one by one, each returning its own error; pebble gets none
// of them.
func TestWriteGroupFilterFailure(t *testing.T) {
	const n = 6
	s := open(t, t.TempDir(), ModeBatch)
	_, errs := heldGroups(t, s, n, func() {
		// The filters refuse from here on: the cuckoo filter is gone.
		if err := s.fs.Drop(liveName); err != nil {
			t.Error(err)
		}
	})
	if errs[0] != nil {
		t.Fatalf("the first put: %v", errs[0])
	}
	for i := 1; i < n; i++ {
		if !errors.Is(errs[i], store.ErrClosed) {
			t.Errorf("put %d after the filter was dropped: %v, want an error wrapping store.ErrClosed", i, errs[i])
		}
	}
	if got := len(pebbleKeys(t, s)); got != 1 {
		t.Errorf("pebble holds %d keys, want 1: a put whose filters failed reached pebble", got)
	}
}

// TestWriteGroupPanic: if a group's commit panics, the panic goes on in
// the leader, every put of the group gets an error instead of waiting
// forever, and the lead passes to the next queued put (or is given up).
func TestWriteGroupPanic(t *testing.T) {
	s := open(t, t.TempDir(), ModeBatch)
	s.groupStart = func() { panic("the group's commit failed") }
	group := []*groupPut{
		{c: &change{key: key(1)}, done: make(chan groupMsg, 1)},
		{c: &change{key: key(2)}, done: make(chan groupMsg, 1)},
	}
	next := &groupPut{c: &change{key: key(3)}, done: make(chan groupMsg, 1)}
	s.group.leading, s.group.pending = true, []*groupPut{next}
	got := func() (v any) {
		defer func() { v = recover() }()
		s.leadGroup(group)
		return nil
	}()
	if got != "the group's commit failed" {
		t.Fatalf("the leader recovered %v, want the commit's panic", got)
	}
	for i, p := range group {
		select {
		case m := <-p.done:
			if m.err == nil || m.lead {
				t.Errorf("put %d of the panicked group was told %+v, want an error", i, m)
			}
		default:
			t.Errorf("put %d of the panicked group was told nothing: it would wait forever", i)
		}
	}
	select {
	case m := <-next.done:
		if !m.lead {
			t.Errorf("the queued put was told %+v, want the lead", m)
		}
	default:
		t.Error("the queued put was not given the lead")
	}
	s.group.pending = nil
	s.groupStart = nil
	s.leadGroup(nil) // no panic now; nothing queued: the lead is given up
	if s.group.leading {
		t.Error("the lead was kept with no put queued")
	}
	if err := s.Put(key(4), value(4)); err != nil {
		t.Fatalf("a put after the panicked group: %v", err)
	}
}
