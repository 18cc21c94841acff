package blackbox2_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/store"
)

var binDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "blackbox2-bin")
	if err != nil {
		panic(err)
	}
	binDir = d
	cmd := exec.Command("go", "build", "-o", d, "github.com/filterstore/filterstore/cmd/inspect", "github.com/filterstore/filterstore/cmd/demo")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the commands:", err)
		os.RemoveAll(d)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

type result struct {
	out, err string
	code     int
}

// run runs a built command (inspect or demo) with args.
func run(t *testing.T, name string, stdin []byte, args ...string) result {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{o.String(), e.String(), code}
}

func inspect(t *testing.T, args ...string) result {
	t.Helper()
	return run(t, "inspect", nil, args...)
}

// fixture makes a closed store with a bloom "b", a cuckoo "c", a counting
// "n" and a bitmap "m" of 10000 bits, each with 500 keys (k0..k499; bitmap
// offsets 0, 3, ..., 1497).
func fixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(dir, nil)
	must(t, err)
	b, err := s.CreateBloom("b", store.BloomConfig{Capacity: 1000})
	must(t, err)
	c, err := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 1000})
	must(t, err)
	n, err := s.CreateCounting("n", store.BloomConfig{Capacity: 1000})
	must(t, err)
	m, err := s.CreateBitmap("m", 10000)
	must(t, err)
	var ks [][]byte
	var offs []uint64
	for i := range 500 {
		ks = append(ks, keyN("k", i))
		offs = append(offs, uint64(3*i))
	}
	_, err = b.AddMany(ks)
	must(t, err)
	_, err = c.AddMany(ks)
	must(t, err)
	_, err = n.AddMany(ks)
	must(t, err)
	_, err = m.SetMany(offs)
	must(t, err)
	must(t, s.Close())
	return dir
}
