package fusecrash_test

// Power losses through the real kernel paths, on a strict model disk.
//
// The tests mount crashfs (package crashfs: a FUSE file system, served by
// this test process, that keeps only what fsync, fdatasync, msync and
// directory fsync made durable) and run a store in a child process (this
// test binary, re-executed) that works with the real OS file system:
// write(2), MAP_SHARED mappings written back by the kernel, msync,
// fdatasync, rename, directory fsync all reach crashfs as FUSE requests.
// At a random moment the parent cuts the power (crashfs refuses every
// further change), kills the child, unmounts, keeps only the durable
// state (or, in torn mode, a random part of the unsynced pages and
// directory changes too), mounts again and checks, in a fresh child,
// that Open recovers, that no acknowledged key is absent, that Check is
// clean, and that `inspect verify` agrees.
//
// Opt-in, as root with /dev/fuse:
//
//	cd fusecrash && FILTERSTORE_FUSE_CRASH=1 go test -count=1 -v -run 'FuseCrash' .
//
// FUSECRASH_CYCLES sets the power losses per sync mode (default 30),
// FUSECRASH_SEED the seed (printed by every run), FUSECRASH_TORN=0/1
// forces strict or torn losses (default: drawn per cycle),
// FUSECRASH_SYNC=always/interval runs one sync mode. The power fails
// after a number of file system changes drawn from the seed, so a rerun
// with the seed replays the workload and the cut point in requests;
// kernel writeback timing and the store's background goroutines still
// vary.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/fusecrash/crashfs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

const (
	envOn     = "FILTERSTORE_FUSE_CRASH"
	envChild  = "FUSECRASH_CHILD"
	envCycles = "FUSECRASH_CYCLES"
	envSeed   = "FUSECRASH_SEED"
	envTorn   = "FUSECRASH_TORN"
	envSync   = "FUSECRASH_SYNC"
	envEIO    = "FUSECRASH_EIO"
)

func require(t *testing.T) {
	t.Helper()
	if os.Getenv(envChild) != "" {
		t.Skip("running as a child")
	}
	if os.Getenv(envOn) != "1" {
		t.Skipf("opt-in: %s=1 go test -count=1 -v -run FuseCrash . (root, /dev/fuse)", envOn)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
}

// disk is a crashfs mounted at mnt.
type disk struct {
	t     *testing.T
	stats crashfs.Stats // of the file systems before the last power loss
	fs    *crashfs.FS
	srv   *fuse.Server
	mnt   string
}

func newDisk(t *testing.T) *disk {
	d := &disk{t: t, fs: crashfs.New(), mnt: filepath.Join(t.TempDir(), "mnt")}
	if err := os.Mkdir(d.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	d.mount()
	t.Cleanup(func() {
		if d.srv != nil {
			d.fs.SetDead()
			d.unmount()
		}
	})
	return d
}

func (d *disk) mount() {
	srv, err := d.fs.Mount(d.mnt)
	if err != nil {
		d.t.Fatalf("mount: %v", err)
	}
	d.srv = srv
}

func (d *disk) unmount() {
	var err error
	for range 100 {
		if err = d.srv.Unmount(); err == nil {
			d.srv.Wait()
			d.srv = nil
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.t.Logf("unmount: %v; detaching", err)
	if err := unix.Unmount(d.mnt, unix.MNT_DETACH); err != nil {
		d.t.Fatalf("umount -l: %v", err)
	}
	d.srv = nil
}

// powerLoss cuts the power (if not yet cut), kills child, unmounts,
// reverts to what a power loss leaves, and mounts again.
func (d *disk) powerLoss(c *child, mode crashfs.Mode, rng *rand.Rand) crashfs.CrashReport {
	d.fs.SetDead()
	if c != nil {
		c.kill()
	}
	d.unmount()
	d.stats = addStats(d.stats, d.fs.Stats())
	nfs, rep := d.fs.Crash(mode, rng)
	d.fs = nfs
	d.mount()
	return rep
}

func addStats(a, b crashfs.Stats) crashfs.Stats {
	a.Writes += b.Writes
	a.WriteBytes += b.WriteBytes
	a.CacheWrites += b.CacheWrites
	a.InjectedEIO += b.InjectedEIO
	a.Fsyncs += b.Fsyncs
	a.Fdatasyncs += b.Fdatasyncs
	a.FsyncDirs += b.FsyncDirs
	a.Fallocates += b.Fallocates
	a.Truncates += b.Truncates
	a.Renames += b.Renames
	a.Creates += b.Creates
	a.Unlinks += b.Unlinks
	a.Refused += b.Refused
	return a
}

// total is the request counts of every file system so far.
func (d *disk) total() crashfs.Stats { return addStats(d.stats, d.fs.Stats()) }

// writeback makes the kernel write dirty pages of the mount back now and
// then, as memory pressure or the flusher threads would, until stop:
// syncfs(2) on a FUSE mount writes dirty pages back (WRITE requests) but
// sends no FSYNC, so nothing becomes durable by it; a torn power loss
// may then keep such pages.
func (d *disk) writeback(seed uint64) (stop func()) {
	f, err := os.Open(d.mnt)
	if err != nil {
		d.t.Fatal(err)
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	rng := rand.New(rand.NewPCG(seed, 3))
	go func() {
		defer close(done)
		defer f.Close()
		for {
			select {
			case <-quit:
				return
			case <-time.After(time.Duration(5+rng.IntN(60)) * time.Millisecond):
				unix.Syncfs(int(f.Fd()))
			}
		}
	}()
	return func() { close(quit); <-done }
}

// child is a re-executed test binary; it writes JSON lines on fd 3.
type child struct {
	cmd   *exec.Cmd
	out   bytes.Buffer
	lines chan string
	once  sync.Once
	err   error
}

type childArgs struct {
	Role     string // "selfcheck", "work", "verify"
	Dir      string
	Seed     uint64
	Cycle    int
	Interval bool
	Small    bool // small WAL segments and checkpoint thresholds
	Model    string
	// KeepBackups: a second child of the cycle leaves the first's
	// backups for the parent to check.
	KeepBackups bool
}

func startChild(t *testing.T, a childArgs) *child {
	js, _ := json.Marshal(a)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{lines: make(chan string, 1<<16)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.v")
	c.cmd.Env = append(os.Environ(), envChild+"="+string(js), "GOMAXPROCS=2")
	c.cmd.ExtraFiles = []*os.File{pw}
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	go func() {
		defer close(c.lines)
		defer pr.Close()
		br := bufio.NewReaderSize(pr, 1<<20)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			c.lines <- l[:len(l)-1]
		}
	}()
	t.Cleanup(func() { c.kill() })
	return c
}

func (c *child) kill() error {
	c.once.Do(func() {
		c.cmd.Process.Signal(syscall.SIGKILL)
		c.err = c.cmd.Wait()
	})
	return c.err
}

func (c *child) wait(timeout time.Duration) error {
	done := make(chan struct{})
	go func() {
		c.once.Do(func() { c.err = c.cmd.Wait() })
		close(done)
	}()
	select {
	case <-done:
		return c.err
	case <-time.After(timeout):
		c.cmd.Process.Signal(syscall.SIGQUIT)
		time.Sleep(time.Second)
		c.cmd.Process.Signal(syscall.SIGKILL)
		<-done
		return fmt.Errorf("child hung for %v (sent SIGQUIT): %v", timeout, c.err)
	}
}

func (c *child) tail() string {
	s := c.out.String()
	return s[max(0, len(s)-6000):]
}

// TestChild is the child's entry point; it does nothing in a normal run.
func TestChild(t *testing.T) {
	js := os.Getenv(envChild)
	if js == "" {
		t.Skip("only as a child")
	}
	var a childArgs
	if err := json.Unmarshal([]byte(js), &a); err != nil {
		t.Fatal(err)
	}
	w := &reporter{f: os.NewFile(3, "report")}
	switch a.Role {
	case "selfcheck":
		selfCheckChild(t, a, w)
	case "work":
		workChild(t, a, w)
	case "verify":
		verifyChild(t, a, w)
	default:
		t.Fatalf("role %q", a.Role)
	}
}

// reporter writes one JSON line per message, each in one write.
type reporter struct {
	mu sync.Mutex
	f  *os.File
}

func (r *reporter) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.f.Write(append(b, '\n')); err != nil {
		panic(err)
	}
}

func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func seedOf(t *testing.T) uint64 {
	if v := os.Getenv(envSeed); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q", envSeed, v)
		}
		return s
	}
	return uint64(time.Now().UnixNano())
}

// ---- self-check ----

// TestFuseCrashSelfCheck shows that the method can lose data: a child
// writes four files, two synced (write+fsync, mmap+msync; the directory
// fsynced after) and two not; after the power loss the synced ones must
// be there whole and the unsynced ones gone (else the method proves
// nothing). It also checks that an msync(MS_SYNC) reaches crashfs's
// FSYNC handler after the dirty mapped pages reached its WRITE handler,
// and that an fsynced file whose directory was not fsynced is gone.
func TestFuseCrashSelfCheck(t *testing.T) {
	require(t)
	d := newDisk(t)
	var mu sync.Mutex
	writesAtSync := map[uint64]int64{}
	d.fs.OnSync = func(ino uint64, w int64) {
		mu.Lock()
		writesAtSync[ino] = w
		mu.Unlock()
	}
	c := startChild(t, childArgs{Role: "selfcheck", Dir: d.mnt})
	if err := c.wait(time.Minute); err != nil {
		t.Fatalf("child: %v\n%s", err, c.tail())
	}
	var inos map[string]uint64
	for l := range c.lines {
		if err := json.Unmarshal([]byte(l), &inos); err != nil {
			t.Fatal(err)
		}
	}
	data := selfCheckData()
	// Before the loss: what the model holds durable.
	if got, ok := d.fs.Durable("msynced"); !ok || !bytes.Equal(got, data) {
		t.Fatalf("msync did not make the mapped file durable (name %v, %d bytes)", ok, len(got))
	}
	mu.Lock()
	w := writesAtSync[inos["msynced"]]
	mu.Unlock()
	if w == 0 {
		t.Fatalf("the FSYNC of msync found no WRITE of the mapped pages before it")
	}
	t.Logf("msync: FSYNC came after %d WRITE requests of the dirty mapped pages; stats %+v", w, d.fs.Stats())
	rep := d.powerLoss(nil, crashfs.Strict, nil)
	t.Logf("power loss: %v", rep)
	for _, c := range []struct {
		name string
		keep bool
	}{{"synced", true}, {"msynced", true}, {"unsynced", false}, {"unmsynced", false}, {"fsynced-nodirsync", false}} {
		got, err := os.ReadFile(filepath.Join(d.mnt, c.name))
		whole := err == nil && bytes.Equal(got, data)
		switch {
		case c.keep && !whole:
			t.Errorf("%s: lost (%d bytes, %v): the method is broken", c.name, len(got), err)
		case !c.keep && whole:
			t.Errorf("%s: survived the power loss: the method keeps what a power loss may lose", c.name)
		default:
			t.Logf("%s: %s (%d bytes, err %v)", c.name, map[bool]string{true: "kept", false: "lost"}[whole], len(got), err)
		}
	}
}

func selfCheckData() []byte {
	data := make([]byte, 256<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return data
}

func selfCheckChild(t *testing.T, a childArgs, w *reporter) {
	data := selfCheckData()
	inos := map[string]uint64{}
	write := func(name string, mapped, sync bool) {
		f, err := os.Create(filepath.Join(a.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		inos[name] = st.Sys().(*syscall.Stat_t).Ino
		if !mapped {
			if _, err := f.Write(data); err != nil {
				t.Fatal(err)
			}
			if sync {
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			return
		}
		if err := f.Truncate(int64(len(data))); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		m, err := unix.Mmap(int(f.Fd()), 0, len(data), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		copy(m, data)
		if sync {
			if err := unix.Msync(m, unix.MS_SYNC); err != nil {
				t.Fatal(err)
			}
		}
	}
	syncDir := func() {
		f, err := os.Open(a.Dir)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	write("synced", false, true)
	write("msynced", true, true)
	write("unsynced", false, false)
	write("unmsynced", true, false)
	syncDir()
	write("fsynced-nodirsync", false, true)
	w.send(inos)
}
