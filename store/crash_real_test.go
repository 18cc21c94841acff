package store_test

// Real-crash test (docs/DESIGN.md §6): a child process (this test binary,
// re-executed) performs random operations on a store and reports every
// acknowledged one on a pipe; the parent kills it with SIGKILL at random
// points, reopens the store and checks I1, I4 and I5, plus exact bitmap
// contents and the item counts (the crash model of crashmodel_test.go, in
// package store). Each cycle's state is checked twice:
// through a read-only snapshot of the crashed directory, then (three cycles
// in four) through a writable Open that recovers it; the fourth cycle
// leaves the recovery to the next child.
//
// Protocol on the pipe (fd 3 in the child), one line per write:
//
//	O              the store is open and the four filters exist
//	? <op>         the child is about to perform <op>
//	<ack>          <op> returned; see rcModel.apply for the forms
//	E <msg>        an operation failed: the child exits with status 3
//
// Every op is announced before it starts, so at most one op (the last
// announced, unacknowledged one) may or may not have happened when the child
// died. The parent's model (store.CrashModel) keeps a lower and an upper
// bound per key and an "unknown" state per bit for exactly that case.
//
// A cuckoo Delete the store refuses (the key matches in two layers, see
// store.Cuckoo.Delete) is reported as "C-R" and changes nothing; any loss of
// an acknowledged key fails the test.
//
// Run more cycles with FILTERSTORE_CRASH_CYCLES=200, and repeat a run's
// random choices with FILTERSTORE_SEED=<seed> (kill timing still
// depends on the machine, so a rerun is not an exact replay).

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/smaps"
	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/store"
)

const (
	rcEnvChild     = "FILTERSTORE_CRASH_CHILD" // store directory; set only in the child
	rcEnvChildSeed = "FILTERSTORE_CRASH_CHILD_SEED"
	rcEnvChildCyc  = "FILTERSTORE_CRASH_CHILD_CYCLE"
	rcEnvChildKeys = "FILTERSTORE_CRASH_CHILD_KEYS" // deletable keys from earlier cycles
	rcEnvChildBig  = "FILTERSTORE_CRASH_CHILD_BIG"  // "1": create the filters at rcBig's capacities
	rcEnvCycles    = "FILTERSTORE_CRASH_CYCLES"

	rcBits      = 4096 // bitmap size
	rcMaxCopies = 3    // cuckoo copies of one key (a key's two buckets hold 8)
	rcMaxCount  = 10   // counting adds of one key
	rcKeysPass  = 400  // deletable keys handed to a child, per filter
)

// rcSizes are the capacities the child creates its filters with.
type rcSizes struct{ bloom, cuckoo, counting uint64 }

var (
	// rcSmall makes small filters that grow layers often.
	rcSmall = rcSizes{bloom: 200, cuckoo: 64, counting: 500}
	// rcBig makes every filter file 2 MiB or more, so that every process
	// maps them for huge pages (mmapbits' mapShared).
	rcBig = rcSizes{bloom: 2_000_000, cuckoo: 1_000_000, counting: 500_000}
)

// TestRealCrashChild is the child half of TestRealCrashSIGKILL; run
// directly it does nothing.
func TestRealCrashChild(t *testing.T) {
	dir := os.Getenv(rcEnvChild)
	if dir == "" {
		t.Skip("helper process of TestRealCrashSIGKILL")
	}
	// Never return to the testing framework: the parent kills us.
	os.Exit(rcChild(dir))
}

// rcMultiset is the child's view of a filter's keys with exact counts.
type rcMultiset struct {
	keys []string
	n    map[string]int
}

func (m *rcMultiset) add(k string) {
	if m.n[k] == 0 {
		m.keys = append(m.keys, k)
	}
	m.n[k]++
}

// pick returns a random key with a count above zero.
func (m *rcMultiset) pick(rng *rand.Rand) (string, bool) {
	for len(m.keys) > 0 {
		i := rng.IntN(len(m.keys))
		k := m.keys[i]
		if m.n[k] > 0 {
			return k, true
		}
		m.keys[i] = m.keys[len(m.keys)-1]
		m.keys = m.keys[:len(m.keys)-1]
	}
	return "", false
}

func rcChild(dir string) int {
	out := os.NewFile(3, "crash-pipe")
	emit := func(line string) {
		if _, err := out.Write([]byte(line + "\n")); err != nil {
			os.Exit(4) // the parent is gone
		}
	}
	fail := func(op string, err error) int {
		msg := strings.ReplaceAll(fmt.Sprintf("%s: %v", op, err), "\n", " | ")
		fmt.Fprintln(os.Stderr, "crash child:", msg)
		emit("E " + msg)
		return 3
	}
	// A child whose parent vanished without killing it must not run forever.
	go func() {
		time.Sleep(2 * time.Minute)
		os.Exit(5)
	}()
	seed, err := strconv.ParseUint(os.Getenv(rcEnvChildSeed), 10, 64)
	if err != nil {
		return fail("seed", err)
	}
	cycle, err := strconv.Atoi(os.Getenv(rcEnvChildCyc))
	if err != nil {
		return fail("cycle", err)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(cycle)))
	cu := &rcMultiset{n: map[string]int{}}
	cn := &rcMultiset{n: map[string]int{}}
	if p := os.Getenv(rcEnvChildKeys); p != "" {
		data, err := os.ReadFile(p)
		if err != nil {
			return fail("keys file", err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			f := strings.Fields(l)
			if len(f) != 3 {
				continue
			}
			n, _ := strconv.Atoi(f[2])
			for range n {
				if f[0] == "C" {
					cu.add(f[1])
				} else {
					cn.add(f[1])
				}
			}
		}
	}

	sizes := rcSmall
	if os.Getenv(rcEnvChildBig) == "1" {
		sizes = rcBig
	}
	s, err := store.Open(dir, nil) // SyncAlways
	if err != nil {
		return fail("open", err)
	}
	b, err := s.Bloom("bloom")
	if errors.Is(err, store.ErrNotFound) {
		b, err = s.CreateBloom("bloom", store.BloomConfig{Capacity: sizes.bloom})
	}
	if err != nil {
		return fail("bloom", err)
	}
	c, err := s.Cuckoo("cuckoo")
	if errors.Is(err, store.ErrNotFound) {
		c, err = s.CreateCuckoo("cuckoo", store.CuckooConfig{Capacity: sizes.cuckoo, Expansion: 2})
	}
	if err != nil {
		return fail("cuckoo", err)
	}
	n, err := s.Counting("counting")
	if errors.Is(err, store.ErrNotFound) {
		n, err = s.CreateCounting("counting", store.BloomConfig{Capacity: sizes.counting})
	}
	if err != nil {
		return fail("counting", err)
	}
	m, err := s.Bitmap("bitmap")
	if errors.Is(err, store.ErrNotFound) {
		m, err = s.CreateBitmap("bitmap", rcBits)
	}
	if err != nil {
		return fail("bitmap", err)
	}
	emit("O")

	// do announces op, runs fn and acknowledges with the line fn returns.
	do := func(op string, fn func() (string, error)) error {
		emit("? " + op)
		ack, err := fn()
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		emit(ack)
		return nil
	}
	for i := 0; ; i++ {
		newKey := func(kind string) string { return fmt.Sprintf("c%d-%s%d", cycle, kind, i) }
		var err error
		switch r := rng.IntN(100); {
		case r < 24:
			k := newKey("b")
			err = do("B "+k, func() (string, error) {
				_, err := b.Add([]byte(k))
				return "B " + k, err
			})
		case r < 38:
			k := newKey("c")
			if rng.IntN(10) < 3 {
				if old, ok := cu.pick(rng); ok && cu.n[old] < rcMaxCopies {
					k = old
				}
			}
			err = do("C+ "+k, func() (string, error) {
				err := c.Add([]byte(k))
				if errors.Is(err, store.ErrFull) {
					return "F C+ " + k, nil
				}
				if err == nil {
					cu.add(k)
				}
				return "C+ " + k, err
			})
		case r < 43:
			k := newKey("x")
			err = do("CX "+k, func() (string, error) {
				ok, err := c.AddNX([]byte(k))
				switch {
				case errors.Is(err, store.ErrFull):
					return "F CX " + k, nil
				case err != nil:
					return "", err
				case ok:
					cu.add(k)
					return "CX1 " + k, nil
				}
				return "CX0 " + k, nil
			})
		case r < 55:
			k, ok := cu.pick(rng)
			if !ok {
				continue
			}
			err = do("C- "+k, func() (string, error) {
				found, err := c.Delete([]byte(k))
				if errors.Is(err, store.ErrAmbiguous) && !found && c.Has([]byte(k)) {
					// Refused: the key matches in two layers (see
					// store.Cuckoo.Delete); it is still present.
					cu.n[k] = 0 // do not try again
					return "C-R " + k, nil
				}
				if err != nil || !found {
					cu.n[k] = 0 // its copy is gone: do not try again
					return "C-0 " + k, err
				}
				cu.n[k]--
				return "C- " + k, nil
			})
		case r < 67:
			k := newKey("n")
			if rng.IntN(10) < 4 {
				if old, ok := cn.pick(rng); ok && cn.n[old] < rcMaxCount {
					k = old
				}
			}
			err = do("N+ "+k, func() (string, error) {
				err := n.Add([]byte(k))
				if err == nil {
					cn.add(k)
				}
				return "N+ " + k, err
			})
		case r < 77:
			k, ok := cn.pick(rng)
			if !ok {
				continue
			}
			err = do("N- "+k, func() (string, error) {
				found, err := n.Delete([]byte(k))
				if err != nil || !found {
					return "N-0 " + k, err
				}
				cn.n[k]--
				return "N- " + k, nil
			})
		case r < 88:
			off := strconv.FormatUint(rng.Uint64N(rcBits), 10)
			err = do("S "+off, func() (string, error) {
				o, _ := strconv.ParseUint(off, 10, 64)
				_, err := m.Set(o)
				return "S " + off, err
			})
		case r < 99:
			off := strconv.FormatUint(rng.Uint64N(rcBits), 10)
			err = do("R "+off, func() (string, error) {
				o, _ := strconv.ParseUint(off, 10, 64)
				_, err := m.Clear(o)
				return "R " + off, err
			})
		default:
			err = do("K", func() (string, error) { return "K", s.Checkpoint() })
		}
		if err != nil {
			return fail("op", err)
		}
	}
}

// rcFilters names the child's filters.
var rcFilters = store.CrashFilters{Bloom: "bloom", Cuckoo: "cuckoo", Counting: "counting", Bitmap: "bitmap"}

// rcModel reads the child's lines into the crash model of the store
// package (crashmodel_test.go): it checks the protocol and keeps the op
// announced and not yet acknowledged, which is in flight if the child dies
// in it.
type rcModel struct {
	*store.CrashModel
	pending    string   // announced, not yet acknowledged op
	acked      int      // acknowledged ops (all cycles)
	refused    int      // cuckoo adds refused with ErrFull
	violations []string // found while reading the child's lines
}

func newRcModel() *rcModel {
	return &rcModel{CrashModel: store.NewCrashModel(store.SyncAlways, rcFilters)}
}

// apply takes one complete line from the child.
func (m *rcModel) apply(line string) error {
	if line == "O" {
		return nil
	}
	if strings.HasPrefix(line, "E ") {
		return fmt.Errorf("child failed: %s", line[2:])
	}
	if op, ok := strings.CutPrefix(line, "? "); ok {
		if m.pending != "" {
			return fmt.Errorf("protocol: %q announced while %q is unacknowledged", op, m.pending)
		}
		m.pending = op
		return nil
	}
	code, key, _ := strings.Cut(line, " ")
	refused := code == "F" // ErrFull: nothing changed
	if refused {
		code, key, _ = strings.Cut(key, " ")
		if code != "C+" && code != "CX" {
			return fmt.Errorf("protocol: bad refusal %q", line)
		}
	}
	want := rcAcks[code]
	if key != "" {
		want += " " + key
	}
	if want != m.pending {
		return fmt.Errorf("protocol: %q does not acknowledge %q", line, m.pending)
	}
	if refused {
		m.refused++
	} else if err := m.change(code, key); err != nil {
		return err
	}
	m.pending = ""
	m.acked++
	return nil
}

// rcAcks maps each acknowledgement code to the op it acknowledges.
var rcAcks = map[string]string{
	"B": "B", "C+": "C+", "CX": "CX", "CX1": "CX", "CX0": "CX", "C-": "C-", "C-0": "C-", "C-R": "C-",
	"N+": "N+", "N-": "N-", "N-0": "N-", "S": "S", "R": "R", "K": "K",
}

// rcOp returns the model's op for an announced op (or the change an
// acknowledgement code makes); errNoChange if it changes nothing.
func rcOp(code, key string) (store.CrashOp, error) {
	switch code {
	case "B":
		return store.BloomAdd(key), nil
	case "C+", "CX", "CX1":
		return store.CuckooAdd(key), nil
	case "C-":
		return store.CuckooDelete(key), nil
	case "N+":
		return store.CountingAdd(key), nil
	case "N-":
		return store.CountingDelete(key), nil
	case "S", "R":
		off, err := strconv.ParseUint(key, 10, 64)
		if err != nil || off >= store.CrashBits {
			return store.CrashOp{}, fmt.Errorf("protocol: bad offset %q", key)
		}
		if code == "R" {
			return store.BitClear(off), nil
		}
		return store.BitSet(off), nil
	}
	return store.CrashOp{}, errNoChange
}

var errNoChange = errors.New("no change")

// change applies one acknowledged op to the model.
func (m *rcModel) change(code, key string) error {
	switch code {
	case "CX0", "K", "C-R":
		// CX0 found the key present; a refused delete changes nothing,
		// and the child stops deleting the key.
		return nil
	case "C-0", "N-0":
		f, name := store.CrashCuckoo, "cuckoo Delete(%s) found no copy"
		if code == "N-0" {
			f, name = store.CrashCounting, "counting Delete(%s) found a zero counter"
		}
		if r := m.Range(f, key); r.Lo > 0 {
			m.violations = append(m.violations, fmt.Sprintf("I1: "+name+", model holds %d..%d", key, r.Lo, r.Hi))
		}
		return nil
	}
	op, err := rcOp(code, key)
	if errors.Is(err, errNoChange) {
		return fmt.Errorf("protocol: unknown acknowledgement %q", code)
	}
	if err != nil {
		return err
	}
	if err := m.Apply(op); err != nil {
		return fmt.Errorf("protocol: %w", err)
	}
	return nil
}

// settle accounts for the op the child was killed in, if any: it may or may
// not have happened, so the model widens to both outcomes.
func (m *rcModel) settle() {
	code, key, _ := strings.Cut(m.pending, " ")
	m.pending = ""
	if op, err := rcOp(code, key); err == nil {
		m.InFlight(op)
	}
}

// writeKeys hands the child keys it may delete: keys whose count is known
// exactly and above zero, a random sample of at most rcKeysPass per filter.
func (m *rcModel) writeKeys(path string, rng *rand.Rand) error {
	var buf bytes.Buffer
	for _, f := range []struct {
		tag string
		f   store.CrashFilter
	}{{"C", store.CrashCuckoo}, {"N", store.CrashCounting}} {
		var ks []string
		for _, k := range m.Keys(f.f) { // sorted: the seed should decide
			if r := m.Range(f.f, k); r.Lo > 0 && r.Lo == r.Hi {
				ks = append(ks, k)
			}
		}
		rng.Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
		for _, k := range ks[:min(len(ks), rcKeysPass)] {
			fmt.Fprintf(&buf, "%s %s %d\n", f.tag, k, m.Range(f.f, k).Lo)
		}
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// rcStats sums up a run.
type rcStats struct {
	cycles, early, i5, leftCrashed, partial int
	childLines, roChecked, recovered        int
	beforeOpen                              int
	maxBloomLayers, maxCuckooLayers         int
	hugeChecked                             int // read-only opens whose mappings were checked for huge pages
}

func TestRealCrashSIGKILL(t *testing.T) { runRealCrash(t, false, 20) }

// TestRealCrashSIGKILLHugePages is TestRealCrashSIGKILL with every
// filter file 2 MiB or more: the child and the parent's read-only and
// recovering opens all map them 2 MiB-aligned with MADV_HUGEPAGE (the
// parent checks its own mappings' VmFlags), which the small filters of
// TestRealCrashSIGKILL never reach.
func TestRealCrashSIGKILLHugePages(t *testing.T) { runRealCrash(t, true, 8) }

// runRealCrash runs the real-crash test with the big filters of rcBig or
// the small ones of rcSmall, for cycles cycles unless rcEnvCycles says
// otherwise.
func runRealCrash(t *testing.T, big bool, cycles int) {
	if os.Getenv(rcEnvChild) != "" {
		t.Skip("running as the child")
	}
	if v := os.Getenv(rcEnvCycles); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", rcEnvCycles, v)
		}
		cycles = n
	}
	seed := testseed.Seed(t)
	rerun := fmt.Sprintf("%s=%d %s", rcEnvCycles, cycles, testseed.Replay(t, seed))
	t.Logf("seed %d, %d cycles (rerun: %s)", seed, cycles, rerun)
	dir := filepath.Join(t.TempDir(), "db")
	keysFile := filepath.Join(t.TempDir(), "keys")
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	m := newRcModel()
	var st rcStats
	start := time.Now()
	defer func() {
		t.Logf("%d cycles in %v: %d acknowledged ops verified (%d lines), %d early kills (%d before the child's Open returned), "+
			"%d I5 checks (second writer refused, read-only open beside the writer), %d read-only snapshot checks after a crash, "+
			"%d recovered-store checks, %d cycles left crashed for the next child to recover, "+
			"%d cuckoo adds refused (ErrFull), %d partial trailing lines; bloom %d layers, cuckoo %d layers; "+
			"%d read-only opens with every filter file mapped for huge pages; "+
			"model: %d bloom keys, %d cuckoo keys, %d counting keys",
			st.cycles, time.Since(start).Round(time.Millisecond), m.acked, st.childLines, st.early, st.beforeOpen, st.i5, st.roChecked,
			st.recovered, st.leftCrashed, m.refused, st.partial, st.maxBloomLayers, st.maxCuckooLayers, st.hugeChecked,
			len(m.Keys(store.CrashBloom)), len(m.Keys(store.CrashCuckoo)), len(m.Keys(store.CrashCounting)))
		if t.Failed() {
			t.Logf("FAILED with seed %d; rerun: %s (kill timing is not replayed exactly)", seed, rerun)
		}
	}()
	for cycle := range cycles {
		rcCycle(t, seed, cycle, big, dir, keysFile, rng, m, &st)
		if t.Failed() {
			return
		}
	}
}

// rcCycle runs one child to its death and verifies the store it leaves.
func rcCycle(t *testing.T, seed uint64, cycle int, big bool, dir, keysFile string, rng *rand.Rand, m *rcModel, st *rcStats) {
	t.Helper()
	fatal := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d cycle %d: %s", seed, cycle, fmt.Sprintf(format, args...))
	}
	if err := m.writeKeys(keysFile, rng); err != nil {
		fatal("%v", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		fatal("%v", err)
	}
	defer pr.Close()
	var output bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestRealCrashChild$")
	cmd.Env = append(os.Environ(),
		rcEnvChild+"="+dir,
		rcEnvChildSeed+"="+strconv.FormatUint(seed, 10),
		rcEnvChildCyc+"="+strconv.Itoa(cycle),
		rcEnvChildKeys+"="+keysFile)
	if big {
		cmd.Env = append(cmd.Env, rcEnvChildBig+"=1")
	}
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Start(); err != nil {
		pw.Close()
		fatal("start child: %v", err)
	}
	pw.Close()

	// The reader passes on complete lines only: a partial line at the end
	// (none is expected: each line is one small write) is dropped.
	lines := make(chan string, 4096)
	partial := 0
	go func() {
		defer close(lines)
		br := bufio.NewReaderSize(pr, 64<<10)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				if l != "" {
					partial++ // read after lines is closed
				}
				return
			}
			lines <- l[:len(l)-1]
		}
	}()

	killed := false
	kill := func() {
		if !killed {
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	// One cycle in eight kills at a random moment from the start, which
	// may fall in Open (recovering a crashed store, its checkpoint) or in
	// filter creation; the others wait for the child to be open, check I5,
	// then kill after a random delay or a random number of acknowledged
	// ops, whichever comes first.
	early := rng.IntN(8) == 0
	var killC <-chan time.Time
	if early {
		st.early++
		killC = time.After(time.Duration(rng.Int64N(int64(40 * time.Millisecond))))
	}
	delay := 5*time.Millisecond + time.Duration(rng.Int64N(int64(75*time.Millisecond)))
	if rng.IntN(4) == 0 {
		delay = 80*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond)))
	}
	ackCap := m.acked + 1 + rng.IntN(3000)
	stuck := time.After(60 * time.Second)
	opened := false
	var cycleErr error // the first problem found while the child runs
	fail := func(err error) {
		if cycleErr == nil {
			cycleErr = err
		}
		kill()
	}
loop:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break loop
			}
			st.childLines++
			if cycleErr != nil {
				continue
			}
			if err := m.apply(l); err != nil {
				fail(err)
				continue
			}
			if l == "O" && !opened {
				opened = true
				if !killed {
					if err := rcCheckI5(dir, m); err != nil {
						fail(err)
						continue
					}
					st.i5++
				}
				if !early {
					killC = time.After(delay)
				}
			}
			if m.acked >= ackCap {
				kill()
			}
		case <-killC:
			kill()
			killC = nil
		case <-stuck:
			fail(errors.New("child still running after 60s"))
			stuck = nil
		}
	}
	werr := cmd.Wait()
	st.partial += partial
	if !opened {
		st.beforeOpen++
	}
	if cycleErr != nil {
		fatal("%v\nchild output:\n%s", cycleErr, output.String())
	}
	if !killed {
		fatal("child exited on its own (%v) before it was killed\nchild output:\n%s", werr, output.String())
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		fatal("child did not die of SIGKILL: %v\nchild output:\n%s", werr, output.String())
	}
	if len(m.violations) > 0 {
		fatal("violations seen in the child's own ops:\n%s", strings.Join(m.violations, "\n"))
	}
	m.settle()
	st.cycles++

	// A read-only snapshot of the crashed directory, without recovery. A
	// child killed before it initialised the catalog leaves no store yet.
	empty := len(m.Keys(store.CrashBloom)) == 0 && len(m.Keys(store.CrashCuckoo)) == 0 && len(m.Keys(store.CrashCounting)) == 0 && !opened
	ro, err := store.Open(dir, &store.Options{ReadOnly: true})
	switch {
	case err == nil:
		bad := m.Verify(ro)
		if big && !empty {
			if err := rcCheckHugeMappings(dir, ro); err != nil {
				ro.Close()
				fatal("%v", err)
			}
			st.hugeChecked++
		}
		if cerr := ro.Close(); cerr != nil {
			fatal("read-only close: %v", cerr)
		}
		if len(bad) > 0 {
			fatal("read-only snapshot of the crashed store:\n%s", strings.Join(bad, "\n"))
		}
		st.roChecked++
	case empty && errors.Is(err, fs.ErrNotExist):
	default:
		fatal("I4: read-only open after the crash (corrupt: %v): %v", errors.Is(err, store.ErrCorrupt), err)
	}
	// One cycle in four leaves the crashed directory to the next child,
	// whose Open recovers it (and may be killed doing so).
	if rng.IntN(4) == 0 {
		st.leftCrashed++
		return
	}
	s, err := store.Open(dir, nil)
	if err != nil {
		fatal("I4: open after the crash (corrupt: %v): %v", errors.Is(err, store.ErrCorrupt), err)
	}
	bad := m.Verify(s)
	if len(bad) == 0 {
		// The recovery checkpointed what it recovered: the bits the
		// op in flight left unknown are settled now.
		if err := m.Settle(s); err != nil {
			fatal("settle the model: %v", err)
		}
	}
	infos, _ := s.List()
	for _, in := range infos {
		switch in.Name {
		case "bloom":
			st.maxBloomLayers = max(st.maxBloomLayers, in.Layers)
		case "cuckoo":
			st.maxCuckooLayers = max(st.maxCuckooLayers, in.Layers)
		}
	}
	if err := s.Close(); err != nil {
		fatal("close after verification: %v", err)
	}
	if len(bad) > 0 {
		fatal("recovered store:\n%s", strings.Join(bad, "\n"))
	}
	st.recovered++
}

// rcCheckHugeMappings checks, with the read-only store ro open on dir,
// that this process maps every file under dir of 2 MiB or more for huge
// pages (VmFlags "hg", 2 MiB-aligned), and that there are at least three
// such files, one per filter but the bitmap: the crash test then goes
// through mmapbits' huge-page mappings.
func rcCheckHugeMappings(dir string, ro *store.Store) error {
	if runtime.GOOS != "linux" {
		return nil // huge-page advice is Linux's (mmapbits' adviseHuge)
	}
	// Map the filters that a lazy open has not mapped yet.
	if _, err := ro.Bloom("bloom"); err != nil {
		return err
	}
	if _, err := ro.Cuckoo("cuckoo"); err != nil {
		return err
	}
	if _, err := ro.Counting("counting"); err != nil {
		return err
	}
	ms, err := smaps.Read()
	if err != nil {
		return fmt.Errorf("huge pages: %w", err)
	}
	huge := map[string]bool{}
	for _, mp := range ms {
		rel, err := filepath.Rel(dir, mp.Path)
		if mp.Path == "" || err != nil || strings.HasPrefix(rel, "..") || mp.End-mp.Start < 2<<20 {
			continue
		}
		if !mp.Has("hg") || mp.Start%(2<<20) != 0 {
			return fmt.Errorf("huge pages: %s mapped at %#x with VmFlags %v: want hg, 2 MiB-aligned", rel, mp.Start, mp.Flags)
		}
		huge[rel] = true
	}
	if len(huge) < 3 {
		return fmt.Errorf("huge pages: %d files of 2 MiB or more mapped (%v), want one per filter but the bitmap", len(huge), huge)
	}
	return nil
}

// rcCheckI5 runs while the child holds the store: a second writer must be
// refused with an error wrapping ErrLocked, and a read-only open must
// succeed; its snapshot must hold every bloom add acknowledged so far
// (bloom adds are monotonic, so what the child does meanwhile cannot undo
// them).
func rcCheckI5(dir string, m *rcModel) error {
	s, err := store.Open(dir, nil)
	if err == nil {
		s.Close()
		return errors.New("I5: a second writer opened the store beside the child")
	}
	if !errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("I5: second writer got %v, want an error wrapping ErrLocked", err)
	}
	ro, err := store.Open(dir, &store.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("I5: read-only open beside the writer (corrupt: %v): %w", errors.Is(err, store.ErrCorrupt), err)
	}
	b, err := ro.Bloom("bloom")
	if err == nil {
		for _, k := range m.Keys(store.CrashBloom) {
			if !b.Has([]byte(k)) {
				err = fmt.Errorf("read-only snapshot beside the writer misses acknowledged bloom key %s", k)
				break
			}
		}
	}
	if cerr := ro.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("read-only close: %w", cerr)
	}
	return err
}
