package store

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestAccessWhereFaccessat2IsRefused: under a seccomp filter that answers
// faccessat2 with EPERM (as older container profiles do for a system call
// they do not know), access falls back to faccessat: a writable directory
// passes, so a writer's Open of a new store and a reopen work. Before (a
// reviewer's run, with such a filter), every writer's Open failed: "wal
// cannot be written by this process ... operation not permitted". The
// filter is installed in a child process (this test binary again), since
// it cannot be removed.
func TestAccessWhereFaccessat2IsRefused(t *testing.T) {
	if os.Getenv("FILTERSTORE_SECCOMP_CHILD") == "" {
		c := exec.Command(os.Args[0], "-test.run=^TestAccessWhereFaccessat2IsRefused$", "-test.v")
		c.Env = append(os.Environ(), "FILTERSTORE_SECCOMP_CHILD=1")
		out, err := c.CombinedOutput()
		t.Logf("child:\n%s", out)
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		if strings.Contains(string(out), "--- SKIP") {
			t.Skip("the child skipped")
		}
		return
	}
	// The child: refuse faccessat2 with EPERM on every thread.
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // the system call's number
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_FACCESSAT2},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Skipf("no seccomp here: %v", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); e != 0 {
		t.Skipf("no seccomp here: %v", e)
	}
	dir := t.TempDir()
	if err := unix.Faccessat2(unix.AT_FDCWD, dir, unix.W_OK, unix.AT_EACCESS); err != unix.EPERM {
		t.Fatalf("faccessat2 under the filter: %v, want EPERM", err)
	}
	if err := access(dir, unix.R_OK|unix.W_OK|unix.X_OK); err != nil {
		t.Fatalf("access of a writable directory with faccessat2 refused: %v", err)
	}
	store := filepath.Join(dir, "store")
	for range 2 {
		s, err := Open(store, nil)
		must(t, err)
		must(t, s.Close())
	}
}
