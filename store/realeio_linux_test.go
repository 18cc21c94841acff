package store_test

// Real I/O errors from the block layer (opt-in: FILTERSTORE_REAL_EIO=1, as
// root, with losetup and mkfs.ext4). Every other fault test injects its
// errors through a seam (mmapbits.Sim, wal.MemFS) or stops ext4 with
// EXT4_IOC_SHUTDOWN; these make the kernel itself fail the writes:
//
//	tmpfs (size T) -> sparse image file (size I > T) -> loop device -> ext4
//
// Once the tmpfs is full (a filler file takes what is left), every write
// the loop device makes to a block of the image never written before fails
// ("critical space allocation error": ENOSPC from the loop device, which
// ext4 reports on fsync, msync and fdatasync as ENOSPC, then EIO). Blocks
// written before are rewritten fine, so what fails is what a real failing
// disk fails: some writes, not all. ext4 prints "failed to convert
// unwritten extents to written extents -- potential data loss" for a
// preallocated extent (a layer file's) whose write-back failed. Two
// journal setups:
//
//   - "backed": mkfs writes the journal and inode tables up front
//     (-E nodiscard,lazy_itable_init=0,lazy_journal_init=0), so the
//     journal never fails, the file system stays writable and only data
//     write-backs fail;
//   - "lazy": mkfs's defaults: the journal's blocks were never written, so
//     the first commit after the tmpfs fills aborts the journal and ext4
//     remounts itself read-only (emergency_ro).
//
// The device is "fixed" by removing the filler. The test then reopens the
// store in place (the page cache as the failure left it: RESYNC's path),
// where the file system is still writable, and again after an unmount and
// a mount (the page cache gone: only what reached the image counts), and
// checks that every acknowledged key is present, that no call was
// acknowledged after one failed with ErrFailed, and that cmd/inspect's
// verify, wal and check agree.
//
//	FILTERSTORE_REAL_EIO=1 go test -count=1 -run 'RealEIO' -v ./store/
//
// FILTERSTORE_SEED=N replays a run's random choices (sizes of AddMany
// chunks, keys); the moment the kernel fails a write still depends on the
// machine. FILTERSTORE_REAL_EIO_CASE=substring runs only the cases whose
// name contains it. FILTERSTORE_REAL_EIO_DEBUG=1 logs each checkpoint and
// compares the layer files' page cache with the device (O_DIRECT) after
// it; FILTERSTORE_REAL_EIO_NOINPLACE=1 skips the reopen in place;
// FILTERSTORE_REAL_EIO_SMALLPAGES=1 sets Options.SmallPages.
//
// The loop device's requests are limited to one 4 KiB block
// (queue/max_sectors_kb of the test's own loop device). Without that
// (FILTERSTORE_REAL_EIO_BIGREQ=1) the method is unsound on Linux 6.18: a
// request that spans a block the tmpfs holds and blocks it cannot take is
// a short write of the backing file, which the loop driver completes as
// a success, so msync and fdatasync return nil for pages that never
// reached the image, and ext4 even converts their unwritten extents
// (TestRealEIOKernelShortWrite shows it without a store; the store then
// "loses" keys no program could have kept).

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/filterstore/filterstore/internal/smaps"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/store"
	"golang.org/x/sys/unix"
)

const (
	reEnv     = "FILTERSTORE_REAL_EIO"
	reEnvCase = "FILTERSTORE_REAL_EIO_CASE"
)

func reRequire(t *testing.T) {
	t.Helper()
	if os.Getenv(reEnv) != "1" {
		t.Skipf("opt-in: set %s=1 to fail real writes under a store (root, losetup, mkfs.ext4, tmpfs)", reEnv)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("%s=1: these tests must run as root", reEnv)
	}
	for _, tool := range []string{"mkfs.ext4", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s=1: %s not found: %v", reEnv, tool, err)
		}
	}
}

// reDisk is an ext4 file system on a loop device whose image is a sparse
// file larger than the tmpfs that holds it.
type reDisk struct {
	t               *testing.T
	back, img, mnt  string
	loop            string
	filler          string
	backUp, mounted bool
	journal         string
	dmesgMark       int
}

func newReDisk(t *testing.T, tmpfsMB, imgMB int, journal string) *reDisk {
	t.Helper()
	d := &reDisk{t: t, journal: journal}
	root := t.TempDir()
	d.back = filepath.Join(root, "back")
	d.mnt = filepath.Join(root, "mnt")
	for _, p := range []string{d.back, d.mnt} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("none", d.back, "tmpfs", 0, fmt.Sprintf("size=%dm", tmpfsMB)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	d.backUp = true
	t.Cleanup(d.cleanup)
	d.img = filepath.Join(d.back, "ext4.img")
	d.filler = filepath.Join(d.back, "filler")
	if err := os.WriteFile(d.img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(d.img, int64(imgMB)<<20); err != nil {
		t.Fatal(err)
	}
	args := []string{"-q", "-F"}
	if journal == "backed" {
		args = append(args, "-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0")
	}
	if out, err := exec.Command("mkfs.ext4", append(args, d.img)...).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if journal == "backed" {
		d.backMetadata()
	}
	out, err := exec.Command("losetup", "--find", "--show", d.img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	d.loop = strings.TrimSpace(string(out))
	if os.Getenv("FILTERSTORE_REAL_EIO_BIGREQ") == "" {
		// One page per request: the loop device completes a short write
		// of its backing file as a success (TestRealEIOKernelShortWrite),
		// so a request that spans a block the tmpfs holds and one it
		// cannot take would lose the second without an error. A request
		// of one 4 KiB block is written whole or fails.
		q := filepath.Join("/sys/block", filepath.Base(d.loop), "queue", "max_sectors_kb")
		if err := os.WriteFile(q, []byte("4"), 0); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	d.mount()
	d.dmesgMark = len(d.dmesg())
	return d
}

// backMetadata rewrites, in place, every block of the image that mkfs
// did not leave free (superblocks, group descriptors, bitmaps, inode
// tables, the journal): mkfs zeroes them with fallocate on an image file,
// which on tmpfs leaves holes, and a hole's first write is what fails
// once the tmpfs is full. Afterwards only blocks ext4 allocates later
// (file data, new directory and extent blocks) can fail.
func (d *reDisk) backMetadata() {
	t := d.t
	out, err := exec.Command("dumpe2fs", d.img).Output()
	if err != nil {
		t.Fatalf("dumpe2fs: %v", err)
	}
	var blocks, bsize int64
	type span struct{ lo, hi int64 }
	var free []span
	for line := range strings.SplitSeq(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "Block count:"); ok {
			fmt.Sscan(strings.TrimSpace(v), &blocks)
		}
		if v, ok := strings.CutPrefix(line, "Block size:"); ok {
			fmt.Sscan(strings.TrimSpace(v), &bsize)
		}
		if v, ok := strings.CutPrefix(line, "  Free blocks: "); ok {
			for r := range strings.SplitSeq(v, ", ") {
				var sp span
				if n, _ := fmt.Sscanf(r, "%d-%d", &sp.lo, &sp.hi); n == 2 {
					free = append(free, sp)
				} else if n, _ := fmt.Sscanf(r, "%d", &sp.lo); n == 1 {
					sp.hi = sp.lo
					free = append(free, sp)
				}
			}
		}
	}
	if blocks == 0 || bsize == 0 || len(free) == 0 {
		t.Fatalf("dumpe2fs: cannot parse: blocks %d, size %d, %d free ranges", blocks, bsize, len(free))
	}
	f, err := os.OpenFile(d.img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, bsize)
	touched := 0
	next := int64(0)
	touch := func(lo, hi int64) { // blocks lo..hi-1
		for b := lo; b < hi; b++ {
			if _, err := f.ReadAt(buf, b*bsize); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(buf, b*bsize); err != nil {
				t.Fatal(err)
			}
			touched++
		}
	}
	for _, sp := range free {
		touch(next, sp.lo)
		next = sp.hi + 1
	}
	touch(next, blocks)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("backed %d metadata blocks of %d", touched, blocks)
}

func (d *reDisk) mount() {
	d.t.Helper()
	if err := unix.Mount(d.loop, d.mnt, "ext4", 0, ""); err != nil {
		d.t.Fatalf("mount %s: %v", d.loop, err)
	}
	d.mounted = true
}

func (d *reDisk) unmount() error {
	var err error
	for range 100 {
		if err = unix.Unmount(d.mnt, 0); err == nil {
			d.mounted = false
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("unmount %s: %w", d.mnt, err)
}

func (d *reDisk) cleanup() {
	t := d.t
	if d.mounted {
		if err := d.unmount(); err != nil {
			t.Errorf("cleanup: %v", err)
			unix.Unmount(d.mnt, unix.MNT_DETACH)
		}
	}
	if d.loop != "" {
		if out, err := exec.Command("losetup", "--detach", d.loop).CombinedOutput(); err != nil {
			t.Errorf("cleanup: losetup --detach %s: %v: %s", d.loop, err, out)
		}
	}
	if d.backUp {
		if err := unix.Unmount(d.back, 0); err != nil {
			t.Errorf("cleanup: unmount %s: %v", d.back, err)
			unix.Unmount(d.back, unix.MNT_DETACH)
		}
	}
}

// fill takes every free block of the tmpfs: from now on, each write of the
// loop device to a block of the image never written before fails.
func (d *reDisk) fill() {
	d.t.Helper()
	f, err := os.OpenFile(d.filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for _, n := range []int{1 << 20, 4096} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					d.t.Fatalf("fill: %v", err)
				}
				break
			}
		}
	}
}

// unfill removes the filler: the device works again.
func (d *reDisk) unfill() {
	d.t.Helper()
	if err := os.Remove(d.filler); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.t.Fatal(err)
	}
}

// remount unmounts and mounts again: ext4 replays its journal, the page
// cache starts empty.
func (d *reDisk) remount() {
	d.t.Helper()
	if err := d.unmount(); err != nil {
		d.t.Fatal(err)
	}
	d.mount()
}

// readOnly reports whether ext4 remounted itself read-only.
func (d *reDisk) readOnly() bool {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		d.t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[1] == d.mnt {
			for _, o := range strings.Split(f[3], ",") {
				if o == "ro" || o == "emergency_ro" {
					return true
				}
			}
		}
	}
	return false
}

// dmesg returns the kernel's lines about this loop device.
func (d *reDisk) dmesg() []string {
	out, err := exec.Command("dmesg").Output()
	if err != nil {
		return nil
	}
	name := filepath.Base(d.loop)
	var ls []string
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.Contains(line, name+")") || strings.Contains(line, name+":") || strings.Contains(line, "dev "+name+",") || strings.Contains(line, name+"-8") {
			ls = append(ls, line)
		}
	}
	return ls
}

// kernelSummary counts the kernel's messages about the device since it
// was made.
func (d *reDisk) kernelSummary() string {
	ls := d.dmesg()
	if d.dmesgMark < len(ls) {
		ls = ls[d.dmesgMark:]
	} else {
		ls = nil
	}
	var space, convert, abort, ro, other int
	for _, l := range ls {
		switch {
		case strings.Contains(l, "critical space allocation"):
			space++
		case strings.Contains(l, "failed to convert unwritten"):
			convert++
		case strings.Contains(l, "Aborting journal"):
			abort++
		case strings.Contains(l, "read-only"):
			ro++
		default:
			other++
		}
	}
	return fmt.Sprintf("kernel: %d failed loop writes, %d failed unwritten-extent conversions, %d journal aborts, %d read-only remounts, %d other lines", space, convert, abort, ro, other)
}

// TestRealEIOKernelBehaviour records what this kernel does with a failed
// write-back of a mapped page of a preallocated file: what msync returns,
// twice; whether the page stays dirty (smaps); what the mapping reads;
// what it reads once the page is dropped from the cache.
func TestRealEIOKernelBehaviour(t *testing.T) {
	reRequire(t)
	d := newReDisk(t, 48, 256, "backed")
	const size = 4 << 20
	f, err := os.Create(filepath.Join(d.mnt, "m"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	d.fill()
	for i := range m {
		m[i] = 0xa5
	}
	addr := uintptr(unsafe.Pointer(&m[0]))
	dirty := func() int64 {
		mp, err := smaps.Containing(addr)
		if err != nil {
			t.Fatal(err)
		}
		return mp.KB["Shared_Dirty"] + mp.KB["Private_Dirty"]
	}
	t.Logf("dirty before msync: %d KiB", dirty())
	err1 := unix.Msync(m, unix.MS_SYNC)
	t.Logf("msync 1: %v; dirty after: %d KiB; first byte %#x", err1, dirty(), m[0])
	err2 := unix.Msync(m, unix.MS_SYNC)
	t.Logf("msync 2: %v; fsync: %v", err2, f.Sync())
	d.unfill()
	if err := unix.Fadvise(int(f.Fd()), 0, size, unix.FADV_DONTNEED); err != nil {
		t.Logf("fadvise: %v", err)
	}
	if mp, err := smaps.Containing(addr); err == nil {
		t.Logf("after DONTNEED (mapping still mapped): %d KiB resident, %d KiB dirty; first byte %#x", mp.KB["Rss"], mp.KB["Shared_Dirty"]+mp.KB["Private_Dirty"], m[0])
	}
	unix.Munmap(m)
	m = nil
	unix.Fadvise(int(f.Fd()), 0, size, unix.FADV_DONTNEED)
	buf := make([]byte, 4096)
	f.ReadAt(buf, 0)
	t.Logf("after unmap and DONTNEED, the file's first byte reads %#x (0xa5: the page survived in the cache or on disk; 0: dropped, the extent unwritten)", buf[0])
	f.Close()
	d.remount()
	b, _ := os.ReadFile(filepath.Join(d.mnt, "m"))
	t.Logf("after remount: first byte %#x", b[0])
	t.Log(d.kernelSummary())
	if err1 == nil {
		t.Errorf("msync of pages whose write-back failed returned nil")
	}
}

// reCase is one run: a filter kind, a sync mode, a journal setup, and the
// moment the device starts failing.
type reCase struct {
	kind     string // bloom, bloomfixed, cuckoo, counting, bitmap
	interval bool
	journal  string // backed, lazy
	at       string // steady, checkpoint, auto, load, loadparallel, grow, close, batch
}

func (c reCase) name() string {
	m := "always"
	if c.interval {
		m = "interval"
	}
	return fmt.Sprintf("%s/%s/%s/%s", c.kind, m, c.journal, c.at)
}

// reFilter adapts a filter kind: add acknowledges all the keys or none.
type reFilter struct {
	add  func(keys [][]byte) error
	has  func(key []byte) bool
	load func(parallel bool, keys iter.Seq2[[]byte, error]) error // nil: no Load
}

const reBitmapBits = 1 << 22

func reOpenFilter(s *store.Store, kind, name string, create bool) (*reFilter, error) {
	switch kind {
	case "bloom", "bloomfixed":
		var b *store.Bloom
		var err error
		if create {
			cfg := store.BloomConfig{Capacity: 20_000, Expansion: 2}
			if kind == "bloomfixed" {
				cfg = store.BloomConfig{Capacity: 2_000_000, NonScaling: true}
			}
			b, err = s.CreateBloom(name, cfg)
		} else {
			b, err = s.Bloom(name)
		}
		if err != nil {
			return nil, err
		}
		return &reFilter{
			add: func(ks [][]byte) error { _, err := b.AddMany(ks); return err },
			has: b.Has,
			load: func(p bool, ks iter.Seq2[[]byte, error]) error {
				if p {
					return b.LoadParallel(ks, reNone)
				}
				return b.Load(ks)
			},
		}, nil
	case "cuckoo":
		var c *store.Cuckoo
		var err error
		if create {
			c, err = s.CreateCuckoo(name, store.CuckooConfig{Capacity: 20_000, Expansion: 2})
		} else {
			c, err = s.Cuckoo(name)
		}
		if err != nil {
			return nil, err
		}
		return &reFilter{
			add: func(ks [][]byte) error { _, err := c.AddMany(ks); return err },
			has: c.Has,
			load: func(p bool, ks iter.Seq2[[]byte, error]) error {
				if p {
					return c.LoadParallel(ks, reNone)
				}
				return c.Load(ks)
			},
		}, nil
	case "counting":
		var n *store.Counting
		var err error
		if create {
			n, err = s.CreateCounting(name, store.BloomConfig{Capacity: 500_000})
		} else {
			n, err = s.Counting(name)
		}
		if err != nil {
			return nil, err
		}
		return &reFilter{
			add: func(ks [][]byte) error { _, err := n.AddMany(ks); return err },
			has: n.Has,
			load: func(p bool, ks iter.Seq2[[]byte, error]) error {
				if p {
					return n.LoadParallel(ks, reNone)
				}
				return n.Load(ks)
			},
		}, nil
	case "bitmap":
		var m *store.Bitmap
		var err error
		if create {
			m, err = s.CreateBitmap(name, reBitmapBits)
		} else {
			m, err = s.Bitmap(name)
		}
		if err != nil {
			return nil, err
		}
		off := func(k []byte) uint64 { return store.Hash(k) % reBitmapBits }
		return &reFilter{
			add: func(ks [][]byte) error {
				offs := make([]uint64, len(ks))
				for i, k := range ks {
					offs[i] = off(k)
				}
				_, err := m.SetMany(offs)
				return err
			},
			has: func(k []byte) bool { return m.Get(off(k)) },
		}, nil
	}
	panic(kind)
}

func reNone(yield func([]byte, error) bool) {}

// reRun is the state of one case.
type reRun struct {
	t        *testing.T
	c        reCase
	rng      *rand.Rand
	seed     uint64
	d        *reDisk
	dir      string
	acked    map[string][][]byte // filter -> acknowledged keys
	durable  map[string]int      // filter -> how many of acked a successful Checkpoint made durable (SyncInterval)
	failedAt string              // the first call that returned an error wrapping ErrFailed
	next     int
	bad      []string
	notes    []string
	loaded   map[string]bool // a Load returned nil
	loadKeys map[string][][]byte
	seen     map[string]int // notes of errors not wrapping ErrFailed, counted
}

func (r *reRun) keys(n int) [][]byte {
	ks := make([][]byte, n)
	for i := range ks {
		ks[i] = fmt.Appendf(nil, "k%d-%d", r.seed, r.next)
		r.next++
	}
	return ks
}

func (r *reRun) errorf(format string, args ...any) {
	r.bad = append(r.bad, fmt.Sprintf(format, args...))
}

func (r *reRun) notef(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// call records a mutating call's outcome: ok if it returned nil. After a
// call failed with ErrFailed, nil is a violation.
func (r *reRun) call(what string, err error) bool {
	if err == nil {
		if r.failedAt != "" {
			r.errorf("ACK AFTER FAILURE: %s returned nil after %s", what, r.failedAt)
		}
		return true
	}
	if errors.Is(err, store.ErrFailed) {
		if r.failedAt == "" {
			r.failedAt = fmt.Sprintf("%s: %v", what, err)
		}
	} else {
		msg := fmt.Sprintf("error not wrapping ErrFailed: %v", err)
		if r.seen[msg] == 0 {
			r.notef("%s: %s", what, msg)
		}
		r.seen[msg]++
	}
	return false
}

func (r *reRun) add(f *reFilter, name string, n int) bool {
	ks := r.keys(n)
	if r.call(fmt.Sprintf("add %d keys to %s", n, name), f.add(ks)) {
		r.acked[name] = append(r.acked[name], ks...)
		return true
	}
	return false
}

func (r *reRun) checkpoint() bool {
	err := r.s().Checkpoint()
	if os.Getenv("FILTERSTORE_REAL_EIO_DEBUG") != "" {
		r.t.Logf("checkpoint at %d keys of f: %v (tmpfs free %d KiB)", len(r.acked["f"]), err, reStatfsFree(r.t, r.d.back)>>10)
	}
	if os.Getenv("FILTERSTORE_REAL_EIO_DEBUG") != "" {
		r.cmpDirect()
	}
	if r.call("Checkpoint", err) {
		for name, ks := range r.acked {
			r.durable[name] = len(ks)
		}
		return true
	}
	return false
}

var reStore *store.Store

func (r *reRun) s() *store.Store { return reStore }

func (r *reRun) opts() *store.Options {
	o := &store.Options{CheckpointEvery: time.Hour, SegmentSize: 1 << 20, SmallPages: os.Getenv("FILTERSTORE_REAL_EIO_SMALLPAGES") != ""}
	if r.c.at == "auto" {
		o.CheckpointEvery = 20 * time.Millisecond
		o.CheckpointBytes = 64 << 10
	}
	if r.c.interval {
		o.Sync = store.SyncInterval
		o.SyncEvery = 5 * time.Millisecond
	}
	return o
}

var reInspect struct {
	once sync.Once
	path string
	err  error
}

func reInspectBin(t *testing.T) string {
	reInspect.once.Do(func() {
		dir, err := os.MkdirTemp("", "realeio-inspect")
		if err != nil {
			reInspect.err = err
			return
		}
		reInspect.path = filepath.Join(dir, "inspect")
		out, err := exec.Command("go", "build", "-o", reInspect.path, "github.com/filterstore/filterstore/cmd/inspect").CombinedOutput()
		if err != nil {
			reInspect.err = fmt.Errorf("go build ./cmd/inspect: %v: %s", err, out)
		}
	})
	if reInspect.err != nil {
		t.Fatal(reInspect.err)
	}
	return reInspect.path
}

func reCases() []reCase {
	var cs []reCase
	for _, kind := range []string{"bloom", "bloomfixed", "cuckoo", "counting", "bitmap"} {
		for _, interval := range []bool{false, true} {
			for _, journal := range []string{"backed", "lazy"} {
				for _, at := range []string{"steady", "fresh", "checkpoint", "auto", "load", "loadparallel", "grow", "close", "batch"} {
					if (at == "load" || at == "loadparallel") && kind == "bitmap" {
						continue
					}
					if at == "grow" && kind != "bloom" && kind != "cuckoo" {
						continue
					}
					cs = append(cs, reCase{kind, interval, journal, at})
				}
			}
		}
	}
	return cs
}

// TestRealEIO runs every case of reCases on a disk of its own.
func TestRealEIO(t *testing.T) {
	reRequire(t)
	seed := testseed.Seed(t)
	only := os.Getenv(reEnvCase)
	reInspectBin(t)
	for i, c := range reCases() {
		if only != "" && !strings.Contains(c.name(), only) {
			continue
		}
		t.Run(c.name(), func(t *testing.T) {
			r := &reRun{t: t, c: c, seed: seed + uint64(i), acked: map[string][][]byte{}, durable: map[string]int{}, loaded: map[string]bool{}, loadKeys: map[string][][]byte{}, seen: map[string]int{}}
			r.rng = rand.New(rand.NewPCG(r.seed, 7))
			r.run()
			for _, n := range r.notes {
				t.Log(n)
			}
			for m, n := range r.seen {
				if n > 1 {
					t.Logf("(%d times) %s", n, m)
				}
			}
			for _, b := range r.bad {
				t.Error(b)
			}
			if len(r.bad) > 0 {
				t.Logf("replay: FILTERSTORE_SEED=%d %s=1 %s=%s go test -count=1 -run 'TestRealEIO$' -v ./store/", seed, reEnv, reEnvCase, c.name())
			}
		})
	}
}

func (r *reRun) run() {
	t := r.t
	r.d = newReDisk(t, 48, 512, r.c.journal)
	r.dir = filepath.Join(r.d.mnt, "db")
	s, err := store.Open(r.dir, r.opts())
	if err != nil {
		t.Fatal(err)
	}
	reStore = s
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	f, err := reOpenFilter(s, r.c.kind, "f", true)
	if err != nil {
		t.Fatal(err)
	}
	var g *reFilter // a second filter of another kind (batch)
	var gb *store.Bloom
	var gc *store.Cuckoo
	if r.c.at == "batch" {
		if gb, err = s.CreateBloom("gb", store.BloomConfig{Capacity: 100_000}); err != nil {
			t.Fatal(err)
		}
		if gc, err = s.CreateCuckoo("gc", store.CuckooConfig{Capacity: 100_000}); err != nil {
			t.Fatal(err)
		}
		g = &reFilter{has: gb.Has}
	}
	// Phase A: acknowledged keys, checkpointed.
	n0 := 5000
	switch r.c.at {
	case "grow":
		n0 = 15_000 // near the first layer's capacity (20,000)
	case "fresh":
		n0 = 200 // most of the layer's pages never written: their write-backs fail
	}
	for r.next < n0 {
		if !r.add(f, "f", 1+r.rng.IntN(500)) {
			t.Fatalf("phase A: %v", r.bad)
		}
	}
	if !r.checkpoint() {
		t.Fatalf("phase A checkpoint: %s", r.failedAt)
	}
	// More acknowledged keys, dirtying pages the checkpoint wrote: this
	// part of the image is backed, its rewrites succeed.
	for range 20 * min(1, n0/1000) {
		r.add(f, "f", 1+r.rng.IntN(50))
	}
	usedBefore := reStatfsUsed(t, r.d.back)
	switch r.c.at {
	case "steady", "fresh", "auto", "grow":
		r.d.fill()
		for i := 0; i < 400 && r.failedAt == ""; i++ {
			n := 1 + r.rng.IntN(200)
			if r.c.at == "grow" {
				n = 100 + r.rng.IntN(400)
			}
			r.add(f, "f", n)
			if (r.c.at == "steady" || r.c.at == "fresh") && i%50 == 49 {
				r.checkpoint()
			}
		}
		if r.failedAt == "" {
			r.checkpoint()
		}
	case "checkpoint":
		r.d.fill()
		for range 5 {
			r.add(f, "f", 100)
		}
		r.checkpoint()
	case "load", "loadparallel":
		lf, err := reOpenFilter(s, r.c.kind, "l", true)
		if err != nil {
			t.Fatal(err)
		}
		const total = 300_000
		lks := r.keys(total)
		r.loadKeys["l"] = lks
		filled := false
		seq := func(yield func([]byte, error) bool) {
			for i, k := range lks {
				if i == total/2 && !filled {
					filled = true
					r.d.fill()
				}
				if !yield(k, nil) {
					return
				}
			}
		}
		if r.call("Load", lf.load(r.c.at == "loadparallel", seq)) {
			r.loaded["l"] = true
			r.notef("Load returned nil")
		}
		for range 5 {
			r.add(f, "f", 50)
		}
		r.checkpoint()
	case "close":
		for range 5 {
			r.add(f, "f", 300)
		}
		r.d.fill()
		for range 5 {
			r.add(f, "f", 300)
		}
	case "batch":
		r.d.fill()
		for i := 0; i < 300 && r.failedAt == ""; i++ {
			ks := r.keys(1 + r.rng.IntN(50))
			bt := s.NewBatch()
			for _, k := range ks {
				bt.BloomAdd(gb, k)
				bt.CuckooAdd(gc, k)
			}
			_, err := bt.Commit()
			if r.call("Batch.Commit", err) {
				r.acked["gb"] = append(r.acked["gb"], ks...)
				r.acked["gc"] = append(r.acked["gc"], ks...)
			}
			r.add(f, "f", 10)
		}
		if r.failedAt == "" {
			r.checkpoint()
		}
	}
	r.notef("tmpfs used %d KiB before the fault", usedBefore>>10)
	if r.failedAt == "" {
		r.notef("no call failed with ErrFailed before Close")
	}
	// After the failure: every mutation must fail; acknowledged keys
	// must be present.
	if r.failedAt != "" {
		for range 3 {
			r.add(f, "f", 5)
		}
		r.checkpoint()
		if _, err := s.CreateBloom("after", store.BloomConfig{}); err == nil {
			r.errorf("ACK AFTER FAILURE: CreateBloom returned nil after %s", r.failedAt)
		}
	}
	r.checkPresent("in the failed process", map[string]*reFilter{"f": f, "gb": g, "gc": nil}, false)
	cerr := s.Close()
	closed = true
	r.notef("Close: %v", cerr)
	if r.failedAt == "" && cerr == nil && r.c.at == "close" {
		r.notef("Close returned nil on the full device")
	}
	if r.failedAt != "" && cerr == nil {
		r.errorf("ACK AFTER FAILURE: Close returned nil after %s", r.failedAt)
	}
	if cerr != nil && r.failedAt == "" {
		r.failedAt = "Close: " + cerr.Error()
	}
	ro := r.d.readOnly()
	r.notef("file system read-only after the fault: %v; %s", ro, r.d.kernelSummary())
	if os.Getenv("FILTERSTORE_REAL_EIO_DEBUG") != "" {
		out, _ := exec.Command("sh", "-c", "ls -liR "+r.dir+"; filefrag -v "+r.dir+"/filters/*.flt").CombinedOutput()
		t.Logf("files after the fault:\n%s", out)
	}
	r.d.unfill()
	strict := !r.c.interval
	if !ro && os.Getenv("FILTERSTORE_REAL_EIO_NOINPLACE") == "" {
		// In place: the page cache as the failure left it.
		r.reopen("in place", true)
		strict = true // the in-place Open rewrote what it replayed
	}
	if ro {
		// What an Open in place does on the file system ext4 made
		// read-only (recorded, not judged: it cannot write).
		if s2, err := store.Open(r.dir, r.opts()); err == nil {
			r.notef("Open in place on the read-only file system succeeded")
			s2.Close()
		} else {
			r.notef("Open in place on the read-only file system: %v", err)
		}
	}
	r.d.remount()
	r.reopen("after remount", strict)
	r.inspect(strict)
}

// reopen opens the store, checks every acknowledged key (all of them with
// strict, else those a successful Checkpoint made durable, counting the
// others lost), runs Check, and closes.
func (r *reRun) reopen(when string, strict bool) {
	s, err := store.Open(r.dir, r.opts())
	if err != nil {
		r.errorf("Open %s: %v", when, err)
		return
	}
	reStore = s
	defer func() {
		if err := s.Close(); err != nil {
			r.errorf("Close after Open %s: %v", when, err)
		}
	}()
	fs := map[string]*reFilter{}
	for name := range r.acked {
		kind := r.c.kind
		switch name {
		case "gb":
			kind = "bloom"
		case "gc":
			kind = "cuckoo"
		}
		f, err := reOpenFilter(s, kind, name, false)
		if err != nil {
			r.errorf("%s: filter %s: %v", when, name, err)
			continue
		}
		fs[name] = f
	}
	r.checkPresentIn(when, fs, strict)
	if lks := r.loadKeys["l"]; lks != nil {
		infos, _ := s.List()
		for _, in := range infos {
			if in.Name == "l" {
				r.notef("%s: loaded filter l: %s %s, %d items", when, in.State, in.Reason, in.Items)
				if r.loaded["l"] {
					if in.State != "ok" {
						r.errorf("LOST: %s: Load returned nil, filter l is %s (%s)", when, in.State, in.Reason)
					} else if lf, err := reOpenFilter(s, r.c.kind, "l", false); err == nil {
						missing := 0
						for _, k := range lks {
							if !lf.has(k) {
								missing++
							}
						}
						if missing > 0 {
							r.errorf("LOST: %s: %d of %d keys of a Load that returned nil are absent", when, missing, len(lks))
						}
					}
				}
			}
		}
	}
	rep, err := s.Check()
	if err != nil {
		r.errorf("%s: Check: %v", when, err)
	} else if rep != nil && len(rep.Problems) > 0 {
		r.errorf("%s: Check: %+v", when, rep)
	}
}

func (r *reRun) checkPresent(when string, fs map[string]*reFilter, strict bool) {
	delete(fs, "gc")
	if fs["gb"] == nil {
		delete(fs, "gb")
	}
	r.checkPresentIn(when, fs, true)
}

func (r *reRun) checkPresentIn(when string, fs map[string]*reFilter, strict bool) {
	for name, f := range fs {
		ks := r.acked[name]
		lim := len(ks)
		if !strict {
			lim = r.durable[name]
		}
		missing, first := 0, -1
		for i, k := range ks[:lim] {
			if !f.has(k) {
				if first < 0 {
					first = i
				}
				missing++
			}
		}
		if missing > 0 {
			r.errorf("LOST ACKNOWLEDGED KEYS: %s: filter %s: %d of %d acknowledged keys absent (first: #%d %q; %d were checkpointed)", when, name, missing, lim, first, ks[first], r.durable[name])
		}
		if !strict {
			lost := 0
			for _, k := range ks[lim:] {
				if !f.has(k) {
					lost++
				}
			}
			r.notef("%s: filter %s: %d of the %d keys acknowledged after the last checkpoint lost (allowed under SyncInterval)", when, name, lost, len(ks)-lim)
		}
	}
}

// inspect runs cmd/inspect's verify and wal on the store, and check on a
// few acknowledged keys of f.
func (r *reRun) inspect(strict bool) {
	bin := reInspectBin(r.t)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		return out.String(), code
	}
	if out, code := run("verify", r.dir); code != 0 {
		r.errorf("inspect verify: exit %d:\n%s", code, reTail(out))
	}
	if out, code := run("wal", r.dir); code != 0 {
		r.errorf("inspect wal: exit %d:\n%s", code, reTail(out))
	}
	ks := r.acked["f"]
	if !strict {
		ks = ks[:r.durable["f"]]
	}
	if len(ks) > 0 {
		args := []string{"check", r.dir, "f"}
		for _, i := range []int{0, len(ks) / 2, len(ks) - 1} {
			args = append(args, string(ks[i]))
		}
		if r.c.kind == "bitmap" {
			return // check takes keys, a bitmap offsets
		}
		out, code := run(args...)
		if code != 0 || reSaysNo(out) {
			r.errorf("inspect check: exit %d:\n%s", code, reTail(out))
		}
	}
}

// reSaysNo reports an answer "no" in inspect check's output.
func reSaysNo(out string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		for _, f := range strings.Fields(line) {
			if f == "no" {
				return true
			}
		}
	}
	return false
}

func reTail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

func reStatfsFree(t *testing.T, dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bfree) * st.Bsize
}

func reStatfsUsed(t *testing.T, dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// TestRealEIOKernelRewrite is the control: a mapped file whose every page
// was written and msynced before the tmpfs filled is rewritten, msynced,
// rewritten and msynced again once it is full; after a remount it must
// read the last msynced contents (its blocks are all backed: no write
// of it can fail).
func TestRealEIOKernelRewrite(t *testing.T) {
	reRequire(t)
	d := newReDisk(t, 48, 512, "backed")
	const size = 665 * 4096
	path := filepath.Join(d.mnt, "m")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if m != nil {
			unix.Munmap(m)
		}
	}()
	write := func(v byte, every int) {
		for p := 0; p < size/4096; p += every {
			m[p*4096+100] = v
		}
		if err := unix.Msync(m, unix.MS_SYNC); err != nil {
			t.Fatalf("msync after writing %#x: %v", v, err)
		}
	}
	write(1, 1)
	d.fill()
	write(2, 1)
	write(3, 3)
	write(4, 7)
	want := make([]byte, size/4096)
	for p := range want {
		want[p] = m[p*4096+100]
	}
	unix.Munmap(m)
	m = nil
	f.Close()
	d.remount()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for p := range want {
		if got[p*4096+100] != want[p] {
			if bad < 5 {
				t.Errorf("page %d reads %#x, msynced %#x", p, got[p*4096+100], want[p])
			}
			bad++
		}
	}
	t.Logf("%d of %d pages differ; %s", bad, len(want), d.kernelSummary())
}

// cmpDirect compares each layer file's page cache with what the device
// holds (O_DIRECT), page by page, and logs the pages that differ.
func (r *reRun) cmpDirect() {
	paths, _ := filepath.Glob(filepath.Join(r.dir, "filters", "*.flt"))
	for _, p := range paths {
		cached, err := os.ReadFile(p)
		if err != nil {
			r.t.Logf("cmpDirect %s: %v", p, err)
			continue
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
		if err != nil {
			r.t.Logf("cmpDirect %s: %v", p, err)
			continue
		}
		mem, _ := unix.Mmap(-1, 0, len(cached)+4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		n, err := unix.Pread(fd, mem[:(len(cached)+4095)&^4095], 0)
		unix.Close(fd)
		var diff []int
		for pg := 0; pg*4096 < min(n, len(cached)); pg++ {
			if !bytes.Equal(cached[pg*4096:min((pg+1)*4096, len(cached))], mem[pg*4096:min((pg+1)*4096, len(cached))]) {
				diff = append(diff, pg)
			}
		}
		unix.Munmap(mem)
		r.t.Logf("cmpDirect %s: read %d (%v); %d pages differ from the cache: %v", filepath.Base(p), n, err, len(diff), diff[:min(len(diff), 30)])
	}
}

// TestRealEIOKernelRewriteBeside is TestRealEIOKernelRewrite with writes
// to another file beside it that fail (new blocks, appended and
// fdatasynced), as a store's WAL makes: after each successful msync of
// the backed file, the device (O_DIRECT) must hold what the cache does.
func TestRealEIOKernelRewriteBeside(t *testing.T) {
	reRequire(t)
	d := newReDisk(t, 48, 512, "backed")
	const size = 665 * 4096
	path := filepath.Join(d.mnt, "m")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	rng := rand.New(rand.NewPCG(1, 2))
	for p := 0; p < size/4096; p++ {
		m[p*4096+100] = 1
	}
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	side, err := os.Create(filepath.Join(d.mnt, "side"))
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	d.fill()
	buf := make([]byte, 64<<10)
	direct := make([]byte, size+4096)
	dm, _ := unix.Mmap(-1, 0, len(direct), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	defer unix.Munmap(dm)
	total := 0
	for round := range 20 {
		for range 300 {
			p := rng.IntN(size / 4096)
			m[p*4096+100+rng.IntN(3000)]++
		}
		side.Write(buf)
		serr := side.Sync()
		merr := unix.Msync(m, unix.MS_SYNC)
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT, 0)
		if err != nil {
			t.Fatal(err)
		}
		n, err := unix.Pread(fd, dm[:size], 0)
		unix.Close(fd)
		if err != nil || n != size {
			t.Fatalf("direct read: %d, %v", n, err)
		}
		var diff []int
		for p := 0; p < size/4096; p++ {
			if !bytes.Equal(m[p*4096:(p+1)*4096], dm[p*4096:(p+1)*4096]) {
				diff = append(diff, p)
			}
		}
		total += len(diff)
		t.Logf("round %d: side fsync %v; msync %v; %d pages on the device differ from the cache: %v", round, serr, merr, len(diff), diff[:min(len(diff), 20)])
	}
	if total > 0 {
		t.Errorf("msync succeeded, yet the device does not hold what it wrote")
	}
}

// TestRealEIOKernelShortWrite: a mapped, preallocated file whose pages
// 43..129 were never written when the tmpfs filled: writing every page
// and msyncing must fail (those blocks cannot be written), or, if msync
// succeeds, the device must hold what it wrote. A loop device that
// completes a short write of its backing file as a success breaks this.
func TestRealEIOKernelShortWrite(t *testing.T) {
	reRequire(t)
	d := newReDisk(t, 48, 512, "backed")
	const pages = 665
	const size = pages * 4096
	path := filepath.Join(d.mnt, "m")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	for p := range pages {
		if p < 43 || p > 129 {
			m[p*4096+100] = 1
		}
	}
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	d.fill()
	for p := range pages {
		m[p*4096+100] = 2
	}
	merr := unix.Msync(m, unix.MS_SYNC)
	dm, _ := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	defer unix.Munmap(dm)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, rerr := unix.Pread(fd, dm, 0)
	unix.Close(fd)
	var diff []int
	for p := range pages {
		if dm[p*4096+100] != 2 {
			diff = append(diff, p)
		}
	}
	out, _ := exec.Command("filefrag", "-v", path).CombinedOutput()
	t.Logf("msync: %v; direct read %d, %v; %d pages on the device are not as msynced: %v\n%s", merr, n, rerr, len(diff), diff[:min(20, len(diff))], out)
	if merr == nil && len(diff) > 0 {
		t.Errorf("msync returned nil, yet %d pages never reached the device", len(diff))
	}
}
