package store

// Regression tests of faults a review of #9's first version found: each
// failed on it.

import (
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
	"golang.org/x/sys/unix"
)

const childEnv = "FILTERSTORE_TEST_CHILD"

// runChild re-runs test name in a child process with childEnv=what and
// returns its combined output and exit error.
func runChild(t *testing.T, name, what string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+what)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDropRacingBackgroundApply: under SyncInterval the background
// goroutine applies overlays to the maps; a Drop (which replaces the
// filter's mapping by read-only zero pages) must wait for it, or the
// pending after-images are stored into the replaced mapping and the
// process dies (SIGSEGV). The child process stalls the background apply
// on other filters' mutexes while it holds pending words of the victim,
// starts a Drop of the victim, then lets the apply go on.
func TestDropRacingBackgroundApply(t *testing.T) {
	if os.Getenv(childEnv) == "drop-applysynced" {
		dropApplyChild(t)
		return
	}
	for attempt := 0; attempt < 12; attempt++ {
		out, err := runChild(t, "TestDropRacingBackgroundApply", "drop-applysynced")
		switch {
		case strings.Contains(out, "ORDER-MISS"):
			continue // applySynced reached the victim first: try again
		case err != nil && (strings.Contains(out, "unexpected fault address") || strings.Contains(out, "SIGSEGV")):
			lines := strings.Split(out, "\n")
			for i, l := range lines {
				if strings.Contains(l, "unexpected fault address") || strings.Contains(l, "SIGSEGV") {
					t.Logf("child output:\n%s", strings.Join(lines[i:min(len(lines), i+40)], "\n"))
					break
				}
			}
			t.Fatalf("attempt %d: the process crashed: Drop unmapped a filter that applySynced then wrote (%v)", attempt, err)
		case err != nil:
			t.Fatalf("child failed otherwise: %v\n%s", err, out)
		default:
			t.Logf("child survived:\n%s", out)
			return
		}
	}
	t.Fatal("in 12 attempts the victim was always applied before a stalled filter: the test could not arrange the race")
}

func dropApplyChild(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, &Options{Sync: SyncInterval, SyncEvery: 10 * time.Millisecond, CheckpointEvery: -1})
	must(t, err)
	var stalls []*Counting
	for i := 0; i < 5; i++ {
		a, err := s.CreateCounting(fmt.Sprintf("stall%d", i), BloomConfig{Capacity: 1000})
		must(t, err)
		stalls = append(stalls, a)
	}
	v, err := s.CreateCounting("victim", BloomConfig{Capacity: 100_000})
	must(t, err)
	must(t, s.Checkpoint())

	for _, a := range stalls {
		a.b.mu.Lock() // the background apply stops at the first it meets
	}
	for i := 0; i < 2000; i++ {
		must(t, v.Add(key(i))) // acknowledged: written to the OS, staged in v's overlay
	}
	time.Sleep(300 * time.Millisecond) // background fdatasync done, the apply stalled
	v.b.mu.Lock()
	pending := v.b.ov.size.Load()
	v.b.mu.Unlock()
	if pending == 0 {
		for _, a := range stalls {
			a.b.mu.Unlock()
		}
		fmt.Println("ORDER-MISS")
		return
	}
	fmt.Println("victim overlay words pending:", pending)
	dropped := make(chan error, 1)
	go func() { dropped <- s.Drop("victim") }()
	time.Sleep(100 * time.Millisecond) // the Drop waits, or (the bug) unmaps now
	for _, a := range stalls {
		a.b.mu.Unlock() // the apply goes on, to the victim
	}
	must(t, <-dropped)
	time.Sleep(300 * time.Millisecond)
	must(t, s.Close())
}

// TestFailedOpenSyncRewritesNextOpen: when Open's msync of the filter
// files fails (EIO), Linux leaves the failed pages clean with their
// contents in memory only, so the next Open's msync "succeeds" without
// writing them. Open must not forget the failure: the next Open rewrites
// every page before answering from them, so a retried add that answers
// "not new" from bits a killed writer set survives a power loss.
func TestFailedOpenSyncRewritesNextOpen(t *testing.T) {
	seed := testseed.Seed(t)
	rng := newTestRand(seed)
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100_000, NonScaling: true})
	must(t, err)
	must(t, s.Checkpoint())
	keys := make([][]byte, 200)
	for i := range keys {
		keys[i] = key(i)
	}
	stopped, release := make(chan struct{}), make(chan struct{})
	s.hooks.afterBits = func() {
		close(stopped)
		<-release // the process dies here, bits set, no record
	}
	defer close(release)
	go b.AddMany(keys)
	<-stopped
	w.kill(s)

	// The first reopen's msync fails: the kernel could not write the pages.
	fail := &failSwitch{err: syscall.EIO}
	fail.on.Store(true)
	w.sim.SetInjector(fail.sim(mmapbits.OpSync))
	if _, err := w.open(t); err == nil {
		t.Fatal("Open succeeded although its msync failed")
	} else {
		t.Logf("first reopen: %v (errors.Is ErrFailed: %v)", err, errors.Is(err, ErrFailed))
	}
	fail.on.Store(false) // the disk works again (or the error was reported once)

	s, err = w.open(t)
	must(t, err)
	b, _ = s.Bloom("b")
	isNew, err := b.AddMany(keys)
	must(t, err) // acknowledged
	newCount := 0
	for _, v := range isNew {
		if v {
			newCount++
		}
	}
	t.Logf("retried AddMany acknowledged: %d of %d reported new (the rest answered from the lost bits)", newCount, len(keys))
	w.powerLoss(s, rng)
	s, err = w.open(t)
	must(t, err)
	defer s.Close()
	b, _ = s.Bloom("b")
	lost := 0
	for _, k := range keys {
		if !b.Has(k) {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("seed %d: %d of %d acknowledged keys lost after a power loss", seed, lost, len(keys))
	}
}

// TestLoadSourceRunsWithoutLocks: Load calls the caller's key source with
// no lock of the store held, so a slow source does not stop other filters'
// writers while a checkpoint waits, and a source that changes another
// filter or reads the store's Info or List does not deadlock.
func TestLoadSourceRunsWithoutLocks(t *testing.T) {
	// Each case gets its own store: a deadlocked one stays hung.
	open := func(t *testing.T) (*Store, *Bloom, *Bloom) {
		s, err := Open(t.TempDir(), &Options{CheckpointEvery: -1})
		must(t, err)
		a, err := s.CreateBloom("a", BloomConfig{Capacity: 10_000})
		must(t, err)
		other, err := s.CreateBloom("other", BloomConfig{Capacity: 10_000})
		must(t, err)
		return s, a, other
	}

	t.Run("stall", func(t *testing.T) {
		s, a, other := open(t)
		_ = other
		// A stalled source (a scan over the network): while a checkpoint
		// waits, an add to another filter must not wait for the source.
		// The source stalls until that add returns (or 10 s pass: then the
		// add waited for it).
		ckptStarted, addDone := make(chan struct{}), make(chan struct{})
		var stalled atomic.Bool
		src := func(yield func([]byte, error) bool) {
			for i := 0; i < 600; i++ {
				if i == 1 {
					close(ckptStarted)
				}
				if i == 2 {
					select {
					case <-addDone:
					case <-time.After(10 * time.Second):
						stalled.Store(true)
					}
				}
				if !yield(key(i), nil) {
					return
				}
			}
		}
		loadDone := make(chan error, 1)
		go func() { loadDone <- a.Load(src) }()
		<-ckptStarted
		go s.Checkpoint()
		time.Sleep(20 * time.Millisecond) // the checkpoint now waits for the gate
		start := time.Now()
		_, err := other.Add([]byte("unrelated"))
		must(t, err)
		took := time.Since(start)
		close(addDone)
		must(t, <-loadDone)
		t.Logf("an add to another filter took %v while the load's source stalled", took)
		if stalled.Load() {
			t.Errorf("an add to an unrelated filter waited %v, until the Load's stalled source gave up", took)
		}
	})

	t.Run("info-in-source", func(t *testing.T) {
		s, a, other := open(t)
		_ = other
		// A source that reports progress through Info or List (read-only
		// calls) deadlocks at once: info takes the filter's mutex, which
		// Load holds while the source runs.
		src := func(yield func([]byte, error) bool) {
			for i := 0; i < 10; i++ {
				if i == 5 {
					s.List() // progress report
				}
				if !yield(key(2000+i), nil) {
					return
				}
			}
		}
		done := make(chan error, 1)
		go func() { done <- a.Load(src) }()
		select {
		case err := <-done:
			must(t, err)
		case <-time.After(3 * time.Second):
			t.Fatal("deadlock: Store.List inside Load's key source waits for the filter mutex Load holds")
		}
	})

	t.Run("deadlock", func(t *testing.T) {
		s, a, other := open(t)
		_ = other
		ckptStarted := make(chan struct{})
		src := func(yield func([]byte, error) bool) {
			for i := 0; i < 10; i++ {
				if i == 1 {
					close(ckptStarted)
					time.Sleep(50 * time.Millisecond) // the checkpoint now waits for the gate
					// The engine's scan also records something in another filter.
					if _, err := other.Add(key(100_000 + i)); err != nil {
						yield(nil, err)
						return
					}
				}
				if !yield(key(1000+i), nil) {
					return
				}
			}
		}
		loadDone := make(chan error, 1)
		go func() { loadDone <- a.Load(src) }()
		<-ckptStarted
		ckptDone := make(chan error, 1)
		go func() { ckptDone <- s.Checkpoint() }()
		select {
		case err := <-loadDone:
			must(t, err)
			must(t, <-ckptDone)
			s.Close()
		case <-time.After(5 * time.Second):
			t.Fatal("deadlock: Load holds the gate shared while its source waits for other.Add, " +
				"which waits behind the pending Checkpoint, which waits for Load (store left hanging)")
		}
	})
}

// TestCatalogLockTimeoutDoesNotFailStore: a read-only opener in another
// process that holds the catalog's shared lock past catalog.Wait makes the
// writer's catalog change fail with the timeout, but bbolt wrote nothing,
// so the store does not fail.
func TestCatalogLockTimeoutDoesNotFailStore(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 5 s")
	}
	t.Parallel() // waits out catalog.Wait: beside the other waiting tests, not after them
	dir := t.TempDir()
	s, err := Open(dir, &Options{CheckpointEvery: -1})
	must(t, err)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	_, err = b.Add([]byte("x"))
	must(t, err)

	// A reader holds bbolt's shared lock (what bolt.Open(ReadOnly) takes).
	f, err := os.Open(filepath.Join(dir, format.CatalogName))
	must(t, err)
	must(t, unix.Flock(int(f.Fd()), unix.LOCK_SH))
	err = s.Checkpoint()
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	f.Close()
	t.Logf("checkpoint while a reader held the catalog lock: %v", err)

	_, err = b.Add([]byte("y")) // the reader is gone, the disk is fine
	if errors.Is(err, ErrFailed) {
		t.Fatalf("a lock timeout (nothing written) failed the store for good: Add now returns %v", err)
	}
}

// TestMissingRecordsCheckedBeforeWALRepair: a WAL that lacks records the
// filters need fails Open with ErrCorrupt before the WAL is repaired (its
// torn tail truncated, leftover .tmp segments removed): the failed Open
// leaves every file as it was.
func TestMissingRecordsCheckedBeforeWALRepair(t *testing.T) {
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 100_000, NonScaling: true})
	must(t, err)
	must(t, s.Checkpoint())
	for i := 0; i < 8000; i += 100 {
		ks := make([][]byte, 100)
		for j := range ks {
			ks[j] = key(i + j)
		}
		_, err := b.AddMany(ks)
		must(t, err)
	}
	w.kill(s)
	walPath := filepath.Join(w.dir, format.WALName)
	names, err := w.fs.List(walPath)
	must(t, err)
	if len(names) < 3 {
		t.Fatalf("want at least 3 segments, have %v", names)
	}
	// Lose the first segment after the checkpoint (records need+1...), and
	// leave a torn record at the end of the last one.
	must(t, w.fs.Remove(filepath.Join(walPath, names[0])))
	last := filepath.Join(walPath, names[len(names)-1])
	data, err := w.fs.ReadFile(last)
	must(t, err)
	torn := append(append([]byte(nil), data...), 0x55, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03)
	must(t, w.fs.WriteFile(last, torn))

	_, err = w.open(t)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a WAL missing records: %v, want ErrCorrupt", err)
	}
	t.Logf("Open: %v", err)
	after, err := w.fs.ReadFile(last)
	must(t, err)
	if len(after) != len(torn) {
		t.Fatalf("Open failed with ErrCorrupt but changed %s first: %d bytes before, %d after (torn tail truncated)",
			names[len(names)-1], len(torn), len(after))
	}
}

// TestOlderCatalogKeepsLoadedFilter: a catalog restored from before a
// filter was created and filled by Load (which logs no key) fails Open
// with ErrCorrupt; the filter's file, which looks like the leftover of an
// interrupted create by its name and header but holds data, is kept.
func TestOlderCatalogKeepsLoadedFilter(t *testing.T) {
	w := newSimWorld(t, SyncAlways)
	s, err := w.open(t)
	must(t, err)
	a, err := s.CreateBloom("a", BloomConfig{Capacity: 1000})
	must(t, err)
	_, err = a.Add([]byte("a-key"))
	must(t, err)
	must(t, s.Close())
	backup, err := os.ReadFile(filepath.Join(w.dir, format.CatalogName)) // the operator's backup
	must(t, err)

	s, err = w.open(t)
	must(t, err)
	f, err := s.CreateBloom("f", BloomConfig{Capacity: 10_000})
	must(t, err)
	must(t, f.Load(Keys(func(yield func([]byte) bool) {
		for i := 0; i < 1000; i++ {
			if !yield(key(i)) {
				return
			}
		}
	})))
	must(t, s.Close())
	before := w.sim.Paths()

	// The catalog is lost and restored from the backup.
	must(t, os.WriteFile(filepath.Join(w.dir, format.CatalogName), backup, 0o644))
	s, err = w.open(t)
	after := w.sim.Paths()
	if err == nil {
		s.Close()
	}
	t.Logf("Open with the older catalog: err=%v; filter files before %v, after %v", err, before, after)
	if len(after) < len(before) {
		t.Fatalf("Open with an older catalog deleted filter files (%v -> %v) instead of failing with ErrCorrupt", before, after)
	}
}

// TestLoadSourcePanicLeavesStoreUsable: a key source that panics unwinds
// through Load with no lock held and the filter marked incomplete; a
// caller that recovers can go on using the store (Checkpoint, Close, Drop
// and the filter's other mutations do not hang). For every kind, the
// source panics early (its keys in the first batch) and after more than
// two batches of a cuckoo Load (one of them being added on its own
// goroutine when the panic comes, with several cores).
func TestLoadSourcePanicLeavesStoreUsable(t *testing.T) {
	for _, kind := range []string{"bloom", "cuckoo", "counting"} {
		for _, n := range []int{10, 2*cuckooLoadBatch + 10, 2 * cuckooLoadBatch} {
			t.Run(fmt.Sprintf("%s/%d", kind, n), func(t *testing.T) {
				dir := t.TempDir()
				s, err := Open(dir, &Options{CheckpointEvery: -1})
				must(t, err)
				var load func(iter.Seq2[[]byte, error]) error
				var has func([]byte) bool
				switch kind {
				case "bloom":
					f, err := s.CreateBloom("f", BloomConfig{Capacity: 300_000})
					must(t, err)
					load, has = f.Load, f.Has
				case "cuckoo":
					f, err := s.CreateCuckoo("f", CuckooConfig{Capacity: 300_000})
					must(t, err)
					load, has = f.Load, f.Has
				default:
					f, err := s.CreateCounting("f", BloomConfig{Capacity: 300_000})
					must(t, err)
					load, has = f.Load, f.Has
				}
				func() {
					defer func() { t.Logf("caller recovered: %v", recover()) }()
					load(func(yield func([]byte, error) bool) {
						for i := 0; i < n; i++ {
							if !yield(key(i), nil) {
								return
							}
						}
						panic("the engine's scan failed")
					})
				}()
				if !has(key(n + 1)) {
					t.Error("the interrupted Load's filter answers absent: it is not marked incomplete")
				}
				done := make(chan error, 1)
				go func() { done <- s.Close() }()
				select {
				case err := <-done:
					t.Logf("Close: %v", err)
				case <-time.After(5 * time.Second):
					t.Fatal("Close hangs: the panicking Load left the commit gate read-locked and the filter mutex locked")
				}
			})
		}
	}
}

// pipelinedCuckoo opens a store with a cuckoo filter "f" whose Load is
// pipelined: GOMAXPROCS is at least 2 until the test ends.
func pipelinedCuckoo(t *testing.T) (*Store, *Cuckoo) {
	t.Helper()
	prev := runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))) // pipelining needs 2
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	s, err := Open(t.TempDir(), &Options{CheckpointEvery: -1})
	must(t, err)
	f, err := s.CreateCuckoo("f", CuckooConfig{Capacity: 300_000})
	must(t, err)
	return s, f
}

// TestLoadSourcePanicWaitsForPipelinedBatch: a cuckoo Load on several
// CPUs adds each full batch on a goroutine of its own while the source
// fills the next. When the source panics with a batch in flight, Load
// must not unwind (drop its private build, reopen the filter to writers,
// return to the caller) until that goroutine is done with the filter.
// The batch's goroutine is held until the source has panicked, then a
// while longer.
func TestLoadSourcePanicWaitsForPipelinedBatch(t *testing.T) {
	s, f := pipelinedCuckoo(t)
	defer s.Close()
	panicked := make(chan struct{})
	var started, finished atomic.Int32
	s.hooks.pipeFlush = func() {
		started.Add(1)
		<-panicked
		time.Sleep(100 * time.Millisecond)
		finished.Add(1)
	}
	n := cuckooLoadBatch + 10 // one full batch in flight, then the panic
	func() {
		defer func() { t.Logf("caller recovered: %v", recover()) }()
		_ = f.Load(func(yield func([]byte, error) bool) {
			for i := range n {
				if !yield(key(i), nil) {
					return
				}
			}
			close(panicked)
			panic("the engine's scan failed")
		})
	}()
	if finished.Load() != 1 {
		time.Sleep(time.Second) // let a late goroutine say whether it ran
		if started.Load() == 0 {
			t.Fatal("no batch went to a goroutine of its own: the Load is not pipelined")
		}
		t.Fatal("Load returned while its batch's goroutine was still to add the batch")
	}
	if !f.Has(key(n + 1)) {
		t.Error("the interrupted Load's filter answers absent: it is not marked incomplete")
	}
}

// TestLoadBatchPanicReachesCaller: a panic on the goroutine that adds a
// pipelined Load's batch (a bug, a fault) would end the process there;
// it reaches the Load's caller instead, as in a Load that is not
// pipelined, after which the filter answers "maybe" (incomplete) and the
// store goes on: another Load of another filter works, and Close returns
// no error.
func TestLoadBatchPanicReachesCaller(t *testing.T) {
	s, f := pipelinedCuckoo(t)
	s.hooks.pipeFlush = func() { panic("the batch's goroutine failed") }
	var got any
	func() {
		defer func() { got = recover() }()
		_ = f.Load(func(yield func([]byte, error) bool) {
			for i := range 3 * cuckooLoadBatch {
				if !yield(key(i), nil) {
					return
				}
			}
		})
	}()
	if got != "the batch's goroutine failed" {
		t.Fatalf("the Load's caller recovered %v, want the batch goroutine's panic", got)
	}
	if !f.Has(key(4 * cuckooLoadBatch)) {
		t.Error("the interrupted Load's filter answers absent: it is not marked incomplete")
	}
	s.hooks.pipeFlush = nil
	g, err := s.CreateCuckoo("g", CuckooConfig{Capacity: 300_000})
	must(t, err)
	must(t, g.Load(Keys(func(yield func([]byte) bool) {
		for i := range 2 * cuckooLoadBatch {
			if !yield(key(i)) {
				return
			}
		}
	})))
	for i := range 2 * cuckooLoadBatch {
		if !g.Has(key(i)) {
			t.Fatalf("after the panic, another filter's Load lost key %d", i)
		}
	}
	must(t, s.Close())
}

// TestDirectorySyncRetriedByNextOpen: if the Open that created the store
// directory died before syncing its parent, the next Open, which finds the
// directory, still syncs the parent (and the directory) before it answers.
func TestDirectorySyncRetriedByNextOpen(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "store")
	var synced []string
	failOnce := true
	syncDirFn = func(d string) error {
		if failOnce {
			failOnce = false
			return syscall.EIO // or: the process dies here
		}
		synced = append(synced, d)
		return syncDir(d)
	}
	defer func() { syncDirFn = syncDir }()
	if _, err := Open(dir, &Options{CheckpointEvery: -1}); err == nil {
		t.Fatal("Open succeeded although the sync of its parent failed")
	}
	s, err := Open(dir, &Options{CheckpointEvery: -1})
	must(t, err)
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{})
	must(t, err)
	_, err = b.Add([]byte("acknowledged"))
	must(t, err)
	for _, d := range synced {
		if d == root {
			return
		}
	}
	t.Fatalf("an add was acknowledged but %s (parent of the store directory) was never synced after the failed attempt; synced: %v", root, synced)
}

// TestReadOnlyDuringWriterReplay: a read-only store opened before a
// writer restart reads the live files while the new writer replays the
// WAL. Replay stores older after-images over a file holding later ones,
// which takes cuckoo entries out of both their buckets until later records
// are replayed; the replay holds the layers' move counters odd, so the
// reader retries or answers "maybe", never "absent", for a key
// acknowledged before it opened. The WAL file system's injector, called as
// replay opens each segment, is where the reader looks.
func TestReadOnlyDuringWriterReplay(t *testing.T) {
	w := newSimWorld(t, SyncAlways)
	s1, err := w.open(t)
	must(t, err)
	c, err := s1.CreateCuckoo("c", CuckooConfig{Capacity: 16384, BucketSize: 4, FingerprintBits: 16, MaxIterations: 500})
	must(t, err)
	const before = 9000
	for i := 0; i < before; i++ {
		must(t, c.Add(key(i)))
	}
	must(t, s1.Checkpoint())

	ro, err := Open(w.dir, WithSeams(Options{ReadOnly: true}, w.sim, w.fs))
	must(t, err)
	defer ro.Close()
	rc, err := ro.Cuckoo("c")
	must(t, err)
	for i := 0; i < before; i++ {
		if !rc.Has(key(i)) {
			t.Fatalf("reader misses key %d right after its Open", i)
		}
	}

	// The writer goes on (kicks move old entries), then dies: its page
	// cache and WAL stay as they are (SyncAlways: all of it written).
	added := 0
	for i := before; i < 16000; i++ {
		if err := c.Add(key(i)); err != nil {
			break
		}
		added++
	}
	t.Logf("writer added %d more keys", added)
	s1.closed.Store(true)
	close(s1.stop)
	s1.bg.Wait()
	s1.lock.release()

	misses := map[int]bool{}
	checks := 0
	w.fs.SetInjector(func(op wal.Op, name string) error {
		if op == wal.OpOpen && strings.HasSuffix(name, ".log") {
			checks++
			for i := 0; i < before; i++ {
				if !rc.Has(key(i)) {
					misses[i] = true
				}
			}
		}
		return nil
	})
	s2, err := w.open(t)
	w.fs.SetInjector(nil)
	must(t, err)
	defer s2.Close()
	for i := 0; i < before; i++ {
		if !rc.Has(key(i)) {
			t.Fatalf("reader misses key %d after the new writer's recovery", i)
		}
	}
	if len(misses) > 0 {
		some := []int{}
		for k := range misses {
			if len(some) < 5 {
				some = append(some, k)
			}
		}
		t.Fatalf("while the new writer replayed, the reader (opened before) answered absent for %d keys acknowledged before its Open (e.g. %v), over %d looks", len(misses), some, checks)
	}
	t.Logf("no miss over %d looks", checks)
}
