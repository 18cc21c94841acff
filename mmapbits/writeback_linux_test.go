package mmapbits

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// writesBack reports whether dir's file system is one where a write-back
// request on a descriptor of the file reaches the mapped pages (ext4, XFS,
// Btrfs). On tmpfs there is no write back, and on overlayfs the request
// reaches the overlay's inode, not the file the mapping holds.
func writesBack(t *testing.T, dir string) bool {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC:
		return true
	}
	t.Logf("%s: file system %#x, not one whose write back this test can see: only the requests are checked", dir, st.Type)
	return false
}

// TestStartWriteback: StartWriteback on a file region starts writing the
// range's pages back (their dirty memory in smaps falls to about the
// rest's) but for the 2 MiB part of the file that holds the range's end,
// the request itself succeeds on a file opened read-write, ranges past
// the words are clipped, and a closed or read-only region ignores it. On
// a file system whose write back the test cannot see (tmpfs, overlayfs)
// only the requests are checked.
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
	if writesBack(t, dir) {
		// The first half's 2048 KiB, less the page in the 2 MiB part
		// that holds its end, are written back; the rest stays dirty
		// (the kernel's own write back waits 30 s for it).
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
		if got < before-pages*PageSize/1024/2+4 {
			t.Fatalf("after StartWriteback of half the words, %d KiB dirty (of %d), want the second half's and the page in the 2 MiB part that holds the first half's end", got, before)
		}
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
// one. (Such a disk reports a failure on two Syncs in a row, ENOSPC
// then EIO, so a request that collected the first error would show as
// the second error here rather than as none.)
func TestStartWritebackErrorReachesSync(t *testing.T) {
	var first error // the control's first Sync's errno
	for _, early := range []bool{false, true} {
		// A disk each: the control's writes fill its backing tmpfs, and
		// ext4 may place the next file's first blocks where nothing was
		// written yet (on 16 CPUs it did: the second Create failed with
		// ENOSPC), so the second region would not even be created.
		mnt := failingDisk(t)
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

// ioWriteBytes is the process's write_bytes in /proc/self/io: the bytes
// of page cache it dirtied (a page written back and dirtied again counts
// twice).
func ioWriteBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no write_bytes in /proc/self/io")
	return 0
}

// TestStartWritebackWholeParts: a writer that fills a region 2 MiB of
// words at a time and asks for each to be written back, as a Load's
// publish does, dirties each page of the file once: the 2 MiB part of
// the file holding a range's end (the data start a page into the file)
// is not written back before the writer has finished it, so it is not
// dirtied again. Checked where the mapping gets 2 MiB page-cache pages;
// elsewhere a page is 4 KiB and there is nothing to see.
func TestStartWritebackWholeParts(t *testing.T) {
	dir := t.TempDir()
	if !writesBack(t, dir) {
		return
	}
	const chunk = hugePage / 8 // words
	const chunks = 4
	r, err := OS{}.Create(filepath.Join(dir, "p.flt"), Header{Kind: KindBitmap, DataPages: chunks * hugePage / PageSize, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	words := r.Words()
	addr := uintptr(unsafe.Pointer(&words[0]))
	start := ioWriteBytes(t)
	for c := range uint64(chunks) {
		for i := c * chunk; i < (c+1)*chunk; i++ {
			words[i] = i | 1
		}
		r.(Writebacker).StartWriteback(c*chunk, (c+1)*chunk)
		// Let the write back end, so that a part written back early
		// would be clean, and dirtied again by the next chunk.
		deadline := time.Now().Add(10 * time.Second)
		for dirtyKB(t, addr) > hugePage/1024 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	m, err := smaps.Containing(addr)
	if err != nil {
		t.Fatal(err)
	}
	dirtied := ioWriteBytes(t) - start
	t.Logf("%d KiB of file pages mapped with 2 MiB entries; %d KiB dirtied for %d KiB of data", m.KB["FilePmdMapped"], dirtied/1024, chunks*hugePage/1024)
	if m.KB["FilePmdMapped"] == 0 {
		t.Logf("no 2 MiB page-cache pages here: nothing to check")
		return
	}
	// The data, plus the header page's part: each 2 MiB once.
	if limit := int64(chunks+1) * hugePage; dirtied > limit {
		t.Fatalf("%d bytes of page cache dirtied for %d bytes of data, want at most %d: parts were written back before they were finished", dirtied, chunks*hugePage, limit)
	}
}

// TestStartWritebackRequestError: an I/O error that the write-back
// request itself returns (EIO, ENOSPC, EDQUOT) is returned by the next
// Sync, once; other failures of the request (the file could not be
// opened) are not, since they lose nothing.
func TestStartWritebackRequestError(t *testing.T) {
	was := writeback
	defer func() { writeback = was }()
	r, err := OS{SmallPages: true}.Create(filepath.Join(t.TempDir(), "e.flt"), Header{Kind: KindBitmap, DataPages: 16, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	wb := r.(Writebacker)
	for _, c := range []struct {
		fail  error
		sync  error // what Sync must wrap; nil: no error
		label string
	}{
		{fmt.Errorf("sync_file_range: %w", unix.EIO), unix.EIO, "EIO"},
		{fmt.Errorf("sync_file_range: %w", unix.ENOSPC), unix.ENOSPC, "ENOSPC"},
		{fmt.Errorf("sync_file_range: %w", unix.EDQUOT), unix.EDQUOT, "EDQUOT"},
		{fmt.Errorf("open: %v", unix.EMFILE), nil, "an open failure"},
		{fmt.Errorf("sync_file_range: %w", unix.ENOSYS), nil, "ENOSYS"},
	} {
		calls := 0
		writeback = func(string, int64, int64) error { calls++; return c.fail }
		r.Words()[0] = 1
		wb.StartWriteback(0, r.NumWords())
		wb.StartWriteback(0, r.NumWords()) // a second failure keeps the first
		if calls != 2 {
			t.Fatalf("%s: %d write-back requests made, want 2", c.label, calls)
		}
		writeback = was
		err := r.Sync()
		switch {
		case c.sync == nil && err != nil:
			t.Fatalf("after %s, Sync: %v, want nil", c.label, err)
		case c.sync != nil && !errors.Is(err, c.sync):
			t.Fatalf("after %s, Sync: %v, want an error wrapping it", c.label, err)
		}
		if err := r.Sync(); err != nil {
			t.Fatalf("after %s, a second Sync: %v, want nil (the error returned once)", c.label, err)
		}
	}
}
