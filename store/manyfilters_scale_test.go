package store

// Scaling checks for a store holding many small filters (an LSM engine's
// one filter per SSTable). Opt-in, since they take minutes:
//
//	FILTERSTORE_MANY=1000,10000,100000 go test ./store -run 'TestManyFiltersScale$' -v -timeout 2h
//	FILTERSTORE_MANY_CHURN=10000 go test ./store -run 'TestManyFiltersChurn$' -v -timeout 1h
//
// Each prints a table of the costs measured at each filter count.

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// manyCounts parses the environment variable v ("1000,10000"), or skips.
func manyCounts(t *testing.T, v string) []int {
	s := os.Getenv(v)
	if s == "" {
		t.Skipf("set %s to run (a list of filter counts)", v)
	}
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		ns = append(ns, n)
	}
	return ns
}

// procCounts returns the number of this process's mappings (all of them,
// the .flt file mappings, and the anonymous read-only ones: placeholders
// and the Go runtime's few), its open descriptors and its RSS in KiB.
func procCounts() (maps, flt, ro, fds int, rssKiB int64) {
	if f, err := os.Open("/proc/self/maps"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			maps++
			fs := strings.Fields(sc.Text())
			switch {
			case len(fs) >= 6 && strings.HasSuffix(fs[5], ".flt"):
				flt++
			case len(fs) == 5 && fs[1] == "r--p" && fs[4] == "0":
				ro++
			}
		}
		f.Close()
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = len(ents)
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				rssKiB, _ = strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			}
		}
	}
	return
}

func heapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

func dirSize(dir string) (bytes int64, files int) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				bytes += fi.Size()
			}
			files++
		}
		return nil
	})
	return
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return -1
	}
	return fi.Size()
}

// manyName is the name of the i-th filter.
func manyName(i int) string { return fmt.Sprintf("sst-%07d", i) }

// manyCreate creates filter i: 8 in 10 Bloom (capacity 1000-8000), one
// cuckoo, one counting (capacity 1000).
func manyCreate(s *Store, i int) error {
	var err error
	switch i % 10 {
	case 8:
		_, err = s.CreateCuckoo(manyName(i), CuckooConfig{Capacity: 1000})
	case 9:
		_, err = s.CreateCounting(manyName(i), BloomConfig{Capacity: 1000})
	default:
		_, err = s.CreateBloom(manyName(i), BloomConfig{Capacity: uint64(1000 * (1 + i%8))})
	}
	return err
}

// manyAdd adds key to filter i, whatever its kind.
func manyAdd(s *Store, i int, key []byte) error {
	switch i % 10 {
	case 8:
		c, err := s.Cuckoo(manyName(i))
		if err != nil {
			return err
		}
		return c.Add(key)
	case 9:
		c, err := s.Counting(manyName(i))
		if err != nil {
			return err
		}
		return c.Add(key)
	default:
		b, err := s.Bloom(manyName(i))
		if err != nil {
			return err
		}
		_, err = b.Add(key)
		return err
	}
}

func manyHas(s *Store, i int, key []byte) (bool, error) {
	switch i % 10 {
	case 8:
		c, err := s.Cuckoo(manyName(i))
		if err != nil {
			return false, err
		}
		return c.Has(key), nil
	case 9:
		c, err := s.Counting(manyName(i))
		if err != nil {
			return false, err
		}
		return c.Has(key), nil
	default:
		b, err := s.Bloom(manyName(i))
		if err != nil {
			return false, err
		}
		return b.Has(key), nil
	}
}

func manyKey(i, j int) []byte { return []byte(fmt.Sprintf("k-%d-%d", i, j)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

// TestManyFiltersScale measures, at each filter count, what the store's
// operations cost.
func TestManyFiltersScale(t *testing.T) {
	ns := manyCounts(t, "FILTERSTORE_MANY")
	inspect := buildInspect(t)
	var rows []string
	for _, n := range ns {
		row := manyScaleOne(t, n, inspect)
		rows = append(rows, row)
		t.Logf("n=%d: %s", n, row)
	}
	t.Logf("\n%s\n%s", manyHeader, strings.Join(rows, "\n"))
}

const manyHeader = "| n | create first/last 1k µs/op | maps (flt, ro) | fds | heap MiB | RSS MiB | catalog MiB | add µs/op | ckpt(10 chg) ms | List ms | Backup s | Close ms | Open s | Open heap MiB | Open RSS MiB | RO Open s | recover s | drop µs/op | rename µs/op | inspect ls s | inspect verify s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

func buildInspect(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "inspect")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/inspect")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build inspect: %v\n%s", err, out)
	}
	return bin
}

func manyScaleOne(t *testing.T, n int, inspect string) string {
	dir := t.TempDir()
	opts := &Options{CheckpointEvery: -1}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	first := min(1000, n)
	t0 := time.Now()
	var tFirst, tLast time.Duration
	for i := 0; i < n; i++ {
		if i == first {
			tFirst = time.Since(t0)
		}
		if i == n-first {
			tLast = time.Since(t0)
		}
		if err := manyCreate(s, i); err != nil {
			maps, flt, ro, fds, _ := procCounts()
			t.Fatalf("create %d of %d: %v (maps %d, flt %d, ro %d, fds %d)", i, n, err, maps, flt, ro, fds)
		}
		if i > 0 && i%20000 == 0 {
			t.Logf("n=%d: %d created in %v", n, i, time.Since(t0))
		}
	}
	total := time.Since(t0)
	tLast = total - tLast
	if n == first {
		tFirst = total
	}
	maps, flt, ro, fds, rss := procCounts()
	heap := heapMiB()

	// One key into every filter, in batches of 1000 ops (one WAL record
	// each), then a checkpoint, so that each filter holds something.
	for lo := 0; lo < n; lo += 1000 {
		bt := s.NewBatch()
		for i := lo; i < min(n, lo+1000); i++ {
			key := manyKey(i, 0)
			switch i % 10 {
			case 8:
				c, _ := s.Cuckoo(manyName(i))
				bt.CuckooAdd(c, key)
			case 9:
				c, _ := s.Counting(manyName(i))
				bt.CountingAdd(c, key)
			default:
				b, _ := s.Bloom(manyName(i))
				bt.BloomAdd(b, key)
			}
		}
		if _, err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}

	// Single adds to random filters (each its own fdatasync).
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	const adds = 300
	t0 = time.Now()
	for j := 0; j < adds; j++ {
		i := rng.IntN(n)
		if err := manyAdd(s, i, manyKey(i, j+1)); err != nil {
			t.Fatal(err)
		}
	}
	addUS := float64(time.Since(t0).Microseconds()) / adds

	// Checkpoint after 10 filters changed (median of 3).
	var ck []time.Duration
	for r := 0; r < 3; r++ {
		for j := 0; j < 10; j++ {
			i := rng.IntN(n)
			if err := manyAdd(s, i, manyKey(i, 1000+r*10+j)); err != nil {
				t.Fatal(err)
			}
		}
		t0 = time.Now()
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		ck = append(ck, time.Since(t0))
	}
	ckpt := median(ck)

	t0 = time.Now()
	infos, err := s.List()
	if err != nil || len(infos) != n {
		t.Fatalf("List: %d, %v", len(infos), err)
	}
	list := time.Since(t0)

	t0 = time.Now()
	if err := s.Backup(filepath.Join(t.TempDir(), "bk")); err != nil {
		t.Fatalf("Backup: %v", err)
	}
	backup := time.Since(t0)
	catMiB := float64(fileSize(filepath.Join(dir, "catalog.db"))) / (1 << 20)

	t0 = time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closeT := time.Since(t0)

	h0 := heapMiB()
	_, _, _, _, rss0 := procCounts()
	t0 = time.Now()
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	openT := time.Since(t0)
	openHeap := heapMiB() - h0
	_, _, _, _, rss1 := procCounts()
	// Every key added so far reads present.
	for i := 0; i < n; i++ {
		if ok, err := manyHas(s, i, manyKey(i, 0)); err != nil || !ok {
			t.Fatalf("after reopen, filter %d lost its key (%v)", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	t0 = time.Now()
	rs, err2 := Open(dir, &Options{ReadOnly: true})
	if err2 != nil {
		t.Fatalf("read-only open: %v", err2)
	}
	roT := time.Since(t0)
	rs.Close()

	// A writer that dies after changing 10 filters: the next Open's
	// recovery.
	recT := manyCrashAndRecover(t, dir, n)

	// Drop and Rename 200 filters each.
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	k := min(200, n/4)
	t0 = time.Now()
	for i := 0; i < k; i++ {
		if err := s.Drop(manyName(i)); err != nil {
			t.Fatal(err)
		}
	}
	dropUS := float64(time.Since(t0).Microseconds()) / float64(k)
	t0 = time.Now()
	for i := 0; i < k; i++ {
		if err := s.Rename(manyName(k+i), manyName(k+i)+".r"); err != nil {
			t.Fatal(err)
		}
	}
	renameUS := float64(time.Since(t0).Microseconds()) / float64(k)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	t0 = time.Now()
	if out, err := exec.Command(inspect, "ls", dir).CombinedOutput(); err != nil {
		t.Errorf("inspect ls: %v\n%s", err, tail(out))
	}
	lsT := time.Since(t0)
	t0 = time.Now()
	if out, err := exec.Command(inspect, "verify", dir).CombinedOutput(); err != nil {
		t.Errorf("inspect verify: %v\n%s", err, tail(out))
	}
	verifyT := time.Since(t0)

	return fmt.Sprintf("| %d | %.0f / %.0f | %d (%d, %d) | %d | %.0f | %d | %.1f | %.0f | %s | %s | %.1f | %s | %.2f | %.0f | %d | %.2f | %.2f | %.0f | %.0f | %.2f | %.2f |",
		n, float64(tFirst.Microseconds())/float64(first), float64(tLast.Microseconds())/float64(first),
		maps, flt, ro, fds, heap, rss/1024, catMiB, addUS, ms(ckpt), ms(list), backup.Seconds(), ms(closeT),
		openT.Seconds(), openHeap, (rss1-rss0)/1024, roT.Seconds(), recT.Seconds(), dropUS, renameUS, lsT.Seconds(), verifyT.Seconds())
}

func tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// manyCrashAndRecover runs a child process (this test binary) that opens
// the store at dir, adds a key to 10 filters and exits without Close;
// then it times the next Open and checks the keys.
func manyCrashAndRecover(t *testing.T, dir string, n int) time.Duration {
	cmd := exec.Command(os.Args[0], "-test.run=^TestManyFiltersChild$", "-test.v")
	cmd.Env = append(os.Environ(), "FILTERSTORE_MANY_CHILD="+dir, "FILTERSTORE_MANY_CHILD_N="+strconv.Itoa(n))
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("CHILD-ADDED")) {
		t.Fatalf("child: %v\n%s", err, tail(out))
	}
	t0 := time.Now()
	s, err := Open(dir, &Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatalf("recovery open: %v", err)
	}
	d := time.Since(t0)
	for j := 0; j < 10; j++ {
		i := (j * 7919) % n
		if ok, err := manyHas(s, i, manyKey(i, 5000+j)); err != nil || !ok {
			t.Fatalf("after recovery, filter %d lost its key (%v)", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestManyFiltersChild is the writer manyCrashAndRecover kills: it exits
// without closing the store.
func TestManyFiltersChild(t *testing.T) {
	dir := os.Getenv("FILTERSTORE_MANY_CHILD")
	if dir == "" {
		t.Skip("a child of TestManyFiltersScale")
	}
	n, _ := strconv.Atoi(os.Getenv("FILTERSTORE_MANY_CHILD_N"))
	s, err := Open(dir, &Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 10; j++ {
		i := (j * 7919) % n
		if err := manyAdd(s, i, manyKey(i, 5000+j)); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("CHILD-ADDED")
	os.Exit(0) // no Close: the next Open recovers
}

// hogMappings maps anonymous pages until the process has about room
// mappings left below vm.max_map_count (every other page of one
// reservation made readable, so that none merge), and returns the
// function that unmaps them.
func hogMappings(t *testing.T, room int) func() {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		t.Skip(err)
	}
	max, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	have, _, _, _, _ := procCounts()
	k := (max - have - room) / 2 // two mappings per readable page
	if k <= 0 {
		return func() {}
	}
	pg := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*k*pg, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < k; i++ {
		if err := unix.Mprotect(mem[2*i*pg:(2*i+1)*pg], unix.PROT_READ); err != nil {
			t.Fatalf("mprotect %d of %d: %v", i, k, err)
		}
	}
	now, _, _, _, _ := procCounts()
	t.Logf("max_map_count %d: the process had %d mappings, has %d now", max, have, now)
	return func() { unix.Munmap(mem) }
}

// TestManyFiltersMapLimit runs the store into vm.max_map_count: a
// process's mappings are used up (by a hog, standing in for the tens of
// thousands of filters a store of one filter per SSTable holds) and
// filters are created, and grown, until a mapping fails. Nothing
// acknowledged may be lost, and the failure must be an error, not a
// crash.
//
//	FILTERSTORE_MANY_MAPLIMIT=1 go test ./store -run 'TestManyFiltersMapLimit$' -v
func TestManyFiltersMapLimit(t *testing.T) {
	if os.Getenv("FILTERSTORE_MANY_MAPLIMIT") == "" {
		t.Skip("set FILTERSTORE_MANY_MAPLIMIT=1 to run")
	}
	dir := t.TempDir()
	release := hogMappings(t, 600)
	opts := &Options{CheckpointEvery: -1}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	// A scalable Bloom filter made before the limit, grown at it.
	gb, err := s.CreateBloom("grow", BloomConfig{Capacity: 100})
	if err != nil {
		t.Fatal(err)
	}
	// Creates, each with one acknowledged key, until one fails.
	var acked []int
	var createErr error
	for i := 0; i < 5000; i++ {
		if err := manyCreate(s, i); err != nil {
			createErr = err
			break
		}
		if err := manyAdd(s, i, manyKey(i, 0)); err != nil {
			createErr = fmt.Errorf("add after create: %w", err)
			break
		}
		acked = append(acked, i)
	}
	maps, flt, ro, fds, _ := procCounts()
	t.Logf("created %d filters, then: %v (maps %d, flt %d, ro %d, fds %d)", len(acked), createErr, maps, flt, ro, fds)
	if createErr == nil {
		t.Fatal("no create failed")
	}
	// A Bloom filter that must grow a layer now.
	g := len(acked)
	var growErr error
	grown := 0
	{
		b := gb
		for j := 0; j < 2000; j++ {
			if _, err := b.Add(manyKey(g, j)); err != nil {
				growErr = err
				break
			}
			grown++
		}
		in, _ := b.Info()
		t.Logf("growing filter: %d keys acknowledged, layers %d, then: %v", grown, in.Layers, growErr)
	}
	t.Logf("store failure: %v", s.failed())
	// Adds to existing filters at the limit.
	var acked1 []int
	for _, i := range acked[:min(20, len(acked))] {
		if err := manyAdd(s, i, manyKey(i, 1)); err != nil {
			t.Logf("add to filter %d at the limit: %v", i, err)
			break
		}
		acked1 = append(acked1, i)
	}
	t.Logf("%d adds to existing filters at the limit acknowledged", len(acked1))
	// A checkpoint, List, Backup at the limit.
	t.Logf("checkpoint at the limit: %v", s.Checkpoint())
	_, lerr := s.List()
	t.Logf("list at the limit: %v", lerr)
	cerr := s.Close()
	t.Logf("close at the limit: %v", cerr)
	// Reopen at the limit: more filters than mappings left.
	if s2, err := Open(dir, opts); err != nil {
		t.Logf("reopen at the limit: %v", err)
	} else {
		maps, _, _, _, _ := procCounts()
		t.Logf("reopen at the limit succeeded (maps %d)", maps)
		s2.Close()
	}
	release()
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatalf("reopen with mappings to spare: %v", err)
	}
	defer s.Close()
	lost := 0
	for _, i := range acked {
		if ok, err := manyHas(s, i, manyKey(i, 0)); err != nil || !ok {
			lost++
			if lost < 5 {
				t.Errorf("filter %d lost its acknowledged key (%v)", i, err)
			}
		}
	}
	for _, i := range acked1 {
		if ok, err := manyHas(s, i, manyKey(i, 1)); err != nil || !ok {
			lost++
			t.Errorf("filter %d lost the key acknowledged at the limit (%v)", i, err)
		}
	}
	if grown > 0 {
		b, err := s.Bloom("grow")
		if err != nil {
			t.Fatalf("growing filter: %v", err)
		}
		for j := 0; j < grown; j++ {
			if !b.Has(manyKey(g, j)) {
				lost++
				if lost < 10 {
					t.Errorf("growing filter lost acknowledged key %d", j)
				}
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d acknowledged keys lost", lost)
	}
	rep, err := s.Check()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("check after: %+v", rep)
}

// TestManyFiltersBuild makes a store of FILTERSTORE_MANY_BUILD filters at
// FILTERSTORE_MANY_DIR (kept), for the probes below.
func TestManyFiltersBuild(t *testing.T) {
	dir, nv := os.Getenv("FILTERSTORE_MANY_DIR"), os.Getenv("FILTERSTORE_MANY_BUILD")
	if dir == "" || nv == "" {
		t.Skip("set FILTERSTORE_MANY_DIR and FILTERSTORE_MANY_BUILD")
	}
	n, _ := strconv.Atoi(nv)
	s, err := Open(dir, &Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := manyCreate(s, i); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	t.Logf("%d creates in %v", n, time.Since(t0))
}

// TestManyFiltersProbe opens the store at FILTERSTORE_MANY_DIR and times
// single adds to random filters, a checkpoint with 10 filters changed,
// and adds to one filter.
func TestManyFiltersProbe(t *testing.T) {
	dir := os.Getenv("FILTERSTORE_MANY_DIR")
	if dir == "" || os.Getenv("FILTERSTORE_MANY_BUILD") != "" {
		t.Skip("set FILTERSTORE_MANY_DIR")
	}
	t0 := time.Now()
	s, err := Open(dir, &Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Logf("open: %v", time.Since(t0))
	infos, _ := s.List()
	n := 0
	for _, in := range infos {
		if strings.HasPrefix(in.Name, "sst-") {
			n++
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := 0; round < 3; round++ {
		t0 = time.Now()
		for j := 0; j < 300; j++ {
			i := rng.IntN(n)
			if err := manyAdd(s, i, manyKey(i, rng.IntN(1<<30))); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("300 adds to random filters of %d: %.0f µs/op", n, float64(time.Since(t0).Microseconds())/300)
		t0 = time.Now()
		for j := 0; j < 300; j++ {
			if err := manyAdd(s, 0, manyKey(0, rng.IntN(1<<30))); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("300 adds to one filter: %.0f µs/op", float64(time.Since(t0).Microseconds())/300)
		t0 = time.Now()
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		t.Logf("checkpoint: %v", time.Since(t0))
	}
}

// TestManyFiltersChurn keeps FILTERSTORE_MANY_CHURN filters live while
// compactions create and drop them: each cycle creates a tenth as many
// new filters (one key each, in batches) and drops the oldest tenth,
// then checkpoints. It reports what grows.
//
//	FILTERSTORE_MANY_CHURN=10000 go test ./store -run 'TestManyFiltersChurn$' -v -timeout 1h
func TestManyFiltersChurn(t *testing.T) {
	ns := manyCounts(t, "FILTERSTORE_MANY_CHURN")
	n := ns[0]
	cycles := 20
	if len(ns) > 1 {
		cycles = ns[1]
	}
	dir := t.TempDir()
	opts := &Options{CheckpointEvery: -1}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	for i := 0; i < n; i++ {
		if err := manyCreate(s, i); err != nil {
			t.Fatal(err)
		}
	}
	step := max(1, n/10)
	lo, hi := 0, n // live: [lo, hi)
	t.Logf("| cycle | live | next id | files | catalog MiB | WAL KiB | maps (flt, ro) | create ms/op | drop ms/op | ckpt ms |")
	for c := 0; c <= cycles; c++ {
		var tc, td, tk time.Duration
		if c > 0 {
			t0 := time.Now()
			for i := hi; i < hi+step; i++ {
				if err := manyCreate(s, i); err != nil {
					t.Fatalf("cycle %d: create %d: %v", c, i, err)
				}
			}
			tc = time.Since(t0)
			bt := s.NewBatch()
			for i := hi; i < hi+step; i++ {
				switch i % 10 {
				case 8:
					f, _ := s.Cuckoo(manyName(i))
					bt.CuckooAdd(f, manyKey(i, 0))
				case 9:
					f, _ := s.Counting(manyName(i))
					bt.CountingAdd(f, manyKey(i, 0))
				default:
					f, _ := s.Bloom(manyName(i))
					bt.BloomAdd(f, manyKey(i, 0))
				}
			}
			if _, err := bt.Commit(); err != nil {
				t.Fatal(err)
			}
			hi += step
			t0 = time.Now()
			for i := lo; i < lo+step; i++ {
				if err := s.Drop(manyName(i)); err != nil {
					t.Fatalf("cycle %d: drop %d: %v", c, i, err)
				}
			}
			td = time.Since(t0)
			lo += step
			t0 = time.Now()
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			tk = time.Since(t0)
		}
		if c%2 == 0 || c == cycles {
			_, files := dirSize(filepath.Join(dir, "filters"))
			walB, _ := dirSize(filepath.Join(dir, "wal"))
			maps, flt, ro, _, _ := procCounts()
			s.mu.Lock()
			next := s.nextID
			s.mu.Unlock()
			t.Logf("| %d | %d | %d | %d | %.1f | %d | %d (%d, %d) | %.2f | %.2f | %.0f |", c, hi-lo, next, files,
				float64(fileSize(filepath.Join(dir, "catalog.db")))/(1<<20), walB>>10, maps, flt, ro,
				float64(tc.Microseconds())/1000/float64(step), float64(td.Microseconds())/1000/float64(step), float64(tk.Microseconds())/1000)
		}
	}
	// Every live filter's key, after a reopen.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := max(lo, n); i < hi; i++ {
		if ok, err := manyHas(s, i, manyKey(i, 0)); err != nil || !ok {
			t.Fatalf("filter %d lost its key (%v)", i, err)
		}
	}
	if infos, _ := s.List(); len(infos) != hi-lo {
		t.Fatalf("List: %d filters, want %d", len(infos), hi-lo)
	}
}

// TestManyFiltersStall measures what creates and drops (a compaction's)
// cost the lookups of a handle by name (Store.Bloom) and the adds to
// another filter running beside them.
//
//	FILTERSTORE_MANY_STALL=1 go test ./store -run 'TestManyFiltersStall$' -v
func TestManyFiltersStall(t *testing.T) {
	if os.Getenv("FILTERSTORE_MANY_STALL") == "" {
		t.Skip("set FILTERSTORE_MANY_STALL=1 to run")
	}
	dir := t.TempDir()
	s, err := Open(dir, &Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hot, err := s.CreateBloom("hot", BloomConfig{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	pct := func(ds []time.Duration, p float64) time.Duration {
		s := append([]time.Duration(nil), ds...)
		slicesSortDur(s)
		return s[int(float64(len(s)-1)*p)]
	}
	phase := 0
	measure := func(label string, bg func(stop <-chan struct{})) {
		phase++
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { bg(stop); close(done) }()
		var look, add []time.Duration
		end := time.Now().Add(3 * time.Second)
		for j := 0; time.Now().Before(end); j++ {
			t0 := time.Now()
			if _, err := s.Bloom("hot"); err != nil {
				t.Fatal(err)
			}
			look = append(look, time.Since(t0))
			t0 = time.Now()
			if _, err := hot.Add(manyKey(-phase, j)); err != nil {
				t.Fatal(err)
			}
			add = append(add, time.Since(t0))
		}
		close(stop)
		<-done
		t.Logf("| %s | %d | %v | %v | %v | %v | %v |", label, len(add), pct(look, 0.5), pct(look, 0.99), pct(look, 1), pct(add, 0.5), pct(add, 0.99))
	}
	t.Logf("| beside | adds | Bloom(name) p50 | p99 | max | Add p50 | p99 |")
	measure("nothing", func(stop <-chan struct{}) { <-stop })
	next := 0
	measure("creates", func(stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := manyCreate(s, next); err != nil {
				t.Error(err)
				return
			}
			next++
		}
	})
	dropped := 0
	measure("drops", func(stop <-chan struct{}) {
		for ; dropped < next; dropped++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.Drop(manyName(dropped)); err != nil {
				t.Error(err)
				return
			}
		}
	})
}

func slicesSortDur(s []time.Duration) {
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
}
