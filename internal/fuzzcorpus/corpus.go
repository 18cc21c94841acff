// Package fuzzcorpus keeps the checked-in seed corpora of filterstore's
// fuzz targets in step with the seeds their tests generate, and gives the
// targets that run a whole store a scratch directory in memory
// (MemTempDir). It is used by tests only.
package fuzzcorpus

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// WriteEnv names the environment variable that makes Check write the
// corpus instead of checking it.
const WriteEnv = "FILTERSTORE_WRITE_CORPUS"

// Check checks that testdata/fuzz/<target> (relative to the package under
// test) holds every seed as a []byte corpus file named by its key, or
// writes them when FILTERSTORE_WRITE_CORPUS=1. Other files in the directory
// (crashers the fuzzer found) are left alone.
func Check(t testing.TB, target string, seeds map[string][]byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	for name, seed := range seeds {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", seed)
		path := filepath.Join(dir, name)
		if os.Getenv(WriteEnv) == "1" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("%s is missing or stale (err %v); regenerate with %s=1 go test -run Corpus", path, err, WriteEnv)
		}
	}
}
