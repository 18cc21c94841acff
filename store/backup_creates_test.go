package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestBackupEndsWhileFiltersAreMade: filters created without pause while
// Backup copies, each file copy slowed to 3 ms (a large file's takes
// longer): Backup ends, and its copy holds the filters of its catalog.
// Before, its first step ran again as long as a pass found a new file,
// and under a steady rate of creates never ended, holding every
// Checkpoint and Close meanwhile (an adversarial review's finding; here it
// gave up after 10 s).
func TestBackupEndsWhileFiltersAreMade(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "src"), nil)
	defer s.Close()
	base, err := s.CreateBloom("base", BloomConfig{Capacity: 1000})
	must(t, err)
	_, err = base.Add([]byte("k"))
	must(t, err)
	var stop atomic.Bool
	done := make(chan error)
	go func() {
		for i := 0; !stop.Load(); i++ {
			if _, err := s.CreateBitmap(fmt.Sprint("tenant", i), 1<<10); err != nil {
				done <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
		done <- nil
	}()
	start := time.Now()
	copies := 0
	s.hooks.backupFile = func(string) error {
		copies++
		time.Sleep(3 * time.Millisecond)
		if time.Since(start) > 10*time.Second {
			return errors.New("gave up after 10 s")
		}
		return nil
	}
	dst := filepath.Join(t.TempDir(), "dst")
	err = s.Backup(dst)
	stop.Store(true)
	must(t, <-done)
	s.hooks.backupFile = nil
	if err != nil {
		t.Fatalf("Backup with filters being made: after %v and %d file copies: %v", time.Since(start).Round(time.Millisecond), copies, err)
	}
	t.Logf("Backup took %v, %d file copies", time.Since(start).Round(time.Millisecond), copies)
	c := mustOpen(t, dst, nil)
	defer c.Close()
	b, err := c.Bloom("base")
	must(t, err)
	if !b.Has([]byte("k")) {
		t.Fatal("the copy lost a key added before Backup")
	}
	rep, err := c.Check()
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("check of the copy: %v %+v", err, rep)
	}
}
