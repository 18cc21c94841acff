package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// TestOpenBusyRetriedAndNotBroken: a read-only open that fails with
// ErrLocked (the writer checkpointed during each of the store's own
// attempts) is tried again; ls then lists the store as usual. One that
// keeps failing is exit 2, "cannot be opened", with no filter shown
// broken. Before, ls gave up at once and listed every filter broken,
// under the hints for damaged data, beside a writer that checkpoints
// often (an adversarial review's finding).
func TestOpenBusyRetriedAndNotBroken(t *testing.T) {
	dir := cleanStore(t)
	calls, failFor := 0, 0
	storeOpen = func(dir string, o *store.Options) (*store.Store, error) {
		calls++
		if calls <= failFor {
			return nil, fmt.Errorf("store: %s: %w: the writer checkpointed during each of 10 read-only opens in a row; try again", dir, store.ErrLocked)
		}
		return store.Open(dir, o)
	}
	defer func() { storeOpen = store.Open }()

	failFor = 2
	r := mustRun(t, 0, "ls", dir)
	if calls != 3 || strings.Contains(r.stdout, "broken") {
		t.Errorf("ls with two busy opens: %d opens, want 3:\n%s", calls, r)
	}

	calls, failFor = 0, 1000
	r = runCLI("ls", dir)
	if r.code != 2 || strings.Contains(r.stdout, "broken") || !strings.Contains(r.stderr, "cannot be opened") {
		t.Errorf("ls with every open busy: want exit 2, no filter shown broken, got:\n%s", r)
	}
	if calls != len(openRetryPauses)+1 {
		t.Errorf("ls with every open busy: %d opens, want %d", calls, len(openRetryPauses)+1)
	}
}
