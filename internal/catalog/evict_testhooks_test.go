//go:build filterstore_testhooks

package catalog

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestEvictAfterFailedCommit: a commit that failed once its transaction
// ran (an EIO from its sync, by AfterCommitHook) drops the catalog's
// pages from the page cache (evictFile) before its update returns, so
// that a process that opens the store next, after a crash, reads what
// the disk holds; the updates after it evict nothing more. Where that
// eviction fails, the next update evicts first, and fails before
// anything is written (NotStarted) while its eviction fails; the one
// after it tries again. An update that failed before its commit (nothing
// written) evicts nothing. A failed commit's error names the catalog
// file.
func TestEvictAfterFailedCommit(t *testing.T) {
	c := New(t.TempDir())
	must(t, c.Create(1))
	var evicted []string
	var evictErr error
	was := evictFile
	evictFile = func(path string) error {
		evicted = append(evicted, path)
		if evictErr != nil {
			return evictErr
		}
		return was(path)
	}
	t.Cleanup(func() { evictFile = was; AfterCommitHook = nil })
	failCommit := func(next uint64) {
		t.Helper()
		AfterCommitHook = func(_ string, err error) error {
			if err == nil {
				return fmt.Errorf("injected: %w", syscall.EIO)
			}
			return err
		}
		defer func() { AfterCommitHook = nil }()
		if err := c.PutFilters(next, nil); !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), c.Path) {
			t.Fatalf("PutFilters with its commit failing: %v, want EIO naming %s", err, c.Path)
		}
	}

	must(t, c.PutFilters(2, nil))
	if len(evicted) != 0 {
		t.Fatalf("evictions before any failed commit: %v", evicted)
	}
	failCommit(3)
	if len(evicted) != 1 || evicted[0] != c.Path {
		t.Fatalf("evictions by the failed commit's update: %v, want one of %s", evicted, c.Path)
	}
	must(t, c.PutFilters(3, nil))
	if len(evicted) != 1 {
		t.Fatalf("evictions after the failed commit's own: %v, want none more", evicted)
	}

	// The failed update's eviction fails: the next update evicts first,
	// and fails unstarted while that eviction fails (and tries once more
	// as it returns); the one after it evicts, then commits.
	evictErr = fmt.Errorf("injected: %w", syscall.EIO)
	failCommit(4)
	err := c.PutFilters(4, nil)
	if !errors.Is(err, syscall.EIO) || !NotStarted(err) {
		t.Fatalf("PutFilters whose eviction fails: %v (not started: %v), want EIO before the transaction", err, NotStarted(err))
	}
	if len(evicted) != 4 {
		t.Fatalf("evictions: %d, want four (the first failed commit's; the second's, which failed; the next update's before it began and as it failed)", len(evicted))
	}
	evictErr = nil
	must(t, c.PutFilters(4, nil))
	must(t, c.PutFilters(5, nil))
	if len(evicted) != 5 {
		t.Fatalf("evictions: %d, want five (one more, before the update that succeeded, and none after it)", len(evicted))
	}
	st, err := c.Load()
	must(t, err)
	if st.NextID != 5 {
		t.Fatalf("next id %d after the updates, want 5", st.NextID)
	}

	// An update that fails before its commit (here the owner check: the
	// catalog looks replaced) writes nothing: no eviction follows.
	bad := *st
	bad.StoreID++
	c.Own(&bad)
	if err := c.PutFilters(6, nil); err == nil {
		t.Fatal("PutFilters under another store's id succeeded")
	}
	c.Own(st)
	must(t, c.PutFilters(6, nil))
	if len(evicted) != 5 {
		t.Fatalf("evictions after an update that failed before its commit: %v, want none more", evicted)
	}
}
