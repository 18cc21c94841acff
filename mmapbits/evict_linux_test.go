package mmapbits

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
)

// TestOSEvict: Evict of a file with unsynced writes through a mapping
// keeps them (it syncs before it drops pages) and says the mapped pages
// stayed (ErrBusy, asserted on ext4, XFS and Btrfs: on tmpfs the pages
// are the file); once the
// mapping is closed it drops them; a missing file wraps fs.ErrNotExist,
// and a FIFO or a directory is refused without blocking.
func TestOSEvict(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "1-0.flt")
	r, err := OS{}.Create(path, Header{Kind: KindBitmap, DataPages: 2, Size: 2 * PageSize * 8})
	if err != nil {
		t.Fatal(err)
	}
	w := r.Words()
	atomic.StoreUint64(&w[3], 0xfeed)
	atomic.StoreUint64(&w[WordsPerPage+1], 0xbeef)
	if err := (OS{}).Evict(path); !errors.Is(err, ErrBusy) && writesBack(t, dir) {
		t.Fatalf("Evict of a mapped file: %v, want ErrBusy (the mapped pages stay)", err)
	} else if err != nil && !errors.Is(err, ErrBusy) {
		t.Fatalf("Evict of a mapped file: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := (OS{}).Evict(path); err != nil {
		t.Fatalf("Evict: %v", err)
	}
	r, err = OS{}.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if a, b := atomic.LoadUint64(&r.Words()[3]), atomic.LoadUint64(&r.Words()[WordsPerPage+1]); a != 0xfeed || b != 0xbeef {
		t.Fatalf("after Evict the words read %#x, %#x; want 0xfeed, 0xbeef", a, b)
	}
	if err := (OS{}).Evict(filepath.Join(dir, "missing.flt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Evict of a missing file: %v, want fs.ErrNotExist", err)
	}
	fifo := filepath.Join(dir, "fifo.flt")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	if err := (OS{}).Evict(fifo); err == nil {
		t.Fatal("Evict of a FIFO succeeded")
	}
	sub := filepath.Join(dir, "sub.flt")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := (OS{}).Evict(sub); err == nil {
		t.Fatal("Evict of a directory succeeded")
	}
}

// TestOSEvictSyncFailure: Evict of a file whose dirty pages the disk
// cannot take (ext4 on a loop device whose backing tmpfs is full: see
// failingDisk) returns the sync's I/O error, not nil and not ErrBusy: the
// pages were not written, and a caller that dropped them and went on
// would read what the disk holds as if it were the file. (Without the
// sync, the dirty pages would stay cached and Evict would say ErrBusy.)
func TestOSEvictSyncFailure(t *testing.T) {
	mnt := failingDisk(t)
	path := filepath.Join(mnt, "1-0.flt")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i) | 1
	}
	for off := int64(0); off < 16<<20; off += int64(len(buf)) { // more than the tmpfs holds
		if _, err := f.WriteAt(buf, off); err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	err = OS{}.Evict(path)
	t.Logf("Evict: %v", err)
	if !isIOError(err) {
		t.Fatalf("Evict of a file whose write back fails: %v, want an EIO or ENOSPC from its sync", err)
	}
	if errors.Is(err, ErrBusy) {
		t.Fatalf("Evict of a file whose write back fails: %v: ErrBusy hides the I/O error", err)
	}
}
