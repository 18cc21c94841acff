package store

// Adversarial review of the create mutex (commit "store: a create or
// import holds a create mutex, not the filter map's, through its file I/O
// and catalog commit"): creates, imports, Ensure, Drop, Rename,
// checkpoints (explicit and background), Backup, List and lookups race;
// the invariants are checked meanwhile and after a reopen.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/catalog"
)

// reviewMapConsistent checks, under s.mu, that filters and byID agree.
func reviewMapConsistent(s *Store) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		return nil
	}
	if len(s.filters) != len(s.byID) {
		return fmt.Errorf("filters has %d, byID %d", len(s.filters), len(s.byID))
	}
	for n, h := range s.filters {
		if s.byID[h.base().id] != h {
			return fmt.Errorf("filter %q id %d: byID has another handle", n, h.base().id)
		}
		if h.base().name() != n {
			return fmt.Errorf("filter %q: its handle is named %q", n, h.base().name())
		}
		if h.base().id >= s.nextID {
			return fmt.Errorf("filter %q id %d at or past nextID %d", n, h.base().id, s.nextID)
		}
	}
	return nil
}

type reviewAck struct {
	name string
	id   uint64
	bit  uint64
}

func TestCreateMuStress(t *testing.T) {
	dur := 3 * time.Second
	if testing.Short() {
		dur = time.Second
	}
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: 3 * time.Millisecond})
	src, err := s.CreateBitmap("src", 1024)
	must(t, err)
	for i := uint64(0); i < 1024; i += 7 {
		must(t, second(src.Set(i)))
	}
	var buf bytes.Buffer
	must(t, second(src.WriteTo(&buf)))
	stream := buf.Bytes()

	var (
		mu     sync.Mutex
		acks   []reviewAck
		failed atomic.Bool
	)
	idsSeen := map[uint64]string{}
	sawID := func(id uint64, name string) {
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := idsSeen[id]; ok {
			t.Errorf("id %d made twice: %q and %q", id, prev, name)
			failed.Store(true)
		}
		idsSeen[id] = name
	}
	errf := func(format string, args ...any) {
		t.Errorf(format, args...)
		failed.Store(true)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	run := func(f func(rng *rand.Rand)) {
		wg.Add(1)
		seed := rand.Uint64()
		go func() {
			defer wg.Done()
			f(rand.New(rand.NewPCG(seed, 1)))
		}()
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return failed.Load()
		}
	}
	// Filters that are made and never dropped nor renamed: each gets one
	// acknowledged bit.
	for g := range 2 {
		run(func(rng *rand.Rand) {
			for i := 0; !stopped(); i++ {
				name := fmt.Sprintf("keep-%d-%d", g, i)
				var bm *Bitmap
				// A racing Ensure of the same name.
				ens := make(chan *Bitmap, 1)
				go func() {
					b, err := s.EnsureBitmap(name, 1024)
					if err != nil {
						errf("ensure %s: %v", name, err)
					}
					ens <- b
				}()
				if rng.IntN(3) == 0 {
					err := s.Import(name, bytes.NewReader(stream))
					if err != nil && !errors.Is(err, ErrExists) {
						errf("import %s: %v", name, err)
						return
					}
				} else {
					_, err := s.CreateBitmap(name, 1024)
					if err != nil && !errors.Is(err, ErrExists) {
						errf("create %s: %v", name, err)
						return
					}
				}
				eb := <-ens
				var err error
				bm, err = s.Bitmap(name)
				if err != nil {
					errf("lookup %s after create: %v", name, err)
					return
				}
				if eb != nil && eb.base().id != bm.base().id {
					errf("%s: Ensure returned id %d, the store has %d", name, eb.base().id, bm.base().id)
				}
				sawID(bm.base().id, name)
				bit := uint64(1 + 7*rng.IntN(100)) // never one of the stream's
				if _, err := bm.Set(bit); err != nil {
					errf("set %s: %v", name, err)
					return
				}
				mu.Lock()
				acks = append(acks, reviewAck{name, bm.base().id, bit})
				mu.Unlock()
			}
		})
	}
	// Churn: create, import, ensure, drop, rename over a few names.
	churn := func(rng *rand.Rand) string { return fmt.Sprintf("churn-%d", rng.IntN(6)) }
	for range 2 {
		run(func(rng *rand.Rand) {
			for !stopped() {
				name := churn(rng)
				switch rng.IntN(6) {
				case 0:
					b, err := s.CreateBitmap(name, 512)
					if err == nil {
						sawID(b.base().id, name)
					} else if !errors.Is(err, ErrExists) {
						errf("churn create %s: %v", name, err)
					}
				case 1:
					if err := s.Import(name, bytes.NewReader(stream)); err != nil && !errors.Is(err, ErrExists) {
						errf("churn import %s: %v", name, err)
					}
				case 2:
					if _, err := s.EnsureBitmap(name, 512); err != nil && !errors.Is(err, ErrWrongKind) {
						errf("churn ensure %s: %v", name, err)
					}
				case 3:
					if err := s.Drop(name); err != nil && !errors.Is(err, ErrNotFound) {
						errf("churn drop %s: %v", name, err)
					}
				case 4:
					if err := s.Rename(name, churn(rng)); err != nil && !errors.Is(err, ErrNotFound) {
						errf("churn rename %s: %v", name, err)
					}
				case 5:
					if _, err := s.CreateBloom(name, BloomConfig{Capacity: 100}); err != nil && !errors.Is(err, ErrExists) {
						errf("churn bloom %s: %v", name, err)
					}
				}
			}
		})
	}
	// Two creates of one name: exactly one succeeds.
	run(func(rng *rand.Rand) {
		for i := 0; !stopped(); i++ {
			name := fmt.Sprintf("dup-%d", i)
			var ok atomic.Int32
			var w sync.WaitGroup
			for range 3 {
				w.Add(1)
				go func() {
					defer w.Done()
					var err error
					if rng := rand.IntN(2); rng == 0 {
						err = s.Import(name, bytes.NewReader(stream))
					} else {
						_, err = s.CreateBitmap(name, 1024)
					}
					switch {
					case err == nil:
						ok.Add(1)
					case !errors.Is(err, ErrExists):
						errf("dup %s: %v", name, err)
					}
				}()
			}
			w.Wait()
			if n := ok.Load(); n != 1 {
				errf("%s: %d creates succeeded", name, n)
			}
			if err := s.Drop(name); err != nil {
				errf("drop %s: %v", name, err)
			}
		}
	})
	// Checkpoints, List, lookups, map consistency.
	run(func(rng *rand.Rand) {
		for !stopped() {
			if err := s.Checkpoint(); err != nil {
				errf("checkpoint: %v", err)
			}
		}
	})
	run(func(rng *rand.Rand) {
		for !stopped() {
			l, err := s.List()
			if err != nil {
				errf("list: %v", err)
				return
			}
			for i := 1; i < len(l); i++ {
				if l[i].Name == l[i-1].Name {
					errf("list: %q twice", l[i].Name)
				}
			}
			if err := reviewMapConsistent(s); err != nil {
				errf("maps: %v", err)
			}
		}
	})
	// Backups: every keep filter acknowledged before Backup is called is
	// in the copy, with its bit, under its id.
	bdir := t.TempDir()
	run(func(rng *rand.Rand) {
		for i := 0; !stopped(); i++ {
			mu.Lock()
			before := append([]reviewAck(nil), acks...)
			mu.Unlock()
			d := filepath.Join(bdir, fmt.Sprint(i))
			if err := s.Backup(d); err != nil {
				errf("backup: %v", err)
				return
			}
			c, err := Open(d, &Options{CheckpointEvery: -1})
			if err != nil {
				errf("open backup: %v", err)
				return
			}
			for _, a := range before {
				bm, err := c.Bitmap(a.name)
				if err != nil {
					errf("backup %d: %s: %v", i, a.name, err)
					continue
				}
				if bm.base().id != a.id || !bm.Get(a.bit) {
					errf("backup %d: %s: id %d (want %d), bit %d set: %v", i, a.name, bm.base().id, a.id, a.bit, bm.Get(a.bit))
				}
			}
			if err := reviewCatalogMatches(c, d); err != nil {
				errf("backup %d: %v", i, err)
			}
			c.Close()
			os.RemoveAll(d)
			time.Sleep(50 * time.Millisecond)
		}
	})
	time.Sleep(dur)
	close(stop)
	wg.Wait()
	if t.Failed() {
		s.Close()
		return
	}
	if err := reviewMapConsistent(s); err != nil {
		t.Fatal(err)
	}
	if err := reviewCatalogMatches(s, dir); err != nil {
		t.Fatal("before close:", err)
	}
	before := reviewIDs(s)
	must(t, s.Close())
	s = mustOpen(t, dir, &Options{CheckpointEvery: -1})
	defer s.Close()
	after := reviewIDs(s)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("filters before close %v, after reopen %v", before, after)
	}
	for _, a := range acks {
		bm, err := s.Bitmap(a.name)
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		if bm.base().id != a.id || !bm.Get(a.bit) {
			t.Fatalf("%s: id %d want %d, bit %d: %v", a.name, bm.base().id, a.id, a.bit, bm.Get(a.bit))
		}
	}
	t.Logf("%d keep filters, %d ids", len(acks), len(idsSeen))
}

// reviewIDs returns name -> id of s's filters.
func reviewIDs(s *Store) map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]uint64, len(s.filters))
	for n, h := range s.filters {
		m[n] = h.base().id
	}
	return m
}

// reviewCatalogMatches checks that dir's catalog names exactly s's
// filters, with their ids, and that no id is at or past its next id.
// Called with no change in flight (s idle, or a store just opened).
func reviewCatalogMatches(s *Store, dir string) error {
	st, err := catalog.New(dir).Load()
	if err != nil {
		return err
	}
	have := reviewIDs(s)
	for n, m := range st.Filters {
		if id, ok := have[n]; !ok || id != m.ID {
			return fmt.Errorf("catalog names %q id %d, the store has %d (%v)", n, m.ID, id, ok)
		}
		if m.ID >= st.NextID {
			return fmt.Errorf("catalog: %q id %d at or past next id %d", n, m.ID, st.NextID)
		}
	}
	for n := range have {
		if _, ok := st.Filters[n]; !ok {
			return fmt.Errorf("the store has %q, the catalog does not", n)
		}
	}
	return nil
}

// TestCreateMuPowerLoss: creates (and imports) from several
// goroutines beside checkpoints and adds, then a simulated power loss:
// every acknowledged create and bit is there after recovery, under its id.
func TestCreateMuPowerLoss(t *testing.T) {
	for round := range 5 {
		w := newSimWorld(t, SyncAlways)
		s, err := w.open(t)
		must(t, err)
		src, err := s.CreateBitmap("src", 512)
		must(t, err)
		must(t, second(src.Set(0)))
		var buf bytes.Buffer
		must(t, second(src.WriteTo(&buf)))
		stream := buf.Bytes()
		var mu sync.Mutex
		var acks []reviewAck
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					name := fmt.Sprintf("f-%d-%d", g, i)
					if i%3 == 0 {
						if err := s.Import(name, bytes.NewReader(stream)); err != nil {
							t.Error(err)
							return
						}
					} else if _, err := s.CreateBitmap(name, 512); err != nil {
						t.Error(err)
						return
					}
					bm, err := s.Bitmap(name)
					if err != nil {
						t.Error(err)
						return
					}
					bit := uint64(1 + i%500)
					if _, err := bm.Set(bit); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					acks = append(acks, reviewAck{name, bm.base().id, bit})
					mu.Unlock()
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.Checkpoint(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		time.Sleep(300 * time.Millisecond)
		close(stop)
		wg.Wait()
		if t.Failed() {
			return
		}
		w.powerLoss(s, rand.New(rand.NewPCG(uint64(round), 9)))
		s, err = w.open(t)
		must(t, err)
		for _, a := range acks {
			bm, err := s.Bitmap(a.name)
			if err != nil {
				t.Fatalf("round %d: %s: %v", round, a.name, err)
			}
			if bm.base().id != a.id || !bm.Get(a.bit) {
				t.Fatalf("round %d: %s id %d want %d, bit %d: %v", round, a.name, bm.base().id, a.id, a.bit, bm.Get(a.bit))
			}
		}
		if err := reviewCatalogMatches(s, w.dir); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d creates", round, len(acks))
		must(t, s.Close())
	}
}
