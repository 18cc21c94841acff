package store

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
)

// TestBackupThroughBindMountRefused: a bind mount of the store's wal/ or
// filters/ elsewhere, and a Backup to a path under it. outsideStore
// walked up from the target comparing each parent with the store's
// directory alone, which the walk never passes through, so the copy
// landed in wal/ (every later Open failed: a segment's name was a
// directory) or filters/ (an adversarial review's finding). It needs
// CAP_SYS_ADMIN for the mount, and is skipped without it.
func TestBackupThroughBindMountRefused(t *testing.T) {
	for _, sub := range []string{format.WALName, format.FiltersName} {
		t.Run(sub, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "s")
			s := mustOpen(t, dir, nil)
			defer s.Close()
			f, err := s.CreateBloom("a", BloomConfig{Capacity: 1000})
			must(t, err)
			must(t, second(f.Add(key(1))))
			mnt := filepath.Join(root, "m")
			must(t, os.Mkdir(mnt, 0o755))
			if err := syscall.Mount(filepath.Join(dir, sub), mnt, "", syscall.MS_BIND, ""); err != nil {
				t.Skipf("bind mount: %v", err)
			}
			defer syscall.Unmount(mnt, 0)
			name := wal99
			if sub == format.FiltersName {
				name = format.LayerName(2, 0)
			}
			if err := s.Backup(filepath.Join(mnt, name)); !errors.Is(err, ErrInvalid) {
				t.Errorf("Backup through a bind mount of %s/: %v, want ErrInvalid", sub, err)
			}
			if _, err := os.Lstat(filepath.Join(dir, sub, name)); err == nil {
				t.Errorf("the copy is inside the store")
			}
		})
	}
}
