//go:build filterstore_testhooks

package store

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/catalog"
)

// catalogFault arms catalog.AfterCommitHook: the n-th (from 1) catalog
// update whose store-side caller (the first store frame on the stack,
// e.g. "(*Store).create", "(*filterBase).addLayer") contains op returns
// errno. If landed, the commit stays on disk; if not, the catalog's two
// meta pages are put back as they were before that commit, so the file
// is as if the commit never happened.
type catalogFault struct {
	t      *testing.T
	op     string
	n      int
	errno  syscall.Errno
	landed bool

	mu    sync.Mutex
	seen  int
	fired int
	calls []string
	prev  []byte // the meta pages after the last commit seen
}

func armCatalogFault(t *testing.T, dir, op string, n int, errno syscall.Errno, landed bool) *catalogFault {
	t.Helper()
	f := &catalogFault{t: t, op: op, n: n, errno: errno, landed: landed}
	f.prev = readMetaPages(t, catalog.New(dir).Path)
	catalog.AfterCommitHook = f.hook
	t.Cleanup(func() { catalog.AfterCommitHook = nil })
	return f
}

func (f *catalogFault) disarm() { catalog.AfterCommitHook = nil }

func metaLen() int { return 2 * os.Getpagesize() }

func readMetaPages(t *testing.T, path string) []byte {
	fd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	b := make([]byte, metaLen())
	if _, err := fd.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

// caller returns the first store-package frame above the catalog.
func caller() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		fr, more := frames.Next()
		if strings.Contains(fr.Function, "filterstore/store.") {
			return fr.Function[strings.LastIndex(fr.Function, "store.")+len("store."):]
		}
		if !more {
			return "?"
		}
	}
}

func (f *catalogFault) hook(path string, err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	who := caller()
	f.calls = append(f.calls, who)
	if err != nil {
		return err
	}
	if strings.Contains(who, f.op) {
		f.seen++
		if f.seen == f.n {
			f.fired++
			if !f.landed {
				fd, oerr := os.OpenFile(path, os.O_WRONLY, 0)
				if oerr != nil {
					panic(oerr)
				}
				if _, werr := fd.WriteAt(f.prev, 0); werr != nil {
					panic(werr)
				}
				fd.Close()
			}
			return f.errno
		}
	}
	f.prev = readMetaPages(f.t, path)
	return nil
}

func (f *catalogFault) mustHaveFired(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fired != 1 {
		t.Fatalf("fault on %q #%d fired %d times; catalog updates seen: %v", f.op, f.n, f.fired, f.calls)
	}
}

func landedName(b bool) string {
	if b {
		return "landed"
	}
	return "notlanded"
}

// The harness itself: a landed commit is there after a crash, a
// not-landed one is not.
func TestLandedHarness(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(landedName(landed), func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
			must(t, second(s.CreateBloom("a", BloomConfig{Capacity: 10})))
			f := armCatalogFault(t, dir, "(*Store).create", 1, syscall.ENOSPC, landed)
			if _, err := s.CreateBloom("p", BloomConfig{Capacity: 10}); err == nil {
				t.Fatal("create succeeded")
			}
			f.disarm()
			f.mustHaveFired(t)
			must(t, second(s.CreateBloom("x", BloomConfig{Capacity: 10})))
			s.abandonForTest()
			st, err := catalog.New(dir).Load()
			must(t, err)
			if _, ok := st.Filters["p"]; ok != landed {
				t.Fatalf("p in the catalog: %v, want %v", ok, landed)
			}
			if _, ok := st.Filters["x"]; !ok {
				t.Fatal("x missing")
			}
			s = mustOpen(t, dir, nil)
			must(t, s.Close())
		})
	}
}

// storeWithKeys opens a store (no background checkpoints) in a new
// directory with a Bloom filter "a" holding keys 0..n-1.
func storeWithKeys(t *testing.T, n int) (string, *Store, *Bloom) {
	t.Helper()
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	a, err := s.CreateBloom("a", BloomConfig{Capacity: 1000})
	must(t, err)
	for i := range n {
		must(t, second(a.Add(key(i))))
	}
	return dir, s, a
}

// failCreate creates the Bloom filter name in s, in directory dir, with
// its catalog commit returning ENOSPC, landed or not, and fails the test
// unless the call returned ENOSPC and the store went on.
func failCreate(t *testing.T, s *Store, dir, name string, landed bool) {
	t.Helper()
	f := armCatalogFault(t, dir, "(*Store).create", 1, syscall.ENOSPC, landed)
	_, err := s.CreateBloom(name, BloomConfig{Capacity: 1000})
	f.disarm()
	f.mustHaveFired(t)
	if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFailed) {
		t.Fatalf("create %q: %v, want ENOSPC and the store going on", name, err)
	}
}
