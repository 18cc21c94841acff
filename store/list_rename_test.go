package store

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestListBesideRenameOver: List racing a Rename over another
// filter (and Drops) must not report a name twice, nor a filter dropped
// before List was called... nor one neither before nor after state has.
// List snapshotted the handles under s.mu and read each one's name after
// releasing it: a rename in between reported the renamed handle under its
// new name beside the replaced one. Now it lists each under the name it
// had in the snapshot.
func TestListBesideRenameOver(t *testing.T) {
	s := mustOpen(t, t.TempDir(), &Options{CheckpointEvery: -1, Sync: SyncInterval})
	defer s.Close()
	// Many filters: List's walk over their handles takes a while.
	for _, n := range []string{"x", "y"} {
		must(t, second(s.CreateBitmap(n, 64)))
	}
	for i := range 1000 {
		must(t, second(s.CreateBitmap(fmt.Sprintf("z%04d", i), 64)))
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.Rename("x", "y"); err != nil {
				t.Error(err)
				return
			}
			if _, err := s.CreateBitmap("x", 64); err != nil && !errors.Is(err, ErrExists) {
				t.Error(err)
				return
			}
		}
	}()
	deadline := time.Now().Add(3 * time.Second) // before the fix: a name twice in about half the runs
	bad := ""
	for n := 0; time.Now().Before(deadline) && bad == ""; n++ {
		l, err := s.List()
		must(t, err)
		for i := 1; i < len(l); i++ {
			if l[i].Name == l[i-1].Name {
				bad = l[i].Name
			}
		}
	}
	close(stop)
	<-done
	if bad != "" {
		t.Fatalf("List reported %q twice", bad)
	}
}
