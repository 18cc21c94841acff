package wal

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkFdatasync measures the bound of a SyncAlways log on this
// machine's disk: one 1 KiB write and fdatasync per op, at the end of a
// growing file (append: what the log does; each sync also commits the
// new size) and into a file preallocated with fallocate (overwrite: the
// size is already durable; what preallocated or recycled segments would
// pay). N closed-loop writers sharing syncs can reach at most N per sync
// latency.
func BenchmarkFdatasync(b *testing.B) {
	for _, c := range []struct {
		name     string
		prealloc bool
	}{{"append", false}, {"overwrite", true}} {
		b.Run(c.name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "sync"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			const block = 1 << 10
			if c.prealloc {
				if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(b.N+1)*block); err != nil {
					b.Skipf("fallocate: %v", err)
				}
				if err := unix.Fsync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
			buf := make([]byte, block)
			b.ResetTimer()
			for i := range b.N {
				if _, err := f.WriteAt(buf, int64(i)*block); err != nil {
					b.Fatal(err)
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
