package mmapbits

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/filterstore/filterstore/internal/smaps"
	"golang.org/x/sys/unix"
)

// dirtyKB is the dirty memory of the mapping holding addr, in KiB.
func dirtyKB(t *testing.T, addr uintptr) int64 {
	t.Helper()
	m, err := smaps.Containing(addr)
	if err != nil {
		t.Fatal(err)
	}
	return m.KB["Private_Dirty"] + m.KB["Shared_Dirty"]
}

// TestStartWriteback: StartWriteback on a file region starts writing the
// range's pages back (their dirty memory in smaps falls to about the
// rest's), the request itself succeeds on a file opened read-write,
// ranges past the words are clipped, and a closed or read-only region
// ignores it. On a file system without write back (tmpfs) only the
// request is checked.
func TestStartWriteback(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.flt")
	const pages = 1024 // 4 MiB of data
	r, err := OS{SmallPages: true}.Create(path, Header{Kind: KindBitmap, DataPages: pages, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	fr := r.(*fileRegion)
	words := r.Words()
	for i := range words {
		words[i] = uint64(i) | 1
	}
	addr := uintptr(unsafe.Pointer(&words[0]))
	before := dirtyKB(t, addr)
	if before < pages*PageSize/1024 {
		t.Fatalf("after writing every word, %d KiB of the mapping dirty, want at least %d", before, pages*PageSize/1024)
	}
	half := uint64(len(words) / 2)
	if err := fr.startWriteback(0, half); err != nil {
		t.Fatalf("startWriteback of the first half: %v", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		// The first half's 2048 KiB are written back; the rest stays
		// dirty (the kernel's own write back waits 30 s for it).
		want := before - pages*PageSize/1024/2 + 64
		deadline := time.Now().Add(10 * time.Second)
		got := dirtyKB(t, addr)
		for got > want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			got = dirtyKB(t, addr)
		}
		if got > want {
			t.Fatalf("10 s after StartWriteback of half the words, %d KiB dirty (of %d), want at most %d", got, before, want)
		}
	} else {
		t.Logf("%s is a tmpfs: no write back to see", dir)
	}
	if err := fr.startWriteback(half, 1<<40); err != nil {
		t.Fatalf("startWriteback past the end: %v", err)
	}
	r.(Writebacker).StartWriteback(3, 2) // empty: nothing
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fr.startWriteback(0, half); err != nil {
		t.Fatalf("startWriteback on a closed region: %v, want nil", err)
	}
	ro, err := OS{}.OpenRead(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.(*fileRegion).startWriteback(0, half); err != nil {
		t.Fatalf("startWriteback on a read-only region: %v, want nil", err)
	}
	if got, _ := ro.Word(half + 5); got != (half+5)|1 {
		t.Fatalf("word %d reads %#x after the write backs, want %#x", half+5, got, (half+5)|1)
	}
}

// failingDisk mounts an ext4 file system of 64 MiB whose loop device is
// backed by a sparse file on a tmpfs of 6 MiB: blocks the file system
// hands out (fallocate succeeds) fail once written back past the tmpfs's
// room (ENOSPC from the loop device). It skips the test where loop devices, mkfs.ext4 or mounts
// are not available (not root, a container).
func failingDisk(t *testing.T) string {
	t.Helper()
	back := mountTmpfs(t, "6m")
	img := filepath.Join(back, "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", img).Output()
	if err != nil {
		t.Skipf("no loop device (losetup: %v)", err)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-O", "^has_journal", dev).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4 %s: %v: %s", dev, err, out)
	}
	mnt := t.TempDir()
	if err := unix.Mount(dev, mnt, "ext4", 0, "errors=continue"); err != nil {
		t.Skipf("mount %s: %v", dev, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

// TestStartWritebackErrorReachesSync: a write back that StartWriteback
// started and the disk failed is reported by the region's next Sync, even
// when the failure happened before Sync began: the request collects no
// error on the mapping's descriptor. Without that, a Load that published
// its build this way would report success for pages the disk never held.
// The control region, synced without StartWriteback, gives the error a
// first Sync reports; the region written back early must give the same
// one. (This disk reports a failure on two Syncs in a row, ENOSPC then
// EIO, so a request that collected the first error would show as the
// second error here rather than as none.)
func TestStartWritebackErrorReachesSync(t *testing.T) {
	mnt := failingDisk(t)
	var first error // the control's first Sync's errno
	for _, early := range []bool{false, true} {
		path := filepath.Join(mnt, fmt.Sprintf("early-%v.flt", early))
		const pages = 4096 // 16 MiB: more than the tmpfs holds
		r, err := OS{SmallPages: true}.Create(path, Header{Kind: KindBitmap, DataPages: pages, Size: 1})
		if err != nil {
			t.Fatalf("early %v: %v", early, err)
		}
		t.Cleanup(func() { r.Close() }) // before the unmount; a second Close only fails
		words := r.Words()
		for i := range words {
			words[i] = uint64(i) | 1
		}
		if early {
			if err := r.(*fileRegion).startWriteback(0, uint64(len(words))); err != nil {
				t.Fatalf("startWriteback: %v", err)
			}
			// Wait for the write back to end: the pages count as clean
			// once their failed writes completed.
			addr := uintptr(unsafe.Pointer(&words[0]))
			deadline := time.Now().Add(20 * time.Second)
			for dirtyKB(t, addr) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if kb := dirtyKB(t, addr); kb > 0 {
				t.Fatalf("20 s after StartWriteback, %d KiB still dirty", kb)
			}
		}
		err = r.Sync()
		t.Logf("early %v: Sync: %v", early, err)
		var errno unix.Errno
		if !errors.As(err, &errno) {
			t.Fatalf("early %v: Sync after writes the disk failed: %v, want an errno", early, err)
		}
		if !early {
			first = errno
		} else if errno != first {
			t.Fatalf("Sync after an early write back failed with %v, the control's first Sync with %v: the write back's error was collected before Sync", errno, first)
		}
	}
}
