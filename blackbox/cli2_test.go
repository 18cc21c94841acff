package blackbox_test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// "the output could not be written (a full disk: every command ...)" is
// exit status 2.
func TestInspectOutputToFullDisk(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	dir := cliStore(t)
	for _, args := range [][]string{{"ls", dir}, {"info", dir, "b"}, {"verify", dir}, {"file", dir + "/filters/1-0.flt"}, {"help"}, {"version"}, {"check", dir, "b", "x"}, {"wal", dir}, {"stats", dir, "b"}} {
		f, _ := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		cmd := exec.Command(inspect(t), args...)
		cmd.Stdout = f
		err := cmd.Run()
		f.Close()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 2 {
			t.Errorf("inspect %v > /dev/full: exit %d, want 2", args, code)
		}
	}
}

// "A standard output that is a pipe closed by its reader (| head -1) ends
// the command by SIGPIPE ... never with status 0."
func TestInspectSIGPIPE(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, &store.Options{CheckpointEvery: -1, Sync: store.SyncInterval})
	defer s.Close()
	b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 100000})
	var err error
	for i := range 3000 {
		if _, err := b.Add(keyN("single", i)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(inspect(t), "wal", "--dump", dir)
	out, _ := cmd.StdoutPipe()
	must(t, cmd.Start())
	r := bufio.NewReader(out)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	out.Close()
	err = cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("inspect wal --dump with its reader gone: %v (want death by SIGPIPE)", err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGPIPE {
		t.Errorf("exit: %v, want SIGPIPE", err)
	}
}

// "inspect wal reports it (exit 1)": a directory holding BACKUP-INCOMPLETE.
func TestInspectBackupIncomplete(t *testing.T) {
	s, _ := newStore(t, nil)
	_, _ = s.CreateBloom("b", store.BloomConfig{})
	root := t.TempDir()
	must(t, s.Backup(root+"/copy"))
	must(t, os.WriteFile(root+"/copy/BACKUP-INCOMPLETE", nil, 0o644))
	so, se, code := run(t, "wal", root+"/copy")
	if code != 1 || !strings.Contains(so+se, "BACKUP-INCOMPLETE") {
		t.Errorf("inspect wal of an incomplete backup: exit %d\n%s%s", code, so, se)
	}
	so, se, code = run(t, "verify", root+"/copy")
	if code == 0 {
		t.Errorf("inspect verify of an incomplete backup: exit 0\n%s%s", so, se)
	}
	_, _, code = run(t, "ls", root+"/copy")
	t.Logf("inspect ls of an incomplete backup: exit %d", code)
}
