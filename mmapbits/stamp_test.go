package mmapbits

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/filterstore/filterstore/internal/testseed"
)

// TestOSStamp: the checkpoint stamp is the header page's word at
// StampOffset, outside the CRC: SetStamp and Sync write it to the file,
// a reopened region, a read-only region and a view read it, the header
// still decodes, and a read-only region's SetStamp changes nothing.
func TestOSStamp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "1-0.flt")
	r, err := OS{}.Create(path, Header{Kind: KindBitmap, DataPages: 2, FilterID: 1, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Stamp(); s != 0 {
		t.Fatalf("new file's stamp %d", s)
	}
	r.SetStamp(1<<40 + 7)
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint64(b[StampOffset:]); got != 1<<40+7 {
		t.Fatalf("file holds stamp %d", got)
	}
	if _, _, err := DecodeHeader(b); err != nil {
		t.Fatalf("a stamped header no longer decodes: %v", err)
	}
	ro, err := OS{}.OpenRead(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	v, err := OS{}.OpenView(path)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	r.SetStamp(99)
	if ro.Stamp() != 99 || v.Stamp() != 99 {
		t.Fatalf("readers of the live file read %d and %d, want 99", ro.Stamp(), v.Stamp())
	}
	ro.SetStamp(5) // ignored: read-only
	if r.Stamp() != 99 {
		t.Fatalf("a read-only region's SetStamp changed the stamp to %d", r.Stamp())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r2, err := OS{}.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if r2.Stamp() != 99 {
		t.Fatalf("reopened stamp %d, want 99", r2.Stamp())
	}
}

// TestSimStamp: the simulated stamp has a page's fate. A Sync writes it; a
// failed Sync loses it until SetStamp stores again (even the same value);
// Kill keeps the page cache's; Crash keeps a dirty stamp or the disk's, as
// rng says, and always a synced one.
func TestSimStamp(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	s := NewSim()
	var fail atomic.Bool
	s.SetInjector(func(op Op, _ string) error {
		if op == OpSync && fail.Load() {
			return errors.New("EIO")
		}
		return nil
	})
	open := func() Region {
		r, err := s.Open("f")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r, err := s.Create("f", Header{Kind: KindBitmap, DataPages: 1, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.SetStamp(10)
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Crash(rng)
	if r = open(); r.Stamp() != 10 {
		t.Fatalf("synced stamp after a crash: %d", r.Stamp())
	}

	// A failed Sync loses it: a later successful Sync does not write it.
	r.SetStamp(20)
	fail.Store(true)
	if r.Sync() == nil {
		t.Fatal("injected failure not reported")
	}
	fail.Store(false)
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if r.Stamp() != 20 {
		t.Fatalf("page cache after a failed sync: %d, want 20", r.Stamp())
	}
	s.Crash(rng)
	if r = open(); r.Stamp() != 10 {
		t.Fatalf("a stamp a failed Sync lost reached the disk: %d, want 10", r.Stamp())
	}

	// Stored again, even with its value, it is written.
	r.SetStamp(20)
	fail.Store(true)
	_ = r.Sync()
	fail.Store(false)
	r.SetStamp(20)
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Crash(rng)
	if r = open(); r.Stamp() != 20 {
		t.Fatalf("a lost stamp stored again and synced: %d, want 20", r.Stamp())
	}

	// Kill keeps the unsynced stamp; a crash keeps either image.
	r.SetStamp(30)
	s.Kill()
	if r = open(); r.Stamp() != 30 {
		t.Fatalf("after Kill: %d, want 30", r.Stamp())
	}
	seen := map[uint64]bool{}
	for range 64 {
		r.SetStamp(40)
		s.Crash(rng)
		r = open()
		seen[r.Stamp()] = true
		if st := r.Stamp(); st != 40 && st != 20 && st != 30 {
			t.Fatalf("after a crash: %d", st)
		}
		r.SetStamp(20)
		if err := r.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if !seen[40] || !seen[20] {
		t.Fatalf("64 crashes of a dirty stamp kept only %v", seen)
	}
}

// TestSimEvictWritesStamp: Evict makes the file durable, as fdatasync
// would, so a stamp stored and not yet synced survives any crash after
// it. Before, Evict wrote the data pages only, and a crash kept the old
// stamp for half the rng's draws (listed open in the twenty-third
// session).
func TestSimEvictWritesStamp(t *testing.T) {
	for seed := range uint64(16) {
		s := NewSim()
		r, err := s.Create("f", Header{Kind: KindBitmap, DataPages: 1, Size: 1})
		if err != nil {
			t.Fatal(err)
		}
		r.SetStamp(30)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Evict("f"); err != nil {
			t.Fatal(err)
		}
		s.Crash(rand.New(rand.NewPCG(seed, 0)))
		r, err = s.Open("f")
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Stamp(); got != 30 {
			t.Fatalf("rng seed %d: stamp after Evict and a crash: %d, want 30", seed, got)
		}
		r.Close()
	}
}
