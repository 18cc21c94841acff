package store

// Benchmarks of the store's durable write paths, bulk loading and reopening.
//
// They measure; they assert nothing about speed. Suggested runs:
//
//	go test -run '^$' -bench . -benchtime 3x ./store/   # quick: Load, Reopen
//	go test -run '^$' -bench 'DurableAdd|AddMany' -benchtime 1s ./store/
//
// With a count benchtime such as 3x, BenchmarkDurableAdd's parallel
// sub-benchmarks run only 3 adds in all, so the group-commit numbers
// (fsyncs/op) mean something only with a time benchtime.
//
// BenchmarkReopen builds its filters (up to 1e8 keys, about 120 MB) once per
// run of the benchmark under os.TempDir() and removes them when it ends.

import (
	"encoding/binary"
	"flag"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
	"golang.org/x/sys/unix"
)

var benchModes = []SyncMode{SyncAlways, SyncInterval}

// putBenchKey writes key i into k (8 bytes): keys are cheap to make, so the
// benchmarks time the store, not key formatting.
func putBenchKey(k []byte, i uint64) { binary.LittleEndian.PutUint64(k, i) }

func benchKey(i uint64) []byte {
	k := make([]byte, 8)
	putBenchKey(k, i)
	return k
}

// benchKeys yields keys start..start+n-1 from one reused buffer (Load
// hashes each key before asking for the next).
func benchKeys(start, n uint64) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		k := make([]byte, 8)
		for i := start; i < start+n; i++ {
			putBenchKey(k, i)
			if !yield(k) {
				return
			}
		}
	}
}

// openBenchBloom opens a fresh store in a temporary directory with a
// non-scaling Bloom filter that holds capacity items at 1% without growing
// a layer during the timed loop. The store is closed at cleanup.
func openBenchBloom(b *testing.B, opts *Options, capacity uint64) (*Store, *Bloom) {
	b.Helper()
	s, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	f, err := s.CreateBloom("bench", BloomConfig{Capacity: capacity + 1024, ErrorRate: 0.01, NonScaling: true})
	if err != nil {
		b.Fatal(err)
	}
	return s, f
}

// reportWAL reports the WAL fdatasyncs and writes per unit since before.
func reportWAL(b *testing.B, s *Store, before wal.Stats, units float64, unit string) {
	after := s.log.Stats()
	b.ReportMetric(float64(after.Syncs-before.Syncs)/units, "fsyncs/"+unit)
	b.ReportMetric(float64(after.Writes-before.Writes)/units, "writes/"+unit)
}

// perSecond reports n per second of timed benchmark time.
func perSecond(b *testing.B, n float64, unit string) {
	if sec := b.Elapsed().Seconds(); sec > 0 {
		b.ReportMetric(n/sec, unit)
	}
}

// BenchmarkDurableAdd measures single-key Bloom adds from 1, 16 and 64
// concurrent goroutines: under SyncAlways concurrent adds share group
// commits, so fsyncs/op falls below 1 as goroutines are added.
func BenchmarkDurableAdd(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	for _, mode := range benchModes {
		for _, want := range []int{1, 16, 64} {
			// RunParallel starts parallelism*GOMAXPROCS goroutines;
			// one goroutine is a plain loop.
			par := (want + procs - 1) / procs
			goroutines := par * procs
			if want == 1 {
				goroutines = 1
			}
			b.Run(fmt.Sprintf("sync=%v/goroutines=%d", mode, goroutines), func(b *testing.B) {
				s, f := openBenchBloom(b, &Options{Sync: mode}, uint64(b.N))
				before := s.log.Stats()
				b.ResetTimer()
				if goroutines == 1 {
					k := make([]byte, 8)
					for i := 0; i < b.N; i++ {
						putBenchKey(k, uint64(i))
						if _, err := f.Add(k); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					var next atomic.Uint64
					b.SetParallelism(par)
					b.RunParallel(func(pb *testing.PB) {
						k := make([]byte, 8)
						for pb.Next() {
							putBenchKey(k, next.Add(1))
							if _, err := f.Add(k); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.StopTimer()
				perSecond(b, float64(b.N), "ops/s")
				reportWAL(b, s, before, float64(b.N), "op")
			})
		}
	}
}

// BenchmarkAddMany measures AddMany with batches of 1000 new keys: one WAL
// write and (under SyncAlways) one fdatasync per batch.
func BenchmarkAddMany(b *testing.B) {
	const batch = 1000
	for _, mode := range benchModes {
		b.Run(fmt.Sprintf("sync=%v/batch=%d", mode, batch), func(b *testing.B) {
			s, f := openBenchBloom(b, &Options{Sync: mode}, uint64(b.N)*batch)
			buf := make([]byte, 8*batch)
			keys := make([][]byte, batch)
			for j := range keys {
				keys[j] = buf[8*j : 8*j+8 : 8*j+8]
			}
			before := s.log.Stats()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j, k := range keys {
					putBenchKey(k, uint64(i)*batch+uint64(j))
				}
				if _, err := f.AddMany(keys); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			perSecond(b, float64(b.N)*batch, "keys/s")
			reportWAL(b, s, before, float64(b.N), "batch")
		})
	}
}

// loadN is how many keys BenchmarkLoad loads (-load.n, for scaling runs
// with -test.cpu 1,2,...).
var loadN = flag.Uint64("load.n", 1_000_000, "keys of each BenchmarkLoad iteration")

// loadLog makes BenchmarkLoad's store log at Debug level to stderr: how
// long adding the keys took, and the checkpoint that ends the Load.
var loadLog = flag.Bool("load.log", false, "BenchmarkLoad logs the store's Debug events to stderr")

// loadNoHuge makes BenchmarkLoad's private builds ask for no transparent
// huge pages.
var loadNoHuge = flag.Bool("load.nohuge", false, "BenchmarkLoad builds without transparent huge pages")

// loadRawMin, if positive, replaces loadRawKeysMinProcs while
// BenchmarkLoad, BenchmarkLoadCounting and BenchmarkLoadCuckoo run, to
// measure where the keys should go to the builder.
var loadRawMin = flag.Int("load.rawmin", 0, "the Load benchmarks' threshold in CPUs for handing keys to the builder unhashed (0: loadRawKeysMinProcs)")

// BenchmarkLoad measures an unlogged bulk Load of -load.n keys (1e6; from
// -load.sources sources, LoadParallel, with more than one) into
// a fresh Bloom filter (1%, non-scaling, that capacity) per iteration, the
// ending checkpoint (msync of the filter) included. Creating and dropping
// the filter is not timed.
func BenchmarkLoad(b *testing.B) {
	defer func(huge bool) { loadHugePages = huge }(loadHugePages)
	loadHugePages = !*loadNoHuge
	benchLoad(b, func(s *Store, name string, n uint64) (loadSourcesFunc, error) {
		f, err := s.CreateBloom(name, BloomConfig{Capacity: n, ErrorRate: 0.01, NonScaling: true})
		if err != nil {
			return nil, err
		}
		return f.LoadParallel, nil
	})
}

// BenchmarkLoadCuckoo is BenchmarkLoad for a cuckoo filter (b=4, f=16,
// non-scaling) of -load.n keys' capacity.
func BenchmarkLoadCuckoo(b *testing.B) {
	benchLoad(b, func(s *Store, name string, n uint64) (loadSourcesFunc, error) {
		f, err := s.CreateCuckoo(name, CuckooConfig{Capacity: n, BucketSize: 4, FingerprintBits: 16, NonScaling: true})
		if err != nil {
			return nil, err
		}
		return f.LoadParallel, nil
	})
}

// BenchmarkLoadCounting is BenchmarkLoad for a counting filter (1%,
// non-scaling) of -load.n keys' capacity.
func BenchmarkLoadCounting(b *testing.B) {
	benchLoad(b, func(s *Store, name string, n uint64) (loadSourcesFunc, error) {
		f, err := s.CreateCounting(name, BloomConfig{Capacity: n, ErrorRate: 0.01, NonScaling: true})
		if err != nil {
			return nil, err
		}
		return f.LoadParallel, nil
	})
}

// loadFunc is a filter's Load.
type loadFunc func(iter.Seq2[[]byte, error]) error

// loadSourcesFunc is a filter's LoadParallel.
type loadSourcesFunc func(...iter.Seq2[[]byte, error]) error

// loadSources is how many sources the Load benchmarks split their keys
// into (-load.sources): 1 is Load, more LoadParallel.
var loadSources = flag.Int("load.sources", 1, "the Load benchmarks' key sources: 1 is Load, more LoadParallel of that many")

// benchLoad times, per iteration, a Load of -load.n keys into a filter
// that create makes (untimed, as is its Drop), in a store that logs a
// Load's phases with -load.log.
func benchLoad(b *testing.B, create func(s *Store, name string, n uint64) (loadSourcesFunc, error)) {
	n := *loadN
	srcs := make([]iter.Seq2[[]byte, error], max(*loadSources, 1))
	for i := range srcs {
		lo, hi := n*uint64(i)/uint64(len(srcs)), n*uint64(i+1)/uint64(len(srcs))
		srcs[i] = Keys(benchKeys(lo, hi-lo))
	}
	if *loadRawMin > 0 {
		was := loadRawKeysMinProcs
		loadRawKeysMinProcs = *loadRawMin
		defer func() { loadRawKeysMinProcs = was }()
	}
	opts := Options{SmallPages: *smallPages}
	if *loadLog {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := Open(b.TempDir(), &opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		name := fmt.Sprintf("load-%d", i)
		load, err := create(s, name, n)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := load(srcs...); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := s.Drop(name); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	perSecond(b, float64(b.N)*float64(n), "keys/s")
	// The GOMAXPROCS the Loads ran on. With -test.benchtime 1x, the
	// testing package reports for the first -test.cpu entry the run it
	// makes before it sets GOMAXPROCS to that entry, on the GOMAXPROCS
	// of the list's last entry (where its loop over the list for the
	// tests left it): -test.cpu 1,2,16 timed its "1" on 16 CPUs. Earlier
	// scaling tables took such runs for 1-CPU ones. Repeat the first
	// entry at the end of the list, or use -test.benchtime 2x.
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
}

// reopenFixture is a store directory holding one Bloom filter of n keys,
// built once and shared by every run of a BenchmarkReopen sub-benchmark.
type reopenFixture struct {
	dir  string // store directory
	file string // the filter's (only) layer file
	size int64  // its size in bytes, header page included
}

var reopenCache struct {
	sync.Mutex
	root     string // under os.TempDir(); removed when BenchmarkReopen ends
	fixtures map[uint64]reopenFixture
}

const reopenFilter = "reopen"

// reopenBuild returns the fixture of n keys, building it with Load on first
// use.
func reopenBuild(b *testing.B, n uint64) reopenFixture {
	b.Helper()
	reopenCache.Lock()
	defer reopenCache.Unlock()
	if fx, ok := reopenCache.fixtures[n]; ok {
		return fx
	}
	dir := filepath.Join(reopenCache.root, fmt.Sprintf("keys-%d", n))
	s, err := Open(dir, &Options{CheckpointEvery: -1, SmallPages: *smallPages})
	if err != nil {
		b.Fatal(err)
	}
	f, err := s.CreateBloom(reopenFilter, BloomConfig{Capacity: n, ErrorRate: 0.01, NonScaling: true})
	if err != nil {
		s.Close()
		b.Fatal(err)
	}
	start := time.Now()
	if err := f.Load(Keys(benchKeys(0, n))); err != nil {
		s.Close()
		b.Fatal(err)
	}
	took := time.Since(start)
	if in, _ := f.Info(); in.Layers != 1 {
		s.Close()
		b.Fatalf("filter of %d keys has %d layers, want 1", n, mustInfo(b, f).Layers)
	}
	fx := reopenFixture{dir: dir, file: s.layerPath(f.b.meta.ID, 0), size: mustInfo(b, f).SizeBytes}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %d-key filter (%.1f MB) with Load in %v (%.0f keys/s)",
		n, float64(fx.size)/1e6, took.Round(time.Millisecond), float64(n)/took.Seconds())
	reopenCache.fixtures[n] = fx
	return fx
}

// residentDataPages counts the data pages of the region file at path (the
// header page excluded) that are in the page cache, by mincore(2) on a
// fresh read-only mapping, which faults nothing in. (mincore on a file
// mapping reports the file's page cache, not just this mapping's pages.)
func residentDataPages(b *testing.B, path string) int {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(mem)
	pageSize := os.Getpagesize()
	vec := make([]byte, (len(mem)+pageSize-1)/pageSize)
	if err := mincore(mem, vec); err != nil {
		b.Fatalf("mincore %s: %v", path, err)
	}
	n := 0
	for i, v := range vec {
		if v&1 != 0 && i*pageSize >= mmapbits.HeaderSize {
			n++
		}
	}
	return n
}

// mincore is mincore(2): golang.org/x/sys/unix has no Linux wrapper.
func mincore(mem, vec []byte) error {
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return errno
	}
	return nil
}

// settledDataPages is residentDataPages once readahead the last access
// started has finished: mincore counts only pages whose read completed.
func settledDataPages(b *testing.B, path string) int {
	b.Helper()
	n := residentDataPages(b, path)
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		m := residentDataPages(b, path)
		if m == n {
			break
		}
		n = m
	}
	return n
}

// BenchmarkReopen measures Open + the first Has + Close of a store holding
// one Bloom filter of 1e6, 1e7 or 1e8 keys at 1% (1e8 keys is about 120 MB),
// with the filter file evicted from the page cache before each Open, and
// counts with mincore(2) how many of the filter's data pages that brought
// into the page cache:
//
//   - pages-open: after Open (recovery maps the file, reads its header);
//   - pages-read: after Open and one Has (and Close, which reads nothing
//     of a clean filter), once readahead has settled.
//
// A lookup needs one page; everything above that is kernel readahead
// around the header read and the page fault, bounded by the device's
// read_ahead_kb, not by the filter's size.
func BenchmarkReopen(b *testing.B) {
	root, err := os.MkdirTemp(os.TempDir(), "filterstore-bench-reopen-")
	if err != nil {
		b.Fatal(err)
	}
	reopenCache.Lock()
	reopenCache.root, reopenCache.fixtures = root, make(map[uint64]reopenFixture)
	reopenCache.Unlock()
	b.Cleanup(func() {
		reopenCache.Lock()
		reopenCache.root, reopenCache.fixtures = "", nil
		reopenCache.Unlock()
		if err := os.RemoveAll(root); err != nil {
			b.Errorf("removing %s: %v", root, err)
		}
	})
	for _, size := range []struct {
		label string
		n     uint64
	}{{"1e6", 1e6}, {"1e7", 1e7}, {"1e8", 1e8}} {
		b.Run("keys="+size.label, func(b *testing.B) {
			fx := reopenBuild(b, size.n)
			probe := benchKey(0) // a key the filter holds
			var pagesOpen, pagesRead int
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dropFileCache(b, fx.file)
				if left := residentDataPages(b, fx.file); left != 0 {
					b.Fatalf("%d data pages of %s still cached after FADV_DONTNEED: cannot count pages read", left, fx.file)
				}
				b.StartTimer()
				s, err := Open(fx.dir, &Options{SmallPages: *smallPages})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				pagesOpen += residentDataPages(b, fx.file)
				b.StartTimer()
				f, err := s.Bloom(reopenFilter)
				if err != nil {
					b.Fatal(err)
				}
				if !f.Has(probe) {
					b.Fatal("false negative after reopen")
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				pagesRead += settledDataPages(b, fx.file)
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/open")
			b.ReportMetric(float64(pagesOpen)/float64(b.N), "pages-open")
			b.ReportMetric(float64(pagesRead)/float64(b.N), "pages-read")
			b.ReportMetric(float64(fx.size)/1e6, "filter-MB")
		})
	}
}
