package store

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCatalogGrowthPastFileSizeLimit: a create whose catalog commit must
// grow catalog.db past the process's file size limit (RLIMIT_FSIZE:
// bbolt's ftruncate fails with EFBIG before it writes a page) fails with
// an error that wraps syscall.EFBIG and only fails the call: the store
// goes on, and once the limit is raised the same create succeeds. Before,
// bbolt's "file resize error: %s" flattened the errno to text (errors.Is
// with EFBIG false), and the store failed: every later change returned
// ErrFailed until a reopen, as did an Open under the same limit, though
// the commit had written nothing (an adversarial tester's find). Run in a
// child process, whose limit it lowers (Go ignores SIGXFSZ, so the
// truncate returns EFBIG).
func TestCatalogGrowthPastFileSizeLimit(t *testing.T) {
	dir := os.Getenv("FILTERSTORE_CATALOG_FSIZE_CHILD")
	if dir == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCatalogGrowthPastFileSizeLimit$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "FILTERSTORE_CATALOG_FSIZE_CHILD="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	s := mustOpen(t, dir, &Options{CheckpointEvery: -1})
	defer s.Close()
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	must(t, second(b.Add(key(1))))
	st, err := os.Stat(s.cat.Path)
	must(t, err)
	lim := unix.Rlimit{Cur: uint64(st.Size()) + 4096, Max: unix.RLIM_INFINITY}
	must(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &lim))
	var cerr error
	made := 0
	for i := range 1000 {
		// Long names fill the catalog's pages quickly.
		if _, cerr = s.CreateBitmap(fmt.Sprintf("m%04d-%s", i, strings.Repeat("x", 150)), 64); cerr != nil {
			break
		}
		made++
	}
	lim.Cur = unix.RLIM_INFINITY
	must(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &lim))
	if cerr == nil {
		t.Fatal("1000 creates under the file size limit did not grow the catalog past it")
	}
	t.Logf("after %d creates: %v", made, cerr)
	if !errors.Is(cerr, syscall.EFBIG) {
		t.Errorf("create past the file size limit: %v; want an error wrapping EFBIG", cerr)
	}
	if errors.Is(cerr, ErrFailed) {
		t.Errorf("create past the file size limit failed the store: %v", cerr)
	}
	// The store goes on: a change, a checkpoint and the same create.
	must(t, second(b.Add(key(2))))
	must(t, s.Checkpoint())
	if _, err := s.CreateBitmap(fmt.Sprintf("m%04d-%s", made, strings.Repeat("x", 150)), 64); err != nil {
		t.Fatalf("the create again once the limit was raised: %v", err)
	}
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	b, err = s.Bloom("b")
	must(t, err)
	if !b.Has(key(1)) || !b.Has(key(2)) {
		t.Fatal("an acknowledged key is absent after reopen")
	}
	l, err := s.List()
	must(t, err)
	if len(l) != made+2 {
		t.Fatalf("%d filters after reopen, want %d", len(l), made+2)
	}
}
