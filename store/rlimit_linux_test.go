package store_test

// Process resource limits reached in the middle of operations
// (RLIMIT_FSIZE, RLIMIT_AS, RLIMIT_NOFILE): a child process (the test
// binary re-executed with rlEnvChild set) opens a store, lowers a limit,
// runs operations, raises the limit again and closes; it writes a line
// on fd 3 (a pipe, which no file size limit reaches) for every change
// acknowledged and every error. The parent then checks that the child
// was neither killed nor panicked, that every error names the resource,
// that nothing was acknowledged after the store failed, and, once it
// reopens the store, that every acknowledged key is there.
//
// Replay one: go test ./store -run 'TestRlimit/NAME' -v (the seed is
// printed; RL_SEED=n fixes it).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/store"
)

const rlEnvChild = "FILTERSTORE_RLIMIT_CHILD"

type rlArgs struct {
	Scenario string
	Dir      string
	Seed     uint64
	Limit    uint64
	SegSize  int64
	N        int
}

type rlOut struct{ w io.Writer }

func (o *rlOut) emit(format string, a ...any) {
	line := strings.ReplaceAll(fmt.Sprintf(format, a...), "\n", " | ")
	if _, err := o.w.Write([]byte(line + "\n")); err != nil {
		os.Exit(4)
	}
}

// rlChild is the state of a child: the store, its filters, the resource
// whose errno every error must wrap, and whether the store has failed.
type rlChild struct {
	a      rlArgs
	out    *rlOut
	rng    *rand.Rand
	s      *store.Store
	b      *store.Bloom
	c      *store.Cuckoo
	n      *store.Counting
	m      *store.Bitmap
	errno  syscall.Errno
	failed bool
	limit  bool // the limit is lowered
	nOps   int
}

const rlBitmapBits = 1 << 16

func (c *rlChild) key(i int) string { return fmt.Sprintf("k%d-%d", c.a.Seed, i) }

// result records the outcome of a change: an ack line for a nil error
// (a finding "F" if the store had failed), an error line otherwise, with
// a finding "U" if it does not wrap the resource's errno and is not a
// plain ErrFull/ErrInvalid.
func (c *rlChild) result(op string, ack string, err error) bool {
	if err == nil {
		if c.failed {
			c.out.emit("F %s acknowledged after the store failed", op)
		}
		if ack != "" {
			c.out.emit("A %s", ack)
		}
		return true
	}
	if errors.Is(err, store.ErrFailed) {
		c.failed = true
	}
	named := errors.Is(err, c.errno)
	c.out.emit("E %s limit=%v failed=%v named=%v: %v", op, c.limit, errors.Is(err, store.ErrFailed), named, err)
	if !named && c.limit && !errors.Is(err, store.ErrFull) && !errors.Is(err, store.ErrClosed) {
		c.out.emit("U %s: %v", op, err)
	}
	if !named && !c.limit && !errors.Is(err, store.ErrFailed) {
		c.out.emit("U %s (limit raised, store not failed): %v", op, err)
	}
	return false
}

func (c *rlChild) open(opts *store.Options) error {
	s, err := store.Open(c.a.Dir, opts)
	if err != nil {
		return err
	}
	c.s = s
	if c.b, err = s.EnsureBloom("b", store.BloomConfig{Capacity: 100}); err != nil {
		return err
	}
	if c.c, err = s.EnsureCuckoo("c", store.CuckooConfig{Capacity: 1000, Expansion: 2}); err != nil {
		return err
	}
	if c.n, err = s.EnsureCounting("n", store.BloomConfig{Capacity: 2000}); err != nil {
		return err
	}
	if c.m, err = s.EnsureBitmap("m", rlBitmapBits); err != nil {
		return err
	}
	return nil
}

// step runs one random change.
func (c *rlChild) step() {
	i := c.nOps
	c.nOps++
	k := c.key(i)
	switch r := c.rng.IntN(10); {
	case r < 4:
		_, err := c.b.Add([]byte(k))
		c.result("bloom add "+k, "b "+k, err)
	case r < 7:
		c.result("cuckoo add "+k, "c "+k, c.c.Add([]byte(k)))
	case r < 8:
		c.result("counting add "+k, "n "+k, c.n.Add([]byte(k)))
	case r < 9:
		off := store.Hash([]byte(k)) % rlBitmapBits
		_, err := c.m.Set(off)
		c.result(fmt.Sprintf("bitmap set %d", off), fmt.Sprintf("m %d", off), err)
	default:
		ks := make([][]byte, 1+c.rng.IntN(20))
		for j := range ks {
			ks[j] = []byte(fmt.Sprintf("%s.%d", k, j))
		}
		_, err := c.b.AddMany(ks)
		ok := c.result("bloom addmany "+k, "", err)
		if ok {
			for _, kk := range ks {
				c.out.emit("A b %s", kk)
			}
		}
	}
}

func rlSetLimit(res int, v uint64) error {
	var was unix.Rlimit
	if err := unix.Getrlimit(res, &was); err != nil {
		return err
	}
	lim := unix.Rlimit{Cur: v, Max: was.Max}
	return unix.Setrlimit(res, &lim)
}

func rlVmSize() uint64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmSize:") {
			f := strings.Fields(l)
			n, _ := strconv.ParseUint(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

// TestRlimitChild is the child of the TestRlimit tests; run directly it
// does nothing.
func TestRlimitChild(t *testing.T) {
	js := os.Getenv(rlEnvChild)
	if js == "" {
		t.Skip("helper process of TestRlimit")
	}
	var a rlArgs
	if err := json.Unmarshal([]byte(js), &a); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(2 * time.Minute)
		os.Exit(5)
	}()
	c := &rlChild{a: a, out: &rlOut{w: os.NewFile(3, "rlimit-pipe")}, rng: rand.New(rand.NewPCG(a.Seed, 7))}
	code := rlRun(c)
	c.out.emit("X %d", code)
	os.Exit(code)
}

func rlRun(c *rlChild) int {
	a := c.a
	opts := &store.Options{CheckpointEvery: -1, SegmentSize: a.SegSize}
	if err := c.open(opts); err != nil {
		c.out.emit("E open: %v", err)
		return 3
	}
	// Warm up: some keys before the limit.
	for range 200 {
		c.step()
	}
	if err := c.s.Checkpoint(); err != nil {
		c.out.emit("E checkpoint: %v", err)
		return 3
	}
	if sc := a.Scenario; strings.HasSuffix(sc, "backup") || strings.HasSuffix(sc, "export") || strings.HasSuffix(sc, "readonly") || strings.HasSuffix(sc, "hasmany") {
		// A filter whose file is larger than the limit.
		bits := uint64(1 << 20)
		if strings.HasPrefix(sc, "as") {
			bits = 1 << 26
		}
		big, err := c.s.CreateBitmap("big", bits)
		if err == nil {
			_, err = big.Set(12345)
		}
		if err != nil {
			c.out.emit("E big: %v", err)
			return 3
		}
		c.out.emit("A m2 big 12345")
	}
	if strings.HasPrefix(a.Scenario, "as") {
		// Reserve heap address space for the Go runtime before the
		// limit, so that what fails under it is the store's mappings.
		ballast := make([]byte, 512<<20)
		for i := 0; i < len(ballast); i += 4096 {
			ballast[i] = 1
		}
		ballast = nil
		runtime.GC()
		debug.FreeOSMemory()
	}
	if err := c.lower(); err != nil {
		c.out.emit("E setrlimit: %v", err)
		return 3
	}
	c.out.emit("L limit lowered")
	rlUnder(c)
	c.raise()
	for range 100 {
		c.step()
	}
	c.result("checkpoint after", "", c.s.Checkpoint())
	err := c.s.Close()
	c.out.emit("C close: %v (failed=%v)", err, c.failed)
	if err != nil && !c.failed {
		c.out.emit("U close of a store not failed: %v", err)
	}
	// Reopen under the limit: it may fail, with an error naming the
	// resource, but must not panic or lose anything.
	if err := c.lower(); err != nil {
		c.out.emit("E setrlimit: %v", err)
		return 3
	}
	c.failed = false // a new store
	s, err := store.Open(a.Dir, opts)
	if err != nil {
		c.out.emit("R reopen under the limit: named=%v: %v", errors.Is(err, c.errno), err)
		if !errors.Is(err, c.errno) {
			c.out.emit("U reopen under the limit: %v", err)
		}
	} else {
		c.out.emit("R reopen under the limit: ok")
		c.result("close of the reopen under the limit", "", s.Close())
	}
	c.raise()
	return 0
}

func (c *rlChild) lower() error {
	a := c.a
	c.limit = true
	switch {
	case strings.HasPrefix(a.Scenario, "fsize"):
		c.errno = syscall.EFBIG
		return rlSetLimit(unix.RLIMIT_FSIZE, a.Limit)
	case strings.HasPrefix(a.Scenario, "as"):
		c.errno = syscall.ENOMEM
		return rlSetLimit(unix.RLIMIT_AS, rlVmSize()+a.Limit)
	case strings.HasPrefix(a.Scenario, "nofile"):
		c.errno = syscall.EMFILE
		return rlLowerNofile()
	}
	return nil
}

func (c *rlChild) raise() {
	a := c.a
	switch {
	case strings.HasPrefix(a.Scenario, "fsize"):
		rlSetLimit(unix.RLIMIT_FSIZE, unix.RLIM_INFINITY)
	case strings.HasPrefix(a.Scenario, "as"):
		rlSetLimit(unix.RLIMIT_AS, unix.RLIM_INFINITY)
	case strings.HasPrefix(a.Scenario, "nofile"):
		var r unix.Rlimit
		unix.Getrlimit(unix.RLIMIT_NOFILE, &r)
		r.Cur = r.Max
		unix.Setrlimit(unix.RLIMIT_NOFILE, &r)
		for _, f := range rlFillers {
			f.Close()
		}
		rlFillers = nil
	}
	c.limit = false
	c.out.emit("L limit raised")
}

var rlFillers []*os.File

// rlLowerNofile lowers RLIMIT_NOFILE so that no new descriptor can be
// taken (as TestCatalogOutOfDescriptorsFailsOnlyTheCall does).
func rlLowerNofile() error {
	var was unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &was); err != nil {
		return err
	}
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return err
		}
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return err
		}
		if fd := f.Fd(); int(fd) >= len(fds)-2 {
			f.Close()
			low := was
			low.Cur = uint64(fd)
			return unix.Setrlimit(unix.RLIMIT_NOFILE, &low)
		}
		rlFillers = append(rlFillers, f)
	}
}

func rlKeys(prefix string, n int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for i := range n {
			if !yield([]byte(fmt.Sprintf("%s.%d", prefix, i)), nil) {
				return
			}
		}
	}
}

// rlUnder runs the scenario's operations under the lowered limit.
func rlUnder(c *rlChild) {
	a := c.a
	sc := a.Scenario
	_, sc, _ = strings.Cut(sc, "-")
	switch sc {
	case "ops":
		for range a.N {
			c.step()
			if c.failed && c.nOps > 400 {
				break
			}
			if c.nOps%97 == 0 {
				c.result("checkpoint", "", c.s.Checkpoint())
			}
		}
	case "wal":
		// Changes without checkpoints: the active WAL segment grows past
		// the limit, and that write fails the store.
		for range a.N {
			c.step()
			if c.failed && c.nOps > 400 {
				break
			}
		}
	case "load":
		// Loads into new filters: their layers are made in anonymous
		// memory and then files.
		for i, kind := range []string{"bloom", "cuckoo", "counting"} {
			name := fmt.Sprintf("load%d", i)
			p := c.key(1_000_000 + i)
			var err error
			switch kind {
			case "bloom":
				var f *store.Bloom
				if f, err = c.s.CreateBloom(name, store.BloomConfig{Capacity: 100}); err == nil {
					err = f.Load(rlKeys(p, a.N))
				}
			case "cuckoo":
				var f *store.Cuckoo
				if f, err = c.s.CreateCuckoo(name, store.CuckooConfig{Capacity: 100}); err == nil {
					err = f.LoadParallel(rlKeys(p+"a", a.N/2), rlKeys(p+"b", a.N/2))
				}
			case "counting":
				var f *store.Counting
				if f, err = c.s.CreateCounting(name, store.BloomConfig{Capacity: uint64(a.N)}); err == nil {
					err = f.Load(rlKeys(p, a.N))
				}
			}
			if c.result("load "+kind+" "+name, "", err) {
				switch kind {
				case "cuckoo":
					c.out.emit("A load %s %s %d", name, p+"a", a.N/2)
					c.out.emit("A load %s %s %d", name, p+"b", a.N/2)
				default:
					c.out.emit("A load %s %s %d", name, p, a.N)
				}
			}
			for range 20 {
				c.step()
			}
		}
	case "backup":
		for range 50 {
			c.step()
		}
		c.result("backup", "", c.s.Backup(a.Dir+".bak"))
		for range 50 {
			c.step()
		}
	case "export":
		// WriteTo a file past the limit, then Import a stream larger
		// than the limit.
		big, err := c.s.Bitmap("big")
		if err != nil {
			c.result("bitmap big", "", err)
			return
		}
		var buf bytes.Buffer
		if _, err := big.WriteTo(&buf); err != nil {
			c.result("writeto buffer", "", err)
			return
		}
		f, err := os.Create(a.Dir + ".export")
		if err == nil {
			_, err = big.WriteTo(f)
			f.Close()
			c.out.emit("E writeto file (the caller's writer) named=%v: %v", errors.Is(err, c.errno), err)
		}
		err = c.s.Import("imported", bytes.NewReader(buf.Bytes()))
		c.result("import", "", err)
		for range 50 {
			c.step()
		}
	case "catalog":
		// Creates until the catalog file must grow.
		for i := range a.N {
			_, err := c.s.CreateBitmap(fmt.Sprintf("cat%03d-%s", i, strings.Repeat("x", 150)), 64)
			c.result(fmt.Sprintf("create bitmap %d", i), "", err)
			c.step()
		}
		c.result("checkpoint", "", c.s.Checkpoint())
	case "grow":
		// Adds in batches to scalable filters whose layers grow fast,
		// until a layer's file passes the limit.
		g, err := c.s.CreateBloom("g", store.BloomConfig{Capacity: 100, Expansion: 64})
		if !c.result("create g", "", err) {
			return
		}
		gc, err := c.s.CreateCuckoo("gc", store.CuckooConfig{Capacity: 1000, Expansion: 16})
		if !c.result("create gc", "", err) {
			return
		}
		errs := 0
		for j := 0; j*5000 < a.N && errs < 20; j++ {
			p := c.key(2_000_000 + j)
			ks := make([][]byte, 5000)
			for i := range ks {
				ks[i] = []byte(fmt.Sprintf("%s.%d", p, i))
			}
			_, err := g.AddMany(ks)
			if c.result("bloom g addmany "+p, "", err) {
				c.out.emit("A load g %s %d", p, len(ks))
			} else {
				errs++
			}
			if j%4 == 0 {
				_, err := gc.AddMany(ks)
				if c.result("cuckoo gc addmany "+p, "", err) {
					c.out.emit("A load gc %s %d", p, len(ks))
				} else {
					errs++
				}
			}
			c.step()
		}
	case "readonly":
		for range 50 {
			c.step()
		}
		ro, err := store.Open(a.Dir, &store.Options{ReadOnly: true})
		c.result("readonly open", "", err)
		if err == nil {
			ro.Close()
		}
		for range 50 {
			c.step()
		}
	case "hasmany":
		ks := make([][]byte, a.N)
		for i := range ks {
			ks[i] = []byte(c.key(i))
		}
		c.b.HasMany(ks)
		c.c.HasMany(ks)
		c.n.HasMany(ks)
		for range 50 {
			c.step()
		}
	}
}

// rlParent runs one child and checks what it reports.
func rlParent(t *testing.T, a rlArgs) {
	t.Helper()
	if a.Seed == 0 {
		if s := os.Getenv("RL_SEED"); s != "" {
			a.Seed, _ = strconv.ParseUint(s, 10, 64)
		} else {
			a.Seed = rand.Uint64()%1_000_000 + 1
		}
	}
	t.Logf("scenario %s seed %d limit %d (replay: RL_SEED=%d go test ./store -run 'TestRlimit/%s$' -v)", a.Scenario, a.Seed, a.Limit, a.Seed, t.Name()[strings.Index(t.Name(), "/")+1:])
	root := t.TempDir()
	a.Dir = filepath.Join(root, "s")
	js, _ := json.Marshal(a)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestRlimitChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), rlEnvChild+"="+string(js))
	cmd.ExtraFiles = []*os.File{pw}
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var lines []string
	sc := bufio.NewScanner(pr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	werr := cmd.Wait()
	var findings []string
	acked := map[string][]string{}
	nErr := 0
	for _, l := range lines {
		switch l[0] {
		case 'A':
			f := strings.Fields(l)
			acked[f[1]] = append(acked[f[1]], strings.Join(f[2:], " "))
		case 'E':
			nErr++
			if nErr <= 8 {
				t.Log(l)
			}
		case 'F', 'U':
			findings = append(findings, l)
		case 'L', 'C', 'X', 'R':
			t.Log(l)
		}
	}
	t.Logf("child: %d lines, %d errors", len(lines), nErr)
	if werr != nil || !strings.HasSuffix(strings.TrimSpace(lastLine(lines)), "X 0") {
		out := stderr.String()
		if len(out) > 4000 {
			out = out[:2000] + "\n...\n" + out[len(out)-2000:]
		}
		t.Errorf("child: %v (last line %q)\n%s", werr, lastLine(lines), out)
	}
	for i, f := range findings {
		if i < 10 {
			t.Errorf("finding: %s", f)
		}
	}
	if len(findings) > 10 {
		t.Errorf("... %d findings in all", len(findings))
	}
	rlVerify(t, a.Dir, acked)
	if strings.HasSuffix(a.Scenario, "backup") {
		if _, err := os.Stat(a.Dir + ".bak"); err == nil {
			t.Log("backup copy exists: verifying what was acked before it")
		}
	}
}

func lastLine(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return l[len(l)-1]
}

// rlVerify reopens the store and checks every acknowledged key.
func rlVerify(t *testing.T, dir string, acked map[string][]string) {
	t.Helper()
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	missing := 0
	miss := func(what string) {
		missing++
		if missing <= 10 {
			t.Errorf("acknowledged but absent after reopen: %s", what)
		}
	}
	total := 0
	for kind, ks := range acked {
		for _, k := range ks {
			total++
			switch kind {
			case "b":
				f, err := s.Bloom("b")
				if err != nil || !f.Has([]byte(k)) {
					miss("bloom " + k)
				}
			case "c":
				f, err := s.Cuckoo("c")
				if err != nil || !f.Has([]byte(k)) {
					miss("cuckoo " + k)
				}
			case "n":
				f, err := s.Counting("n")
				if err != nil || !f.Has([]byte(k)) {
					miss("counting " + k)
				}
			case "m", "m2":
				name := "m"
				if kind == "m2" {
					name, k, _ = strings.Cut(k, " ")
				}
				off, _ := strconv.ParseUint(k, 10, 64)
				f, err := s.Bitmap(name)
				if err != nil || !f.Get(off) {
					miss("bitmap " + k)
				}
			case "load":
				f := strings.Fields(k)
				name, p := f[0], f[1]
				n, _ := strconv.Atoi(f[2])
				has := func([]byte) bool { return false }
				if b, err := s.Bloom(name); err == nil {
					has = b.Has
				} else if c, err := s.Cuckoo(name); err == nil {
					has = c.Has
				} else if c, err := s.Counting(name); err == nil {
					has = c.Has
				}
				for i := range n {
					if kk := fmt.Sprintf("%s.%d", p, i); !has([]byte(kk)) {
						miss("loaded " + name + " " + kk)
					}
				}
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged changes absent after reopen", missing, total)
	}
	t.Logf("reopen: %d acknowledged changes checked", total)
	if rep, err := s.Check(); err != nil {
		t.Errorf("Check after reopen: %v (%+v)", err, rep)
	}
}

// TestRlimit runs each scenario in a child. (A catalog scenario under
// RLIMIT_AS is left out: with the few KiB of headroom it would take to
// refuse bbolt's remap of catalog.db and nothing else, the Go runtime's
// own off-heap allocations, persistentalloc, die first, "fatal error:
// runtime: cannot allocate memory", which is no fault of the store.)
func TestRlimit(t *testing.T) {
	if os.Getenv(rlEnvChild) != "" {
		t.Skip("in the child")
	}
	scenarios := []rlArgs{
		{Scenario: "fsize-wal", Limit: 96 << 10, SegSize: 1 << 20, N: 3000},
		{Scenario: "fsize-grow", Limit: 2 << 20, SegSize: 1 << 20, N: 450000},
		{Scenario: "fsize-load", Limit: 300 << 10, SegSize: 64 << 10, N: 500000},
		{Scenario: "fsize-backup", Limit: 64 << 10, SegSize: 64 << 10},
		{Scenario: "fsize-export", Limit: 64 << 10, SegSize: 64 << 10},
		{Scenario: "fsize-catalog", Limit: 40 << 10, SegSize: 1 << 20, N: 300},
		{Scenario: "as-grow", Limit: 16 << 20, SegSize: 1 << 20, N: 450000},
		{Scenario: "as-load", Limit: 8 << 20, SegSize: 1 << 20, N: 3000000},
		{Scenario: "as-readonly", Limit: 4 << 20, SegSize: 1 << 20},
		{Scenario: "as-backup", Limit: 4 << 20, SegSize: 1 << 20},
		{Scenario: "as-hasmany", Limit: 4 << 20, SegSize: 1 << 20, N: 10000},
		{Scenario: "nofile-ops", SegSize: 64 << 10, N: 3000},
		{Scenario: "nofile-grow", SegSize: 1 << 20, N: 3000},
		{Scenario: "nofile-backup", SegSize: 1 << 20},
		{Scenario: "nofile-load", SegSize: 1 << 20, N: 20000},
		{Scenario: "nofile-readonly", SegSize: 1 << 20},
	}
	if racedetect.Enabled && testing.Short() {
		// The race runtime's own allocator fails under RLIMIT_AS
		// ("ThreadSanitizer: internal allocator is out of memory"), and
		// the children run the instrumented store about 5x slower: the
		// plain run takes every scenario; this one a scenario of each
		// other limit whose failure the store must survive.
		scenarios = slices.DeleteFunc(scenarios, func(a rlArgs) bool {
			return a.Scenario != "fsize-wal" && a.Scenario != "fsize-catalog" && a.Scenario != "nofile-grow"
		})
	}
	for _, a := range scenarios {
		name := fmt.Sprintf("%s-%d", a.Scenario, a.Limit>>10)
		t.Run(name, func(t *testing.T) { rlParent(t, a) })
	}
}
