package mmapbits

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs of the given size (mount(8) syntax) on a new
// directory, unmounted at the end of the test.
func mountTmpfs(t *testing.T, size string) string {
	dir := t.TempDir()
	if err := unix.Mount("none", dir, "tmpfs", 0, "size="+size); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("cannot mount a tmpfs: %v", err)
		}
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// TestOSCreateFullDisk: on a 1 MiB file system, Create of a 4 MiB region
// fails with ENOSPC and leaves nothing, instead of mapping a sparse file
// whose first write past the free space kills the process with SIGBUS; a
// 512 KiB region is created and every word of it can be written. With
// fallocate unsupported, zeros are written instead, with the same results.
func TestOSCreateFullDisk(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		name := "fallocate"
		if fallback {
			name = "write zeros"
		}
		t.Run(name, func(t *testing.T) {
			if fallback {
				defer func(f func(int, uint32, int64, int64) error) { fallocate = f }(fallocate)
				fallocate = func(int, uint32, int64, int64) error { return unix.EOPNOTSUPP }
			}
			dir := mountTmpfs(t, "1m")
			big := filepath.Join(dir, "big.flt")
			r, err := OS{}.Create(big, Header{Kind: KindBitmap, DataPages: 1024, Size: 1}) // 4 MiB
			if err == nil {
				r.Close()
				t.Fatal("Create of 4 MiB on a 1 MiB file system succeeded")
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Create: %v, want ENOSPC", err)
			}
			if names, err := os.ReadDir(dir); err != nil || len(names) != 0 {
				t.Fatalf("files left after the failed Create: %v %v", names, err)
			}

			small := filepath.Join(dir, "small.flt")
			r, err = OS{}.Create(small, Header{Kind: KindBitmap, DataPages: 128, Size: 1}) // 512 KiB
			if err != nil {
				t.Fatal(err)
			}
			w := r.Words()
			for i := range w {
				atomic.StoreUint64(&w[i], uint64(i)|1<<63)
			}
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			r, err = OS{}.Open(small)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for i, v := range r.Words() {
				if v != uint64(i)|1<<63 {
					t.Fatalf("word %d = %x after reopen", i, v)
				}
			}
		})
	}
}

// TestOSCreateBeyondFreeSpace: a Create larger than the free space its
// file system reports fails with ENOSPC before it allocates a block
// (fallocate is never called) and leaves nothing. (fallocate used to run
// and take every free block before failing: other writers on the file
// system, the store's WAL among them, then found the disk full until the
// file was removed.) One that fits is created.
func TestOSCreateBeyondFreeSpace(t *testing.T) {
	defer func(f func(int, uint32, int64, int64) error, g func(int) (uint64, bool)) {
		fallocate, freeSpace = f, g
	}(fallocate, freeSpace)
	var calls atomic.Int32
	real := fallocate
	fallocate = func(fd int, mode uint32, off, size int64) error {
		calls.Add(1)
		return real(fd, mode, off, size)
	}
	freeSpace = func(int) (uint64, bool) { return 3 << 20, true }
	dir := t.TempDir()
	big := filepath.Join(dir, "big.flt")
	r, err := OS{}.Create(big, Header{Kind: KindBitmap, DataPages: 1024, Size: 1}) // 4 MiB
	if err == nil {
		r.Close()
		t.Fatal("Create of 4 MiB with 3 MiB free succeeded")
	}
	if !errors.Is(err, syscall.ENOSPC) || calls.Load() != 0 {
		t.Fatalf("Create: %v after %d fallocate calls, want ENOSPC and none", err, calls.Load())
	}
	if names, err := os.ReadDir(dir); err != nil || len(names) != 0 {
		t.Fatalf("files left after the failed Create: %v %v", names, err)
	}
	r, err = OS{}.Create(filepath.Join(dir, "small.flt"), Header{Kind: KindBitmap, DataPages: 256, Size: 1}) // 1 MiB
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}
