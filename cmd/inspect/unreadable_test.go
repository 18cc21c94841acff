package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// unreadableRunner runs inspect where a file mode of 000 bites: in this
// process when the tests do not run as root, else in a copy of the test
// binary run as nobody (uid 65534), over files handed to nobody by
// chownAll.
type unreadableRunner struct {
	bin string // "" when running in this process
}

func newUnreadableRunner(t *testing.T) *unreadableRunner {
	t.Helper()
	if os.Geteuid() != 0 {
		return &unreadableRunner{}
	}
	dir := worldDir(t)
	bin := filepath.Join(dir, "inspect.test")
	in, err := os.Open(os.Args[0])
	must(t, err)
	defer in.Close()
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	must(t, err)
	_, err = io.Copy(out, in)
	must(t, err)
	must(t, out.Close())
	return &unreadableRunner{bin: bin}
}

// worldDir is a temporary directory nobody can enter.
func worldDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "inspect-unreadable-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	return dir
}

// chownAll hands every file under dir to nobody when running as root.
func (u *unreadableRunner) chownAll(t *testing.T, dir string) {
	t.Helper()
	if u.bin == "" {
		return
	}
	must(t, filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, 65534)
	}))
}

func (u *unreadableRunner) run(t *testing.T, args ...string) result {
	t.Helper()
	if u.bin == "" {
		return runCLI(args...)
	}
	c := exec.Command(u.bin, "-test.run=^TestUnreadableLayerChild$")
	c.Env = append(os.Environ(), "INSPECT_UNREADABLE_CHILD="+strings.Join(args, "\x1f"))
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var so, se bytes.Buffer
	c.Stdout, c.Stderr = &so, &se
	code := exitCodeOf(t, c.Run())
	return result{code, so.String(), se.String()}
}

func TestUnreadableLayerChild(t *testing.T) {
	args := os.Getenv("INSPECT_UNREADABLE_CHILD")
	if args == "" {
		t.Skip("the child of TestUnreadableLayer")
	}
	os.Exit(run(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
}

// TestUnreadableLayer: a layer file that cannot be read (mode 000) is a
// file that could not be read, exit status 2, for every command that
// reports it, not corrupt data (1); with a corrupt layer file besides,
// ls and verify still say 1.
func TestUnreadableLayer(t *testing.T) {
	if os.Getenv("INSPECT_UNREADABLE_CHILD") != "" {
		return
	}
	u := newUnreadableRunner(t)
	dir := filepath.Join(worldDir(t), "store")
	must(t, copyDir(testStore(t), dir))
	u.chownAll(t, dir)
	users := layerFile(t, dir, "users", 0)
	seen := layerFile(t, dir, "seen", 0)
	must(t, os.Chmod(users, 0))
	if f, err := os.Open(users); err == nil && u.bin == "" {
		f.Close()
		t.Skip("a file of mode 000 can be read here (not root, yet not restricted by modes)")
	}
	cmds := [][]string{{"ls", dir}, {"ls", "--json", dir}, {"info", dir, "users"}, {"info", "--json", dir, "users"},
		{"check", dir, "users", "user-001"}, {"check", "--json", dir, "users", "user-001"},
		{"verify", dir}, {"verify", "--json", dir}, {"verify", dir, "users"},
		{"stats", dir, "users"}, {"file", users}}
	for _, args := range cmds {
		short := strings.ReplaceAll(strings.Join(args, " "), dir, "DIR")
		r := u.run(t, args...)
		t.Logf("users 000: inspect %s: exit %d %s", short, r.code, strings.TrimSpace(strings.ReplaceAll(r.stderr, dir, "DIR")))
		if r.code != exitUsage || !strings.Contains(r.stderr, "permission denied") {
			t.Errorf("inspect %s, a layer file of mode 000: want exit 2 naming the permission error, got:\n%s", short, r)
		}
		checkClean(t, args, r)
	}

	// Corrupt data besides: the corruption decides.
	b, err := os.ReadFile(seen)
	must(t, err)
	b[0] ^= 0xff // the magic
	must(t, os.WriteFile(seen, b, 0o644))
	for _, args := range [][]string{{"ls", dir}, {"verify", dir}, {"info", dir, "seen"}, {"check", dir, "seen", "x"}} {
		short := strings.ReplaceAll(strings.Join(args, " "), dir, "DIR")
		r := u.run(t, args...)
		t.Logf("users 000, seen corrupt: inspect %s: exit %d %s", short, r.code, strings.TrimSpace(strings.ReplaceAll(r.stderr, dir, "DIR")))
		if r.code != exitProblems {
			t.Errorf("inspect %s, a layer file corrupt and another of mode 000: want exit 1, got:\n%s", short, r)
		}
		checkClean(t, args, r)
	}
}
