package store

// Adversarial tests of what a storage-engine author does by accident:
// calls back into the store from the callbacks the API takes (a Load's
// key source, WriteTo's writer, Import's reader, the Logger), reuses
// buffers and batches, and uses handles after Drop, Rename and Close.
// Every call runs under a deadline: a hang fails the test with the
// goroutines' stacks instead of stopping the run.
//
// Calls the documentation says wait for themselves are left out: a
// Load's source changing, exporting or renaming over the filter it
// loads; WriteTo's writer calling anything but lookups and Stats (a
// checkpoint, a Drop, Close, or a change while a checkpoint waits); an
// io.Pipe from WriteTo into an Import of the same store; a Logger
// handler calling Close. The review that wrote these tests saw each of
// them hang (see Load, WriteTo and Options.Logger).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/safelog"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/wal"
)

// reentryDeadline is how long one call may take before it counts as a hang.
const reentryDeadline = 8 * time.Second

// within runs fn and reports whether it returned within d; if not, it
// fails t with the stacks of the goroutines in this package. A panic of
// fn is returned.
func within(t *testing.T, d time.Duration, what string, fn func()) (ok bool, panicked any) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	select {
	case p := <-done:
		return true, p
	case <-time.After(d):
		t.Errorf("%s: HANG: no return after %v; goroutines:\n%s", what, d, storeStacks())
		return false, nil
	}
}

// storeStacks returns the stacks of every goroutine that runs code of the
// store package, bar the test runner's.
func storeStacks() string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "filterstore/store.") && !strings.Contains(g, "storeStacks") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// reTarget is one kind's Load, LoadParallel, Add, Has and WriteTo.
type reTarget struct {
	kind     string
	load     func(iter.Seq2[[]byte, error]) error
	loadPar  func(...iter.Seq2[[]byte, error]) error
	add      func([]byte) error
	has      func([]byte) bool
	info     func() (Info, error)
	writeTo  func(io.Writer) (int64, error)
	batchAdd func(*Batch, []byte)
}

func targetOf(t *testing.T, s *Store, kind, name string) reTarget {
	t.Helper()
	switch kind {
	case "bloom":
		f, err := s.Bloom(name)
		must(t, err)
		return reTarget{kind, f.Load, f.LoadParallel, func(k []byte) error { _, err := f.Add(k); return err }, f.Has, f.Info, f.WriteTo,
			func(bt *Batch, k []byte) { bt.BloomAdd(f, k) }}
	case "cuckoo":
		f, err := s.Cuckoo(name)
		must(t, err)
		return reTarget{kind, f.Load, f.LoadParallel, f.Add, f.Has, f.Info, f.WriteTo,
			func(bt *Batch, k []byte) { bt.CuckooAdd(f, k) }}
	case "counting":
		f, err := s.Counting(name)
		must(t, err)
		return reTarget{kind, f.Load, f.LoadParallel, f.Add, f.Has, f.Info, f.WriteTo,
			func(bt *Batch, k []byte) { bt.CountingAdd(f, k) }}
	}
	t.Fatalf("kind %q", kind)
	return reTarget{}
}

func createKind(t *testing.T, s *Store, kind, name string, capacity uint64) reTarget {
	t.Helper()
	var err error
	switch kind {
	case "bloom":
		_, err = s.CreateBloom(name, BloomConfig{Capacity: capacity})
	case "cuckoo":
		_, err = s.CreateCuckoo(name, CuckooConfig{Capacity: capacity})
	case "counting":
		_, err = s.CreateCounting(name, BloomConfig{Capacity: capacity})
	}
	must(t, err)
	return targetOf(t, s, kind, name)
}

var reentryKinds = []string{"bloom", "cuckoo", "counting"}

// reentryAction is something a Load's key source does halfway through.
type reentryAction struct {
	name string
	// do runs inside the source. env gives it the store, the loaded filter
	// f ("f"), another filter o ("o", a Bloom filter), and acks, to which
	// it appends keys it had acknowledged in o (found after reopen).
	do func(e *reentryEnv) error
	// stops: the Load is expected to fail (the store closed, f dropped).
	stops bool
}

type reentryEnv struct {
	t    *testing.T
	dir  string
	s    *Store
	f    reTarget
	o    *Bloom
	acks *[]int // keys acknowledged in o
	i    int
}

func reentryActions() []reentryAction {
	addOther := func(e *reentryEnv) error {
		k := 1_000_000 + e.i
		if _, err := e.o.Add(key(k)); err != nil {
			return err
		}
		*e.acks = append(*e.acks, k)
		return nil
	}
	return []reentryAction{
		{name: "Has", do: func(e *reentryEnv) error {
			if !e.f.has(key(-1)) {
				return errors.New("a key acknowledged before the Load answers absent inside its source")
			}
			return nil
		}},
		{name: "Info", do: func(e *reentryEnv) error { _, err := e.f.info(); return err }},
		{name: "List", do: func(e *reentryEnv) error { _, err := e.s.List(); return err }},
		{name: "Stats", do: func(e *reentryEnv) error { e.s.Stats(); return nil }},
		{name: "Check", do: func(e *reentryEnv) error { _, err := e.s.Check(); return err }},
		{name: "CheckFilter", do: func(e *reentryEnv) error { _, err := e.s.CheckFilter("f"); return err }},
		{name: "OtherAdd", do: addOther},
		{name: "OtherWriteTo", do: func(e *reentryEnv) error { _, err := e.o.WriteTo(io.Discard); return err }},
		{name: "OtherLoad", do: func(e *reentryEnv) error {
			k := 2_000_000 + e.i
			if err := e.o.Load(rangeKeys(k, k+10)); err != nil {
				return err
			}
			for j := k; j < k+10; j++ {
				*e.acks = append(*e.acks, j)
			}
			return nil
		}},
		{name: "OtherBatch", do: func(e *reentryEnv) error {
			k := 3_000_000 + e.i
			bt := e.s.NewBatch()
			bt.BloomAdd(e.o, key(k))
			if _, err := bt.Commit(); err != nil {
				return err
			}
			*e.acks = append(*e.acks, k)
			return nil
		}},
		{name: "Checkpoint", do: func(e *reentryEnv) error { return e.s.Checkpoint() }},
		{name: "Backup", do: func(e *reentryEnv) error {
			return e.s.Backup(filepath.Join(e.t.TempDir(), "bk"))
		}},
		{name: "CreateBloom", do: func(e *reentryEnv) error {
			_, err := e.s.CreateBloom(fmt.Sprintf("new%d", e.i), BloomConfig{Capacity: 100})
			return err
		}},
		{name: "Import", do: func(e *reentryEnv) error {
			var buf bytes.Buffer
			if _, err := e.o.WriteTo(&buf); err != nil {
				return err
			}
			return e.s.Import(fmt.Sprintf("imp%d", e.i), &buf)
		}},
		{name: "DropOther", do: func(e *reentryEnv) error { *e.acks = nil; return e.s.Drop("o") }},
		{name: "RenameSelfFree", do: func(e *reentryEnv) error { return e.s.Rename("f", "f2") }},
		{name: "RenameOtherOverSelf", stops: true, do: func(e *reentryEnv) error { *e.acks = nil; return e.s.Rename("o", "f") }},
		{name: "DropSelf", stops: true, do: func(e *reentryEnv) error { return e.s.Drop("f") }},
		{name: "Close", stops: true, do: func(e *reentryEnv) error { return e.s.Close() }},
	}
}

// TestReentryLoadSource: a Load's (and a LoadParallel's) key source calls
// the store halfway through. Every call returns (nil or a clear error),
// the Load ends, and every key acknowledged before the Load, and in other
// filters from inside the source, is found after Close and reopen.
func TestReentryLoadSource(t *testing.T) {
	seed := testseed.Seed(t)
	for _, kind := range reentryKinds {
		for _, par := range []bool{false, true} {
			for _, a := range reentryActions() {
				mode := "Load"
				if par {
					mode = "LoadParallel"
				}
				t.Run(fmt.Sprintf("%s/%s/%s", kind, mode, a.name), func(t *testing.T) {
					reentryLoadOne(t, seed, kind, par, a)
				})
			}
		}
	}
}

func reentryLoadOne(t *testing.T, seed uint64, kind string, par bool, a reentryAction) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
	f := createKind(t, s, kind, "f", 50_000)
	o, err := s.CreateBloom("o", BloomConfig{Capacity: 10_000})
	must(t, err)
	must(t, f.add(key(-1)))
	acks := []int{}
	rng := newTestRand(seed)
	const n = 20_000
	at := 5000 + rng.IntN(10_000) // the key at which the source calls back
	env := &reentryEnv{t: t, dir: dir, s: s, f: f, o: o, acks: &acks, i: at}
	var actErr error
	var acted atomic.Bool
	src := func(lo, hi int, act bool) iter.Seq2[[]byte, error] {
		return func(yield func([]byte, error) bool) {
			for i := lo; i < hi; i++ {
				if act && i == at && !acted.Swap(true) {
					ok, p := within(t, reentryDeadline, "the source's "+a.name, func() { actErr = a.do(env) })
					if !ok {
						runtime.Goexit()
					}
					if p != nil {
						panic(p)
					}
				}
				if !yield(key(i), nil) {
					return
				}
			}
		}
	}
	var loadErr error
	ok, p := within(t, reentryDeadline+4*time.Second, "the Load", func() {
		if par {
			loadErr = f.loadPar(src(0, n/2, true), src(n/2, n, true))
		} else {
			loadErr = f.load(src(0, n, true))
		}
	})
	if !ok {
		return
	}
	if p != nil {
		t.Fatalf("panic: %v", p)
	}
	t.Logf("%s inside the source: %v; Load: %v", a.name, actErr, loadErr)
	if actErr != nil && a.name != "DropOther" && !a.stops {
		t.Errorf("%s inside the source failed: %v", a.name, actErr)
	}
	if a.stops {
		if loadErr == nil {
			t.Errorf("%s inside the source: the Load returned nil", a.name)
		}
	} else if loadErr != nil {
		t.Errorf("Load with %s inside the source: %v", a.name, loadErr)
	}
	if !f.has(key(-1)) {
		t.Errorf("key acknowledged before the Load answers absent after it")
	}
	if a.name != "Close" {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	s = mustOpen(t, dir, nil)
	defer s.Close()
	if a.stops {
		return
	}
	name := "f"
	if a.name == "RenameSelfFree" {
		name = "f2"
	}
	f = targetOf(t, s, kind, name)
	if !f.has(key(-1)) {
		t.Errorf("after reopen: key acknowledged before the Load answers absent")
	}
	for i := 0; i < n; i += 97 {
		if !f.has(key(i)) {
			t.Fatalf("after reopen: loaded key %d absent (Load returned nil)", i)
		}
	}
	if a.name == "DropOther" {
		return
	}
	o, err = s.Bloom("o")
	must(t, err)
	for _, k := range acks {
		if !o.Has(key(k)) {
			t.Fatalf("after reopen: key %d acknowledged in o from inside the source answers absent", k)
		}
	}
}

// callbackWriter runs fn at its first Write.
type callbackWriter struct {
	once sync.Once
	fn   func()
	buf  bytes.Buffer
}

func (w *callbackWriter) Write(p []byte) (int, error) {
	w.once.Do(w.fn)
	return w.buf.Write(p)
}

// TestReentryWriteToWriter: WriteTo's writer calls the store at its first
// Write. The calls the WriteTo doc forbids (Info, Fill, Check of this
// filter, List, changes to it) are left out; the rest must return, and
// the store must work afterwards and keep every acknowledged key.
func TestReentryWriteToWriter(t *testing.T) {
	seed := testseed.Seed(t)
	type act struct {
		name string
		do   func(s *Store, f, o *Bloom) error
	}
	acts := []act{
		{name: "Has", do: func(s *Store, f, o *Bloom) error {
			if !f.Has(key(1)) {
				return errors.New("absent")
			}
			return nil
		}},
		{name: "Stats", do: func(s *Store, f, o *Bloom) error { s.Stats(); return nil }},
		{name: "OtherAdd", do: func(s *Store, f, o *Bloom) error { _, err := o.Add(key(5)); return err }},
		{name: "OtherWriteTo", do: func(s *Store, f, o *Bloom) error { _, err := o.WriteTo(io.Discard); return err }},
		{name: "CreateBloom", do: func(s *Store, f, o *Bloom) error {
			_, err := s.CreateBloom("new", BloomConfig{Capacity: 10})
			return err
		}},
	}
	for _, a := range acts {
		t.Run(a.name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, &Options{Sync: SyncInterval, CheckpointEvery: -1})
			f, err := s.CreateBloom("f", BloomConfig{Capacity: 1000})
			must(t, err)
			o, err := s.CreateBloom("o", BloomConfig{Capacity: 1000})
			must(t, err)
			for i := range 100 {
				_, err := f.Add(key(i))
				must(t, err)
			}
			var actErr error
			w := &callbackWriter{fn: func() { actErr = a.do(s, f, o) }}
			var werr error
			ok, p := within(t, reentryDeadline, "WriteTo whose writer calls "+a.name, func() { _, werr = f.WriteTo(w) })
			if !ok {
				return // the goroutines stay stuck: the store cannot be closed
			}
			if p != nil {
				t.Fatalf("panic: %v", p)
			}
			t.Logf("seed %d: %s in the writer: %v; WriteTo: %v", seed, a.name, actErr, werr)
			ok, _ = within(t, reentryDeadline, "Close after", func() { s.Close() })
			if !ok {
				return
			}
			s = mustOpen(t, dir, nil)
			defer s.Close()
			f, err = s.Bloom("f")
			must(t, err)
			for i := range 100 {
				if !f.Has(key(i)) {
					t.Fatalf("key %d lost", i)
				}
			}
		})
	}
}

// TestReentryWriteToPanic: a writer that panics: the panic reaches the
// caller, and the store goes on (the next change, checkpoint and Close
// return).
func TestReentryWriteToPanic(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	f, err := s.CreateCuckoo("f", CuckooConfig{Capacity: 1000})
	must(t, err)
	must(t, f.Add(key(1)))
	ok, p := within(t, reentryDeadline, "WriteTo", func() {
		f.WriteTo(&callbackWriter{fn: func() { panic("writer broke") }})
	})
	if !ok || p == nil {
		t.Fatalf("the writer's panic did not reach the caller: %v", p)
	}
	ok, _ = within(t, reentryDeadline, "calls after the panic", func() {
		must(t, f.Add(key(2)))
		must(t, s.Checkpoint())
		must(t, s.Close())
	})
	if !ok {
		return
	}
	s = mustOpen(t, dir, nil)
	defer s.Close()
	f, err = s.Cuckoo("f")
	must(t, err)
	if !f.Has(key(1)) || !f.Has(key(2)) {
		t.Fatal("acknowledged key lost")
	}
}

// callbackReader runs fn at its read past the header, then reads r.
type callbackReader struct {
	r     io.Reader
	n     int
	after int // bytes read before fn runs; 0: 65
	once  sync.Once
	fn    func()
}

func (c *callbackReader) Read(p []byte) (int, error) {
	if after := c.after; after == 0 && c.n > 64 || after > 0 && c.n >= after {
		c.once.Do(c.fn)
	}
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestReentryImportReader: Import's reader calls the store while the
// import reads it.
func TestReentryImportReader(t *testing.T) {
	type act struct {
		name  string
		do    func(s *Store, stream []byte) error
		fails bool // the Import is expected to fail
	}
	acts := []act{
		{name: "Checkpoint", do: func(s *Store, _ []byte) error { return s.Checkpoint() }},
		{name: "Backup", do: func(s *Store, _ []byte) error { return s.Backup(filepath.Join(s.dir, "..", "bk")) }},
		{name: "CreateSameName", fails: true, do: func(s *Store, _ []byte) error {
			_, err := s.CreateBloom("imp", BloomConfig{Capacity: 10})
			return err
		}},
		{name: "ImportSameName", fails: true, do: func(s *Store, stream []byte) error {
			return s.Import("imp", bytes.NewReader(stream))
		}},
		{name: "RenameOverName", fails: true, do: func(s *Store, _ []byte) error { return s.Rename("f", "imp") }},
		{name: "DropF", do: func(s *Store, _ []byte) error { return s.Drop("f") }},
		{name: "Close", fails: true, do: func(s *Store, _ []byte) error { return s.Close() }},
		{name: "Panic", fails: true, do: func(s *Store, _ []byte) error { panic("reader broke") }},
	}
	for _, a := range acts {
		t.Run(a.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			s := mustOpen(t, dir, nil)
			f, err := s.CreateBloom("f", BloomConfig{Capacity: 100_000})
			must(t, err)
			for i := range 100 {
				_, err := f.Add(key(i))
				must(t, err)
			}
			var buf bytes.Buffer
			_, err = f.WriteTo(&buf)
			must(t, err)
			stream := buf.Bytes()
			var actErr, ierr error
			r := &callbackReader{r: bytes.NewReader(stream), fn: func() { actErr = a.do(s, stream) }}
			ok, p := within(t, reentryDeadline, "Import whose reader calls "+a.name, func() { ierr = s.Import("imp", r) })
			if !ok {
				return
			}
			t.Logf("%s in the reader: %v; Import: %v; panic: %v", a.name, actErr, ierr, p)
			if a.fails && ierr == nil && p == nil {
				in, _ := s.List()
				t.Errorf("%s in the reader: Import returned nil (reader's call: %v); filters: %+v", a.name, actErr, in)
			}
			if !a.fails && ierr != nil {
				t.Errorf("%s in the reader: Import: %v", a.name, ierr)
			}
			if a.name != "Close" {
				ok, _ = within(t, reentryDeadline, "Close after", func() { must(t, s.Close()) })
				if !ok {
					return
				}
			}
			s = mustOpen(t, dir, nil)
			defer s.Close()
			rep, err := s.Check()
			must(t, err)
			if len(rep.Problems) > 0 {
				t.Errorf("Check after: %+v", rep.Problems)
			}
			if a.name == "DropF" {
				return
			}
			name := "f"
			if a.name == "RenameOverName" && actErr == nil {
				name = "imp"
			}
			f, err = s.Bloom(name)
			must(t, err)
			for i := range 100 {
				if !f.Has(key(i)) {
					t.Fatalf("key %d lost", i)
				}
			}
		})
	}
}

// reentryHandler is a slog.Handler that runs fn on every record.
type reentryHandler struct{ fn func(r slog.Record) }

func (h reentryHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h reentryHandler) Handle(_ context.Context, r slog.Record) error {
	h.fn(r)
	return nil
}
func (h reentryHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h reentryHandler) WithGroup(string) slog.Handler      { return h }

// TestReentryLoggerPanicInClose: a Logger whose handler panics (a bug in
// the engine's logging) at the checkpoint record Close logs. The panic
// is recovered (package safelog) and the record goes to the fallback:
// Close returns nil, nothing is left locked, the next calls return, and a
// reopen finds every key. (An adversarial review found the gate and the
// checkpoint mutex held for ever after such a panic: every later call
// hung.)
func TestReentryLoggerPanicInClose(t *testing.T) {
	var fb bytes.Buffer
	old := safelog.Fallback
	safelog.Fallback = slog.NewTextHandler(&fb, nil)
	defer func() { safelog.Fallback = old }()
	dir := t.TempDir()
	var armed atomic.Bool
	h := reentryHandler{fn: func(r slog.Record) {
		if armed.Load() && r.Message == "checkpoint" {
			armed.Store(false)
			panic("logger broke")
		}
	}}
	s := mustOpen(t, dir, &Options{Logger: slog.New(h), CheckpointEvery: -1})
	f, err := s.CreateBloom("f", BloomConfig{Capacity: 1000})
	must(t, err)
	for i := range 100 {
		_, err := f.Add(key(i))
		must(t, err)
	}
	armed.Store(true)
	var cerr error
	ok, p := within(t, reentryDeadline, "Close", func() { cerr = s.Close() })
	if !ok {
		return
	}
	if p != nil || cerr != nil {
		t.Fatalf("Close whose Logger's handler panicked: panic %v, error %v; want neither", p, cerr)
	}
	if armed.Load() || !strings.Contains(fb.String(), "logger broke") {
		t.Fatalf("the checkpoint record with the panic's value did not reach the fallback (armed %v): %q", armed.Load(), fb.String())
	}
	ok, _ = within(t, reentryDeadline, "Close again after the logger's panic", func() {
		if err := s.Close(); !errors.Is(err, ErrClosed) {
			t.Errorf("second Close: %v, want ErrClosed", err)
		}
	})
	if !ok {
		return
	}
	ok, _ = within(t, reentryDeadline, "Add after the logger's panic", func() {
		if _, err := f.Add(key(1000)); err == nil {
			t.Error("Add after Close (whose handler panicked) returned nil")
		}
	})
	if !ok {
		return
	}
	s2, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("reopen in the same process after the logger's panic in Close: %v", err)
	}
	defer s2.Close()
	f, err = s2.Bloom("f")
	must(t, err)
	for i := range 100 {
		if !f.Has(key(i)) {
			t.Fatalf("key %d lost", i)
		}
	}
}

// TestReentryLoggerOnFailure: a Logger whose handler calls back into the
// store when it sees an Error record (to dump the filters' state with
// List, or the WAL's counters with Stats), when a WAL write fails
// under an Add. The handler's call must return (an error is fine) and the
// Add must return an error.
func TestReentryLoggerOnFailure(t *testing.T) {
	for _, what := range []string{"List", "Stats"} {
		t.Run(what, func(t *testing.T) {
			w := newSimWorld(t, SyncAlways)
			fail := &failSwitch{err: syscall.EIO}
			w.fs.SetInjector(fail.wal(wal.OpWrite))
			var s *Store
			var once sync.Once
			var handlerErr error
			h := reentryHandler{fn: func(r slog.Record) {
				if r.Level < slog.LevelError {
					return
				}
				once.Do(func() {
					switch what {
					case "List":
						_, handlerErr = s.List()
					case "Stats":
						s.Stats()
					}
				})
			}}
			w.opts.Logger = slog.New(h)
			var err error
			s, err = w.open(t)
			must(t, err)
			f, err := s.CreateBloom("f", BloomConfig{Capacity: 1000})
			must(t, err)
			for i := range 100 {
				_, err := f.Add(key(i))
				must(t, err)
			}
			fail.on.Store(true)
			var aerr error
			ok, _ := within(t, reentryDeadline, "Add whose WAL write fails, the logger calling "+what, func() {
				_, aerr = f.Add(key(1000))
			})
			if !ok {
				return
			}
			t.Logf("handler's %s: %v; Add: %v", what, handlerErr, aerr)
			if aerr == nil {
				t.Fatal("the Add whose WAL write failed returned nil")
			}
			fail.on.Store(false)
			within(t, reentryDeadline, "Close", func() { s.Close() })
		})
	}
}

// TestReentryHandleMisuse: handles after Drop, Rename and Close, a handle
// of one store in another's Batch, a second Open of the same directory,
// Open of a file and of a symlink loop, Close twice, Checkpoint racing
// Close, and batches reused after Commit or a failed Commit. Each call
// returns an error naming what is wrong (or works, where the docs say
// so), and acknowledged keys survive.
func TestReentryHandleMisuse(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 1000})
	must(t, err)
	d, err := s.CreateCounting("d", BloomConfig{Capacity: 1000})
	must(t, err)
	for i := range 50 {
		_, err := b.Add(key(i))
		must(t, err)
		must(t, c.Add(key(i)))
		must(t, d.Add(key(i)))
	}
	call := func(what string, fn func() error, want error) {
		t.Helper()
		var err error
		ok, p := within(t, reentryDeadline, what, func() { err = fn() })
		if !ok {
			return
		}
		if p != nil {
			t.Errorf("%s: panic %v", what, p)
			return
		}
		t.Logf("%s: %v", what, err)
		if want == errAny && err != nil {
			return
		}
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	// A second writer Open of the same directory in this process.
	call("second Open of the same directory", func() error {
		s2, err := Open(dir, nil)
		if err == nil {
			s2.Close()
		}
		return err
	}, ErrLocked)
	// Open of a file, and of a symlink loop.
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, []byte("x"), 0o644))
	call("Open of a file", func() error { _, err := Open(file, nil); return err }, errAny)
	loop := filepath.Join(t.TempDir(), "loop")
	must(t, os.Symlink(loop, loop))
	call("Open of a symlink loop", func() error { _, err := Open(loop, nil); return err }, errAny)
	// Old handle after Rename keeps working (the docs).
	must(t, s.Rename("b", "b2"))
	call("Add through the handle of a renamed filter", func() error { _, err := b.Add(key(100)); return err }, nil)
	// A batch holding ops for a filter dropped before Commit.
	bt := s.NewBatch()
	bt.CuckooAdd(c, key(200))
	bt.BloomAdd(b, key(201))
	must(t, s.Drop("c"))
	call("Commit of a batch whose filter was dropped", func() error { _, err := bt.Commit(); return err }, ErrClosed)
	call("Commit again after a failed Commit", func() error {
		_, err := bt.Commit()
		if err != nil && strings.Contains(err.Error(), "already committed") {
			return fmt.Errorf("misleading: %w", errors.New(err.Error()))
		}
		return err
	}, ErrInvalid)
	if b.Has(key(201)) {
		// A false positive is possible, but at 50 keys in 1000 unlikely.
		t.Logf("key 201 of the failed batch answers present")
	}
	call("Add after Drop", func() error { return c.Add(key(300)) }, ErrClosed)
	if !c.Has(key(1)) {
		t.Errorf("a dropped filter's handle answers absent")
	}
	// A batch reused after a Commit, ops added after it.
	bt = s.NewBatch()
	bt.BloomAdd(b, key(400))
	call("first Commit", func() error { _, err := bt.Commit(); return err }, nil)
	bt.BloomAdd(b, key(401))
	call("Commit of ops added after Commit", func() error { _, err := bt.Commit(); return err }, ErrInvalid)
	// A handle of another store in a batch.
	dir2 := t.TempDir()
	s2 := mustOpen(t, dir2, nil)
	b2, err := s2.CreateBloom("b", BloomConfig{Capacity: 100})
	must(t, err)
	bt = s.NewBatch()
	bt.BloomAdd(b, key(500))
	bt.BloomAdd(b2, key(500))
	call("Commit with another store's handle", func() error { _, err := bt.Commit(); return err }, ErrInvalid)
	must(t, s2.Close())
	// Checkpoints racing Close.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := s.Checkpoint(); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("Checkpoint racing Close: %v", err)
				}
			}
		}()
	}
	call("Close racing checkpoints", s.Close, nil)
	wg.Wait()
	call("Close twice", s.Close, ErrClosed)
	call("Checkpoint after Close", s.Checkpoint, ErrClosed)
	call("Add after Close", func() error { _, err := b.Add(key(600)); return err }, ErrClosed)
	call("Batch after Close", func() error {
		bt := s.NewBatch()
		bt.BloomAdd(b, key(601))
		_, err := bt.Commit()
		return err
	}, ErrClosed)
	call("Drop after Close", func() error { return s.Drop("d") }, ErrClosed)
	bk := filepath.Join(t.TempDir(), "bk")
	call("Backup after Close", func() error {
		err := s.Backup(bk)
		if err != nil && !strings.Contains(err.Error(), "backup") {
			return fmt.Errorf("does not name the Backup: %v", err)
		}
		return err
	}, ErrClosed)
	call("Load after Close", func() error { return d.Load(rangeKeys(0, 10)) }, ErrClosed)
	call("WriteTo after Close", func() error { _, err := d.WriteTo(io.Discard); return err }, ErrClosed)
	if !b.Has(key(1)) || !d.Has(key(1)) {
		t.Errorf("a closed store's handle answers absent")
	}
	// The handle of the closed store used in a batch of a new Open.
	s = mustOpen(t, dir, nil)
	defer s.Close()
	bt = s.NewBatch()
	bt.BloomAdd(b, key(700))
	call("Commit of a new store's batch with the closed store's handle", func() error { _, err := bt.Commit(); return err }, ErrInvalid)
	nb, err := s.Bloom("b2")
	must(t, err)
	nd, err := s.Counting("d")
	must(t, err)
	for _, i := range []int{0, 49, 100, 400} {
		if !nb.Has(key(i)) {
			t.Errorf("after reopen: key %d absent from b2", i)
		}
	}
	for i := range 50 {
		if !nd.Has(key(i)) {
			t.Errorf("after reopen: key %d absent from d", i)
		}
	}
}

// errAny is a want of call: any non-nil error.
var errAny = errors.New("any error")

// TestReentryBufferReuse: a Load or LoadParallel source that yields the
// same buffer, rewritten, for every key; AddMany and Batch keys changed
// right after the call. Every key yielded is found.
func TestReentryBufferReuse(t *testing.T) {
	for _, procs := range []int{1, 8} {
		t.Run(fmt.Sprintf("cpu=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			dir := t.TempDir()
			s := mustOpen(t, dir, &Options{Sync: SyncInterval})
			const n = 30_000
			reuse := func(lo, hi int) iter.Seq2[[]byte, error] {
				return func(yield func([]byte, error) bool) {
					buf := make([]byte, 0, 32)
					for i := lo; i < hi; i++ {
						buf = append(buf[:0], key(i)...)
						if !yield(buf, nil) {
							return
						}
						// Scribble over it: a source reusing its buffer.
						for j := range buf {
							buf[j] = 0xff
						}
					}
				}
			}
			for _, kind := range reentryKinds {
				f := createKind(t, s, kind, kind, 10_000)
				must(t, f.load(reuse(0, n)))
				g := createKind(t, s, kind, kind+"p", 10_000)
				must(t, g.loadPar(reuse(0, n/3), reuse(n/3, 2*n/3), reuse(2*n/3, n)))
				for i := range n {
					if !f.has(key(i)) || !g.has(key(i)) {
						t.Fatalf("%s: key %d yielded in a reused buffer is absent (Load %v, LoadParallel %v)", kind, i, f.has(key(i)), g.has(key(i)))
					}
				}
			}
			m, err := s.CreateBloom("many", BloomConfig{Capacity: 10_000})
			must(t, err)
			keys := make([][]byte, 100)
			for i := range keys {
				keys[i] = key(100_000 + i)
			}
			_, err = m.AddMany(keys)
			must(t, err)
			bt := s.NewBatch()
			k := key(200_000)
			bt.BloomAdd(m, k)
			k[len(k)-1] = 'x'
			_, err = bt.Commit()
			must(t, err)
			for i := range keys {
				keys[i][0] = 'X'
			}
			must(t, s.Close())
			s = mustOpen(t, dir, nil)
			defer s.Close()
			m, err = s.Bloom("many")
			must(t, err)
			for i := range 100 {
				if !m.Has(key(100_000 + i)) {
					t.Fatalf("AddMany key %d absent after its buffer was changed", i)
				}
			}
			if !m.Has(key(200_000)) {
				t.Fatal("a batch's key changed after BloomAdd is absent")
			}
		})
	}
}
