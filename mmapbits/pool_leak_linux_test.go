package mmapbits

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// vmSize returns the process's VmSize from /proc/self/status, in bytes.
func vmSize(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmSize in /proc/self/status")
	return 0
}

// mapsLines returns the number of lines of /proc/self/maps: the process's
// mappings.
func mapsLines(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte{'\n'})
}

// headerOfSize returns a bitmap header whose file is exactly size bytes
// (a multiple of PageSize): header page, data pages and checksum pages.
func headerOfSize(t *testing.T, size int64) Header {
	t.Helper()
	for n := uint64(size / PageSize); n > 0; n-- {
		h := Header{Kind: KindBitmap, DataPages: n, Size: n * PageSize * 8, Capacity: n * PageSize * 8}
		if h.FileSize() == size {
			return h
		}
	}
	t.Fatalf("no header makes a file of %d bytes", size)
	return Header{}
}

// leakSizes are the file sizes of the cycle tests: under a huge page,
// exactly one, and two sizes above it that are not multiples of it.
var leakSizes = []int64{100 * PageSize, 2 << 20, 3 << 20, 7 << 20}

// TestCloseReleasesAddressSpace: create/open/close cycles of files of
// several sizes (read-write and read-only opens, huge-page and SmallPages
// mappings) leave VmSize and the number of mappings where the first cycle
// left them: a closed region's address range is reused by later
// mappings, not leaked.
func TestCloseReleasesAddressSpace(t *testing.T) {
	cycles := 300
	if testing.Short() {
		cycles = 60
	}
	dir := t.TempDir()
	var paths []string
	for i, size := range leakSizes {
		p := filepath.Join(dir, fmt.Sprint("f", i))
		r, err := OS{}.Create(p, headerOfSize(t, size))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	var sink uint64
	cycle := func(i int) {
		// One new file per cycle, of each size in turn.
		p := filepath.Join(dir, "new")
		r, err := OS{}.Create(p, headerOfSize(t, leakSizes[i%len(leakSizes)]))
		if err != nil {
			t.Fatal(err)
		}
		atomic.StoreUint64(&r.Words()[0], uint64(i))
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		var open []Region
		for _, m := range []OS{{}, {SmallPages: true}} {
			for _, p := range paths {
				rw, err := m.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				ro, err := m.OpenRead(p)
				if err != nil {
					t.Fatal(err)
				}
				sink += atomic.LoadUint64(&rw.Words()[1]) + atomic.LoadUint64(&ro.Words()[2])
				open = append(open, rw, ro)
			}
		}
		for _, r := range open {
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cycle(0)
	vm0, maps0 := vmSize(t), mapsLines(t)
	for i := 1; i < cycles; i++ {
		cycle(i)
	}
	runtime.KeepAlive(sink)
	vm1, maps1 := vmSize(t), mapsLines(t)
	t.Logf("after cycle 1: VmSize %d MiB, %d mappings; after cycle %d: VmSize %d MiB, %d mappings",
		vm0>>20, maps0, cycles, vm1>>20, maps1)
	// The Go runtime may reserve more heap arenas meanwhile (64 MiB each);
	// a leak is the cycle's ~45 MiB of mappings per cycle.
	if vm1-vm0 > 256<<20 {
		t.Errorf("VmSize grew by %d MiB over %d cycles", (vm1-vm0)>>20, cycles-1)
	}
	if maps1-maps0 > 32 {
		t.Errorf("mappings grew from %d to %d over %d cycles", maps0, maps1, cycles-1)
	}
}

// heapAfterGC returns HeapAlloc after two collections.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestCloseKeepsNoHeap: opening and closing a small region (the path that
// once used unix.Mmap, which records every mapping in x/sys/unix's table
// until unix.Munmap) leaves nothing on the Go heap per cycle.
func TestCloseKeepsNoHeap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	r, err := OS{}.Create(p, headerOfSize(t, 100*PageSize))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	cycle := func() {
		for _, open := range []func(string) (Region, error){OS{}.Open, OS{}.OpenRead} {
			r, err := open(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 100 {
		cycle()
	}
	const cycles = 2000
	before := heapAfterGC()
	for range cycles {
		cycle()
	}
	after := heapAfterGC()
	growth := int64(after) - int64(before)
	t.Logf("HeapAlloc %d -> %d bytes over %d cycles of 2 opens: %.1f bytes per cycle", before, after, cycles, float64(growth)/cycles)
	if growth > 32<<10 {
		t.Errorf("HeapAlloc grew by %d bytes over %d open/close cycles (%.1f per cycle)", growth, cycles, float64(growth)/cycles)
	}
}

// TestGrowingFilesReuseRanges: a file one page larger at each cycle (a
// filter rebuilt a little bigger, again and again), with at most two open
// at once, keeps the pool, VmSize and the mappings bounded: a fresh
// mapping takes its size class's address space, so the next, slightly
// larger file fits the ranges closed before it. Each close used to leave
// one range no later file fitted: 400 cycles from 2 MiB left 1111 MiB in
// 400 ranges in the pool, and 400 more mappings.
func TestGrowingFilesReuseRanges(t *testing.T) {
	for _, small := range []bool{false, true} {
		t.Run(fmt.Sprint("small=", small), func(t *testing.T) {
			forgetPool()
			defer forgetPool()
			dir := t.TempDir()
			m := OS{SmallPages: small}
			var old Region
			vm0, maps0 := vmSize(t), mapsLines(t)
			const cycles = 400
			for i := range cycles {
				size := int64(2<<20) + int64(i)*PageSize
				p := filepath.Join(dir, fmt.Sprint("f", i))
				r, err := m.Create(p, headerOfSize(t, size))
				if err != nil {
					t.Fatal(err)
				}
				if old != nil {
					old.Close()
				}
				os.Remove(filepath.Join(dir, fmt.Sprint("f", i-1)))
				old = r
			}
			old.Close()
			vm1, maps1 := vmSize(t), mapsLines(t)
			pooled, ranges := placeholders.total()
			t.Logf("%d cycles of 2 to %d MiB: VmSize %d -> %d MiB, mappings %d -> %d, pool %d MiB in %d ranges",
				cycles, (2<<20+cycles*PageSize)>>20, vm0>>20, vm1>>20, maps0, maps1, pooled>>20, ranges)
			// The pool's total, not VmSize, which the Go runtime's own
			// heap reservations (64 MiB arenas) move as well.
			if pooled > 32<<20 || maps1-maps0 > 16 {
				t.Fatalf("the pool holds %d MiB in %d ranges and the mappings grew by %d over %d cycles with at most two files of under 4 MiB open",
					pooled>>20, ranges, maps1-maps0, cycles)
			}
		})
	}
}

// TestFailedMapOverPooledRangeKeepsIt: a mapping that fails over a pooled
// range (a write-sealed memfd opened read-write: mmap answers EPERM) gives
// the range back to the pool, where the kernel left the placeholder pages
// as they were. The range used to be dropped from the pool for good: 100
// such failures took VmSize up by 792 MiB.
func TestFailedMapOverPooledRangeKeepsIt(t *testing.T) {
	forgetPool()
	defer forgetPool()
	dir := t.TempDir()
	const size = 8 << 20
	src := filepath.Join(dir, "src")
	r, err := OS{}.Create(src, headerOfSize(t, size))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	img, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.MemfdCreate("sealed", unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatalf("memfd_create: %v", err)
	}
	defer unix.Close(fd)
	if _, err := unix.Pwrite(fd, img, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK); err != nil {
		t.Fatal(err)
	}
	sealed := fmt.Sprintf("/proc/self/fd/%d", fd)
	vm0, maps0 := vmSize(t), mapsLines(t)
	const cycles = 100
	for i := range cycles {
		p := filepath.Join(dir, fmt.Sprint("c", i))
		r, err := OS{}.Create(p, headerOfSize(t, size)) // a range for the pool
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		os.Remove(p)
		if _, err := (OS{}).Open(sealed); err == nil {
			t.Fatal("a write-sealed file mapped read-write")
		}
	}
	vm1, maps1 := vmSize(t), mapsLines(t)
	pooled, ranges := placeholders.total()
	t.Logf("%d failed mappings over pooled ranges: VmSize %d -> %d MiB, mappings %d -> %d, pool %d MiB in %d ranges",
		cycles, vm0>>20, vm1>>20, maps0, maps1, pooled>>20, ranges)
	if pooled == 0 || maps1-maps0 > 16 || vm1-vm0 > 256<<20 {
		t.Fatalf("%d failed mappings over pooled ranges: the pool holds %d MiB, VmSize grew %d MiB, mappings by %d",
			cycles, pooled>>20, (vm1-vm0)>>20, maps1-maps0)
	}
}

// TestGrowingFileBesideSmallRegions: a file one page larger at each cycle,
// with a small region opened and kept at each cycle too, keeps the pool
// bounded: a small mapping goes at the end of the range it takes, so the
// aligned start where the next, larger file goes stays whole. Small
// mappings used to go at the start of the closed large range (or its
// class's rest), which then no longer held the next file: 400 cycles
// left 81 MiB in 50 ranges in the pool beside 25 MiB of small regions
// (49 MiB in 16 ranges now).
func TestGrowingFileBesideSmallRegions(t *testing.T) {
	forgetPool()
	defer forgetPool()
	dir := t.TempDir()
	var old Region
	var keep []Region
	defer func() {
		for _, r := range keep {
			r.Close()
		}
	}()
	const cycles = 400
	for i := range cycles {
		size := int64(2<<20) + int64(i)*PageSize
		p := filepath.Join(dir, fmt.Sprint("f", i))
		r, err := OS{}.Create(p, headerOfSize(t, size))
		if err != nil {
			t.Fatal(err)
		}
		if old != nil {
			old.Close()
		}
		os.Remove(filepath.Join(dir, fmt.Sprint("f", i-1)))
		old = r
		sr, err := OS{}.Create(filepath.Join(dir, fmt.Sprint("s", i)), headerOfSize(t, 16*PageSize))
		if err != nil {
			t.Fatal(err)
		}
		keep = append(keep, sr)
	}
	old.Close()
	pooled, ranges := placeholders.total()
	t.Logf("%d cycles: pool %d MiB in %d ranges, %d small regions of 64 KiB open", cycles, pooled>>20, ranges, len(keep))
	// What the pool keeps follows what is open (the small regions,
	// which nibble at its ranges), not the number of closes.
	live := uintptr(len(keep)) * 16 * PageSize
	if pooled > 2*live+16<<20 {
		t.Fatalf("the pool holds %d MiB in %d ranges after %d cycles of one growing file of under 4 MiB, with %d MiB of small regions open",
			pooled>>20, ranges, cycles, live>>20)
	}
}

// TestReuseUnderAddressSpaceLimit: with the address space limited
// (RLIMIT_AS) to a little above what the process has mapped, a file still
// maps over a pooled range that holds it, which needs no new address
// space. Moving a temporary mapping over the range needs the file's size
// again: the first version of that failed here with ENOMEM, and now falls
// back to MAP_FIXED. Run in a child process, whose limit it lowers.
func TestReuseUnderAddressSpaceLimit(t *testing.T) {
	if path := os.Getenv("MMAPBITS_RLIMIT_CHILD"); path != "" {
		r, err := OS{}.Create(path, headerOfSize(t, 64<<20))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil { // its range is pooled
			t.Fatal(err)
		}
		vm := uint64(vmSize(t))
		lim := unix.Rlimit{Cur: vm + 16<<20, Max: vm + 16<<20}
		if err := unix.Setrlimit(unix.RLIMIT_AS, &lim); err != nil {
			t.Fatal(err)
		}
		r, err = OS{}.Open(path)
		if err != nil {
			t.Fatalf("Open over a pooled range with RLIMIT_AS at VmSize+16 MiB: %v", err)
		}
		r.Close()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestReuseUnderAddressSpaceLimit$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MMAPBITS_RLIMIT_CHILD="+filepath.Join(t.TempDir(), "big"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
