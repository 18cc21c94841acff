package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGrowRefusedEveryCaller: with RLIMIT_FSIZE at catalog.db's
// size (the filter files and the WAL are simulated in memory, so only the
// catalog meets the limit), every catalog caller whose commit needs the
// file to grow (create, checkpoint, drop, rename) fails only the call;
// the store's state stays what the catalog holds, acknowledged keys
// (cuckoo, counting and bloom) keep answering present, and survive a
// power loss after a refused checkpoint; once the limit is raised, the
// same calls succeed and Check finds the store clean. Run in a child.
func TestGrowRefusedEveryCaller(t *testing.T) {
	if os.Getenv("FILTERSTORE_H5_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestGrowRefusedEveryCaller$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "FILTERSTORE_H5_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	for _, mode := range []SyncMode{SyncAlways} {
		w := newSimWorld(t, mode)
		s, err := w.open(t)
		must(t, err)
		b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
		must(t, err)
		c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
		must(t, err)
		n, err := s.CreateCounting("n", BloomConfig{Capacity: 1000})
		must(t, err)
		acked := 0
		add := func() {
			t.Helper()
			must(t, second(b.Add(key(acked))))
			must(t, c.Add(key(acked)))
			must(t, n.Add(key(acked)))
			acked++
		}
		long := func(i int) string { return fmt.Sprintf("m%04d-%s", i, strings.Repeat("x", 150)) }
		for i := range 60 {
			_, err := s.CreateBitmap(long(i), 64)
			must(t, err)
			add()
		}
		must(t, s.Checkpoint())
		st, err := os.Stat(s.cat.Path)
		must(t, err)
		lim := unix.Rlimit{Cur: uint64(st.Size()), Max: unix.RLIM_INFINITY}
		must(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &lim))
		raise := func() {
			lim.Cur = unix.RLIM_INFINITY
			must(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &lim))
		}
		made := 60
		var cerr error
		for ; made < 2000; made++ {
			if _, cerr = s.CreateBitmap(long(made), 64); cerr != nil {
				break
			}
			add()
		}
		t.Logf("create refused after %d: %v", made, cerr)
		if !errors.Is(cerr, syscall.EFBIG) || errors.Is(cerr, ErrFailed) {
			raise()
			t.Fatalf("create: %v", cerr)
		}
		// Other callers under the limit.
		for i := 0; i < 20; i++ {
			add()
		}
		ckErr := s.Checkpoint()
		t.Logf("checkpoint under the limit: %v", ckErr)
		rnErr := s.Rename(long(1), long(1)+"-renamed")
		t.Logf("rename under the limit: %v", rnErr)
		if rnErr == nil {
			rnErr = s.Rename(long(1)+"-renamed", long(1))
		}
		drErr := s.Drop(long(2))
		t.Logf("drop under the limit: %v", drErr)
		if drErr == nil {
			t.Log("drop committed: a drop frees pages")
		}
		if _, err := s.CreateBitmap(long(made), 64); err == nil {
			made++
		}
		t.Logf("rename under the limit: %v", rnErr)
		for i := 0; i < 20; i++ {
			add()
		}
		if err := s.failed(); err != nil {
			raise()
			t.Fatalf("the store failed under the limit: %v", err)
		}
		l, err := s.List()
		must(t, err)
		t.Logf("%d filters in memory (%d made)", len(l), made+3)
		for i := range acked {
			if !b.Has(key(i)) || !c.Has(key(i)) || !n.Has(key(i)) {
				raise()
				t.Fatalf("acknowledged key %d absent under the limit", i)
			}
		}
		raise()
		// A power loss now, with the limit raised only in the catalog's
		// favour: every acknowledged key comes back.
		w.crash(s, rand.New(rand.NewPCG(3, 4)))
		s, err = w.open(t)
		if err != nil {
			t.Fatalf("reopen after a power loss: %v", err)
		}
		b, err = s.Bloom("b")
		must(t, err)
		c, err = s.Cuckoo("c")
		must(t, err)
		n, err = s.Counting("n")
		must(t, err)
		for i := range acked {
			if !b.Has(key(i)) || !c.Has(key(i)) || !n.Has(key(i)) {
				t.Fatalf("acknowledged key %d absent after the power loss (%d acked)", i, acked)
			}
		}
		l2, err := s.List()
		must(t, err)
		if ckErr != nil && rnErr == nil || len(l2) != len(l) {
			t.Logf("after reopen: %d filters (before: %d)", len(l2), len(l))
		}
		if len(l2) != len(l) {
			t.Errorf("%d filters after reopen, %d before the power loss", len(l2), len(l))
		}
		// Counting deletes of every acked key: a double replay would leave
		// counters; a lost increment would fail a delete.
		for i := range acked {
			ok, err := n.Delete(key(i))
			must(t, err)
			if !ok {
				t.Fatalf("counting delete of acked key %d found a zero counter", i)
			}
			ok, err = c.Delete(key(i))
			if err != nil && !errors.Is(err, ErrAmbiguous) {
				t.Fatal(err)
			}
			if err == nil && !ok {
				t.Fatalf("cuckoo delete of acked key %d found no fingerprint", i)
			}
		}
		rep, err := s.Check()
		must(t, err)
		t.Logf("check: %+v", rep)
		must(t, s.Close())
	}
}
