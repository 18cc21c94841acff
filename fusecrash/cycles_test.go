package fusecrash_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/fusecrash/crashfs"
)

var (
	inspectOnce sync.Once
	inspectBin  string
	inspectErr  error
)

// inspect builds cmd/inspect once.
func inspect(t *testing.T) string {
	inspectOnce.Do(func() {
		d, err := os.MkdirTemp("", "fusecrash-inspect")
		if err != nil {
			inspectErr = err
			return
		}
		inspectBin = filepath.Join(d, "inspect")
		out, err := exec.Command("go", "build", "-o", inspectBin, "github.com/filterstore/filterstore/cmd/inspect").CombinedOutput()
		if err != nil {
			inspectErr = fmt.Errorf("go build cmd/inspect: %v: %s", err, out)
		}
	})
	if inspectErr != nil {
		t.Fatal(inspectErr)
	}
	return inspectBin
}

// TestFuseCrashCycles: power losses at random moments (a number of file
// system change requests drawn from the seed) under a child running a
// random workload over Bloom, cuckoo and counting filters (Add, AddMany,
// Delete/DeleteMany, Batch, Load/LoadParallel, Checkpoint, create, drop,
// rename, Close and reopen), in both sync modes, strict and torn losses.
// After each loss (three in four; the others leave the recovery to the
// next work child, which may lose the power in it) a verify child opens
// the store read-only and as a writer and checks every acknowledged key,
// Check, and `inspect verify` before and after.
func TestFuseCrashCycles(t *testing.T) {
	require(t)
	inspect(t)
	modes := []bool{false, true}
	switch os.Getenv(envSync) {
	case "always":
		modes = []bool{false}
	case "interval":
		modes = []bool{true}
	}
	for _, interval := range modes {
		name := "SyncAlways"
		if interval {
			name = "SyncInterval"
		}
		t.Run(name, func(t *testing.T) { runCycles(t, interval) })
	}
}

type cycleRun struct {
	t        *testing.T
	d        *disk
	dir      string
	tmp      string
	interval bool
	seed     uint64
	rng      *rand.Rand
	model    workModel
	faults   []string
	counts   map[string]int
}

func runCycles(t *testing.T, interval bool) {
	cycles := 30
	if v := os.Getenv(envCycles); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q", envCycles, v)
		}
		cycles = n
	}
	base := seedOf(t)
	seed := base
	if interval {
		seed ^= 0x5a5a
	}
	extra := ""
	for _, e := range []string{envTorn, envEIO} {
		if v := os.Getenv(e); v != "" {
			extra += e + "=" + v + " "
		}
	}
	t.Logf("seed %d (rerun: %s%s=1 %s=%d %s=%d go test -count=1 -v -run 'FuseCrashCycles/%s' .)", seed, extra, envOn, envSeed, base, envCycles, cycles, map[bool]string{false: "SyncAlways", true: "SyncInterval"}[interval])
	r := &cycleRun{t: t, d: newDisk(t), interval: interval, seed: seed, rng: rand.New(rand.NewPCG(seed, 77)), tmp: t.TempDir(), counts: map[string]int{}}
	r.dir = filepath.Join(r.d.mnt, "db")
	r.model.Filters = map[string]*filt{}
	start := time.Now()
	for c := 0; c < cycles; c++ {
		r.cycle(c, c == cycles-1)
		if len(r.faults) > 0 {
			break
		}
	}
	var cs []string
	for _, k := range sortedKeys(r.counts) {
		cs = append(cs, fmt.Sprintf("%s=%d", k, r.counts[k]))
	}
	t.Logf("%v: %s; fs requests %+v", time.Since(start).Round(time.Millisecond), strings.Join(cs, " "), r.d.total())
	for _, f := range r.faults {
		t.Error(f)
	}
	if len(r.faults) > 0 {
		t.Logf("FAILED: seed %d", seed)
	}
}

func (r *cycleRun) fault(cycle int, format string, args ...any) {
	r.faults = append(r.faults, fmt.Sprintf("seed %d cycle %d: %s", r.seed, cycle, fmt.Sprintf(format, args...)))
}

func writeJSON(t *testing.T, path string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func markUnsure(v view, n string) {
	if f := v[n]; f != nil {
		f.Unsure = true
	} else {
		v[n] = &filt{Unsure: true}
	}
}

// apply applies an acknowledged op to v.
func apply(v view, o *op) {
	switch o.K {
	case "create":
		v[o.N] = &filt{Kind: o.F, Gen: o.G, Keys: map[string]bool{}}
	case "drop":
		delete(v, o.N)
	case "rename":
		f := v[o.N]
		delete(v, o.N)
		if f != nil && f.Kind != "" {
			f.Unsure = false
			v[o.To] = f
		} else {
			markUnsure(v, o.To)
		}
	case "add", "addmany", "load":
		if f := v[o.N]; f != nil && f.Kind != "" && (o.G == 0 || o.G == f.Gen) {
			for _, k := range o.Keys {
				f.Keys[k] = true
			}
			if o.K == "load" {
				f.Unsure = false
			}
		}
	case "batch":
		for _, it := range o.B {
			if f := v[it.N]; f != nil && f.Kind != "" && !it.Del && (it.G == 0 || it.G == f.Gen) {
				f.Keys[it.Key] = true
			}
		}
	}
}

func (r *cycleRun) cycle(c int, last bool) {
	t := r.t
	mode := crashfs.Strict
	if r.rng.IntN(2) == 1 {
		mode = crashfs.Torn
	}
	switch os.Getenv(envTorn) {
	case "0":
		mode = crashfs.Strict
	case "1":
		mode = crashfs.Torn
	}
	small := r.rng.IntN(2) == 0
	if c > 0 && r.rng.IntN(12) == 0 {
		// A new store, so that power losses during its creation (the
		// first Open: directories, catalog, WAL, markers) come up
		// more than once a run.
		r.dir = filepath.Join(r.d.mnt, fmt.Sprintf("db%d", c))
		r.model = workModel{Filters: map[string]*filt{}}
		r.counts["new-stores"]++
	}
	cut := 1 + r.rng.Int64N(30000)
	if r.rng.IntN(5) < 2 {
		cut = int64(math.Exp(r.rng.Float64() * math.Log(60000)))
	}
	modelFile := filepath.Join(r.tmp, fmt.Sprintf("work-%d.json", c))
	writeJSON(t, modelFile, r.model)
	D := view(r.model.Filters).clone()
	P := D.clone()
	for _, n := range r.model.Retire {
		markUnsure(D, n)
		markUnsure(P, n)
	}
	r.d.fs.SetCutAfter(cut)
	// One cycle in four (FUSECRASH_EIO=0 never, 1 always), one file sync
	// fails with EIO, its data lost on the disk but not in the page
	// cache: the store must fail, and its next Open (the child reopens)
	// recover without losing anything acknowledged.
	eio := r.rng.IntN(4) == 0
	switch os.Getenv(envEIO) {
	case "0":
		eio = false
	case "1":
		eio = true
	}
	failAt, suffix := int64(0), ""
	if eio {
		// Any file's sync, or a layer file's (an msync: the resync
		// path), or the catalog's.
		// Under SyncInterval not the WAL's: a failed fdatasync there
		// loses, by the documented limit, what was acknowledged since the
		// last one that succeeded, unless the page cache keeps it, and
		// FUSE's page cache does not (AUTO_INVAL_DATA drops a file's
		// pages when its mtime moved); the model would have to forget
		// those changes, and the child the counting keys it may no
		// longer delete.
		k := r.rng.IntN(3)
		if r.interval && k == 0 {
			k = 1 + r.rng.IntN(2)
		}
		switch k {
		case 0:
			failAt = 1 + r.rng.Int64N(1500)
		case 1:
			failAt, suffix = 1+r.rng.Int64N(40), ".flt"
		case 2:
			failAt, suffix = 1+r.rng.Int64N(20), "catalog.db"
		}
	}
	r.d.fs.SetFailSyncAt(failAt, suffix)
	eioBefore := r.d.fs.Stats().InjectedEIO
	stopWB := r.d.writeback(r.rng.Uint64())
	args := childArgs{Role: "work", Dir: r.dir, Seed: r.seed, Cycle: c, Interval: r.interval, Small: small, Model: modelFile}
	// One cycle in three, the first child dies (SIGKILL, no power loss)
	// after a while, and a second one, which recovers what it left in the
	// page cache, runs until the power fails.
	procCrash := r.rng.IntN(3) == 0
	killAfter := time.Duration(50+r.rng.IntN(1500)) * time.Millisecond
	ch := startChild(t, args)
	ops := map[int]*op{}
	// snaps: under SyncInterval, P as of the start of each Checkpoint
	// or Close in flight, which its acknowledgement makes durable.
	snaps := map[int]view{}
	// Under SyncInterval: adds acknowledged, with their time, and every
	// key deleted, for the promise that a power loss loses at most the
	// last interval (checked with a margin: intervalAge).
	type ackAt struct {
		at int64
		o  *op
	}
	var acks []ackAt
	deleted := map[string]bool{}
	// bsnaps: P as of the start of each Backup in flight: what its copy
	// must hold.
	bsnaps := map[int]view{}
	var backups []backup
	live := func() []view {
		vs := []view{D, P}
		for _, id := range sortedInts(snaps) {
			vs = append(vs, snaps[id])
		}
		for _, id := range sortedInts(bsnaps) {
			vs = append(vs, bsnaps[id])
		}
		return vs
	}
	// Errors before the cut, split at the first successful (re)open that
	// follows the first error: with an injected EIO, the errors before it
	// are the store failing as it must, those after it faults.
	var errsBefore, errsAfterReopen []string
	reopened := false
	var firstErrAt int64
	acked := 0
	opens := 0
	lastMsg := time.Now()
	handle := func(l string) {
		lastMsg = time.Now()
		var m msg
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			r.fault(c, "bad line %q: %v", l, err)
			return
		}
		deadAt := r.d.fs.DeadAt()
		before := deadAt == 0 || (m.At != 0 && m.At < deadAt)
		switch m.T {
		case "open":
			opens++
			if len(errsBefore) > 0 {
				reopened = true
			}
		case "fatal":
			if before {
				if firstErrAt == 0 {
					firstErrAt = m.At
				}
				errsBefore = append(errsBefore, m.Err)
				if reopened {
					errsAfterReopen = append(errsAfterReopen, m.Err)
				}
			}
		case "s":
			o := m.Op
			ops[m.I] = o
			if r.interval && (o.K == "ckpt" || o.K == "close") {
				snaps[m.I] = P.clone()
			}
			if o.K == "backup" {
				bsnaps[m.I] = P.clone()
			}
			for _, k := range o.Dels {
				deleted[k] = true
				for _, v := range live() {
					if f := v[o.N]; f != nil && f.Keys != nil {
						delete(f.Keys, k)
					}
				}
			}
			for _, it := range o.B {
				if it.Del {
					deleted[it.Key] = true
					for _, v := range live() {
						if f := v[it.N]; f != nil && f.Keys != nil {
							delete(f.Keys, it.Key)
						}
					}
				}
			}
			switch o.K {
			case "create", "drop", "load":
				for _, v := range live() {
					markUnsure(v, o.N)
				}
			case "rename":
				for _, n := range []string{o.N, o.To} {
					for _, v := range live() {
						markUnsure(v, n)
					}
				}
			}
		case "e":
			o := ops[m.I]
			if m.Exp && o != nil && o.K == "drop" {
				m.T = "a" // not found: nothing to drop
				r.ack(D, P, o)
				break
			}
			delete(snaps, m.I)
			delete(bsnaps, m.I)
			if !m.Exp && before {
				if firstErrAt == 0 {
					firstErrAt = m.At
				}
				errsBefore = append(errsBefore, m.Err)
				if reopened {
					errsAfterReopen = append(errsAfterReopen, m.Err)
				}
			}
		case "a":
			if o := ops[m.I]; o != nil {
				acked++
				r.ack(D, P, o)
				if r.interval && (o.K == "add" || o.K == "addmany" || o.K == "batch") {
					acks = append(acks, ackAt{m.At, o})
				}
				if b := bsnaps[m.I]; b != nil {
					backups = append(backups, backup{o.To, b})
					delete(bsnaps, m.I)
				}
				if snap := snaps[m.I]; snap != nil {
					// What the Checkpoint or Close covered is durable.
					for k := range D {
						delete(D, k)
					}
					for k, f := range snap {
						D[k] = f
					}
					delete(snaps, m.I)
				}
			}
		}
	}
	if procCrash {
		kill := time.After(killAfter)
		gone := false
	first:
		for {
			select {
			case l, ok := <-ch.lines:
				if !ok {
					gone = true
					break first
				}
				handle(l)
			case <-r.d.fs.Dead():
				break first
			case <-kill:
				break first
			}
		}
		if gone && r.d.fs.DeadAt() == 0 {
			r.fault(c, "the first work child died on its own: %v\n%s", ch.kill(), ch.tail())
		}
		if r.d.fs.DeadAt() == 0 && !gone {
			ch.kill()
			for l := range ch.lines {
				handle(l)
			}
			r.counts["process-crashes"]++
			// A process crash loses nothing acknowledged: the next child
			// starts from P. What was in flight is not known.
			for k := range snaps {
				delete(snaps, k)
			}
			for k := range bsnaps {
				delete(bsnaps, k)
			}
			acks = nil // the interval promise is the last process's
			wm := workModel{Filters: map[string]*filt{}}
			for _, n := range sortedKeys(P) {
				if p := P[n]; !p.Unsure && p.Kind != "" {
					wm.Filters[n] = p.clone()
				} else {
					wm.Retire = append(wm.Retire, n)
				}
			}
			args.Model = filepath.Join(r.tmp, fmt.Sprintf("work-%d-2.json", c))
			writeJSON(t, args.Model, wm)
			args.Cycle = c + 1_000_000
			args.KeepBackups = true
			ops = map[int]*op{}
			ch = startChild(t, args)
		}
	}
	timer := time.NewTimer(8 * time.Second)
	alive := true
loop:
	for {
		select {
		case l, ok := <-ch.lines:
			if !ok {
				alive = false
				break loop
			}
			handle(l)
		case <-r.d.fs.Dead():
			break loop
		case <-timer.C:
			r.counts["cut-by-timer"]++
			if quiet := time.Since(lastMsg); quiet > 4*time.Second {
				// No op started or ended for seconds: a hang. Ask the
				// child for its goroutines before the cut.
				ch.cmd.Process.Signal(syscall.SIGQUIT)
				time.Sleep(2 * time.Second)
				r.fault(c, "the work child reported nothing for %v before the cut (hang?):\n%s", quiet.Round(time.Millisecond), ch.tail())
			}
			break loop
		}
	}
	timer.Stop()
	stopWB()
	if alive && r.d.fs.DeadAt() == 0 {
		r.d.fs.SetDead()
	}
	changes := r.d.fs.Changes()
	if !alive {
		r.fault(c, "the work child died before the power cut: %v\n%s", ch.kill(), ch.tail())
	}
	ch.kill()
	for l := range ch.lines {
		handle(l)
	}
	if r.d.fs.Stats().InjectedEIO > eioBefore {
		// The store failed on the injected error, as it must; its
		// errors until the child reopened it are expected.
		r.counts["eio-injected"]++
		if len(errsBefore) > 0 {
			if testing.Verbose() {
				t.Logf("cycle %d: injected EIO (%q sync %d): the store failed with %q", c, suffix, failAt, errsBefore[:min(3, len(errsBefore))])
			}
			r.counts["eio-store-failed"]++
			all := strings.Join(errsBefore, "\n")
			for _, w := range []string{"msync", "catalog", "wal", "RESYNC"} {
				if strings.Contains(all, w) {
					r.counts["eio-errors-naming-"+w]++
				}
			}
		}
		if reopened {
			r.counts["eio-reopened"]++
		} else if len(errsBefore) > 0 && r.d.fs.DeadAt()-firstErrAt > int64(3*time.Second) {
			r.fault(c, "after the injected EIO the store did not open again for %v: %q\n%s", time.Duration(r.d.fs.DeadAt()-firstErrAt), errsBefore[:min(5, len(errsBefore))], ch.tail())
		}
		errsBefore = errsAfterReopen
	}
	if len(errsBefore) > 0 {
		r.fault(c, "errors before the power cut: %q\n%s", errsBefore, ch.tail())
	}
	// The interval promise: what was acknowledged intervalAge before the
	// cut is there, as if a Checkpoint had covered it.
	var intervalWant view
	if r.interval && opens > 0 {
		intervalWant = D.clone()
		cutAt := r.d.fs.DeadAt()
		for _, a := range acks {
			if a.at >= cutAt-int64(intervalAge) {
				continue
			}
			o := *a.o
			o.Keys = slices.DeleteFunc(slices.Clone(o.Keys), func(k string) bool { return deleted[k] })
			o.B = slices.DeleteFunc(slices.Clone(o.B), func(it bitem) bool { return deleted[it.Key] })
			apply(intervalWant, &o)
		}
	}
	rep := r.d.powerLoss(nil, mode, r.rng)
	r.counts["cycles-"+mode.String()]++
	r.counts["acked"] += acked
	if opens == 0 {
		r.counts["cut-before-open"]++
	}
	if testing.Verbose() {
		nk, nf, nu := 0, 0, 0
		for _, f := range D {
			if f.Unsure {
				nu++
			} else {
				nf++
				nk += len(f.Keys)
			}
		}
		t.Logf("cycle %d: %s, small %v, cut after %d changes (%d made), %d acked, %d opens; want %d filters, %d keys, %d unsure; %v", c, mode, small, cut, changes, acked, opens, nf, nk, nu, rep)
	}
	// What must be there: D; what may be there besides: P's names.
	allowed := map[string]bool{}
	for n := range D {
		allowed[n] = true
	}
	for n := range P {
		allowed[n] = true
	}
	if last || r.rng.IntN(4) != 0 {
		if intervalWant != nil {
			r.verifyInterval(c, intervalWant, sortedKeys(allowed))
		}
		r.verify(c, small, D, sortedKeys(allowed))
		for _, b := range backups {
			r.verifyBackup(c, b)
		}
	} else {
		r.counts["unverified"]++
	}
	// The next cycle's model.
	r.model = workModel{Filters: map[string]*filt{}}
	for _, n := range sortedKeys(allowed) {
		d, p := D[n], P[n]
		if d != nil && p != nil && !d.Unsure && !p.Unsure && d.Kind != "" && d.Gen == p.Gen {
			r.model.Filters[n] = d
		} else {
			r.model.Retire = append(r.model.Retire, n)
		}
	}
}

func sortedInts[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (r *cycleRun) ack(D, P view, o *op) {
	apply(P, o)
	if !r.interval {
		apply(D, o)
		return
	}
	switch o.K {
	case "load":
		if d, p := D[o.N], P[o.N]; d != nil && p != nil && d.Kind != "" && d.Gen == p.Gen {
			apply(D, o)
		}
	}
}

// inspectCheck runs `inspect check --keys` on every filter want is sure
// of, in the store as the power loss left it: every key must be "maybe".
func (r *cycleRun) inspectCheck(c int, want view) {
	for _, n := range sortedKeys(want) {
		f := want[n]
		if f.Unsure || len(f.Keys) == 0 {
			continue
		}
		kf := filepath.Join(r.tmp, "keys")
		writeLines(r.t, kf, sortedKeys(f.Keys))
		cmd := exec.Command(inspect(r.t), "check", "--json", "--keys", kf, r.dir, n)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			r.fault(c, "inspect check %s: %v\n%.2000s", n, err, stderr.String())
			continue
		}
		var res struct {
			Answers []struct{ Key, Answer string }
		}
		if err := json.Unmarshal(out, &res); err != nil || len(res.Answers) != len(f.Keys) {
			r.fault(c, "inspect check %s: %d answers for %d keys, %v: %.500s", n, len(res.Answers), len(f.Keys), err, out)
			continue
		}
		var no []string
		for _, a := range res.Answers {
			if a.Answer != "maybe" {
				no = append(no, a.Key)
			}
		}
		if len(no) > 0 {
			r.fault(c, "inspect check %s: %d acknowledged keys answered \"no\" (e.g. %v)", n, len(no), no[:min(5, len(no))])
		}
		r.counts["inspect-checked"] += len(f.Keys)
	}
}

func writeLines(t *testing.T, path string, ls []string) {
	if err := os.WriteFile(path, []byte(strings.Join(ls, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// backup is an acknowledged Backup: its directory and what it must hold.
type backup struct {
	dir  string
	want view
}

// verifyBackup checks an acknowledged Backup's copy after the power
// loss: it opens (read-only, then as a writer that recovers it) with
// every key acknowledged before the Backup started.
func (r *cycleRun) verifyBackup(c int, b backup) {
	r.counts["backups-checked"]++
	modelFile := filepath.Join(r.tmp, fmt.Sprintf("backup-%d.json", c))
	writeJSON(r.t, modelFile, verifyModel{Want: b.want, Allowed: sortedKeys(b.want)})
	ch := startChild(r.t, childArgs{Role: "verify", Dir: b.dir, Interval: r.interval, Model: modelFile})
	err := ch.wait(3 * time.Minute)
	done := false
	for l := range ch.lines {
		var m msg
		json.Unmarshal([]byte(l), &m)
		switch m.T {
		case "bad":
			r.fault(c, "backup %s: %s", b.dir, m.Err)
		case "done":
			done = true
		}
	}
	if !done {
		r.fault(c, "backup %s: verify child did not finish: %v\n%s", b.dir, err, ch.tail())
	}
}

// intervalAge is how long before the cut a SyncInterval acknowledgement
// must be durable, ten and more times SyncEvery (100 ms, or 20 ms in the
// small configuration), for a machine's scheduling delays.
const intervalAge = 2 * time.Second

// verifyInterval checks the SyncInterval promise "a power loss loses at
// most the last interval" with a read-only open (which changes nothing).
func (r *cycleRun) verifyInterval(c int, want view, allowed []string) {
	modelFile := filepath.Join(r.tmp, fmt.Sprintf("interval-%d.json", c))
	writeJSON(r.t, modelFile, verifyModel{Want: want, Allowed: allowed, ReadOnlyOnly: true})
	ch := startChild(r.t, childArgs{Role: "verify", Dir: r.dir, Interval: true, Model: modelFile})
	err := ch.wait(3 * time.Minute)
	for l := range ch.lines {
		var m msg
		json.Unmarshal([]byte(l), &m)
		if m.T == "bad" {
			r.fault(c, "SyncInterval promise (acknowledged over %v before the cut): %s", intervalAge, m.Err)
		}
	}
	if err != nil {
		r.fault(c, "interval verify child: %v\n%s", err, ch.tail())
	}
}

func (r *cycleRun) verify(c int, small bool, want view, allowed []string) {
	t := r.t
	r.counts["verified"]++
	bin := inspect(t)
	insp := func(when string) {
		cmd := exec.Command(bin, "verify", r.dir)
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			<-done
			r.fault(c, "inspect verify (%s) hung", when)
			return
		}
		if err != nil {
			r.fault(c, "inspect verify %s: %v\n%s", when, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(r.dir, "catalog.db")); err == nil {
		insp("after the power loss")
		r.inspectCheck(c, want)
	}
	modelFile := filepath.Join(r.tmp, fmt.Sprintf("verify-%d.json", c))
	writeJSON(t, modelFile, verifyModel{Want: want, Allowed: allowed})
	ch := startChild(t, childArgs{Role: "verify", Dir: r.dir, Interval: r.interval, Small: small, Model: modelFile})
	err := ch.wait(3 * time.Minute)
	done := false
	for l := range ch.lines {
		var m msg
		json.Unmarshal([]byte(l), &m)
		switch m.T {
		case "bad":
			r.fault(c, "%s", m.Err)
		case "done":
			done = true
		}
	}
	if !done {
		r.fault(c, "verify child did not finish: %v\n%s", err, ch.tail())
		return
	}
	insp("after recovery and Close")
	n := 0
	for _, f := range want {
		if !f.Unsure {
			n += len(f.Keys)
		}
	}
	r.counts["keys-checked"] += n
}
