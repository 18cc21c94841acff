// Package testseed gives every randomized test in filterstore the same seed
// convention: one environment variable, FILTERSTORE_SEED, a seed that is
// always logged, and a run that is always replayable.
//
// A test calls Seed (or New for a ready generator) once and derives all of
// its randomness from the result. With FILTERSTORE_SEED unset the seed comes
// from the clock; with FILTERSTORE_SEED=N (decimal uint64) it is N, so
//
//	FILTERSTORE_SEED=N go test -run 'NAME' ./pkg/
//
// replays the run. Seed logs exactly that command through t.Logf, so it is
// printed whenever the test fails (and with -v).
//
// A test that runs many sequences (the crash tests) derives sequence i's
// seed as Seed(t)+i and names a failing sequence's seed with Replay: the
// replay then starts with the failing sequence.
package testseed

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Env is the one environment variable that sets the seed of every
// randomized test.
const Env = "FILTERSTORE_SEED"

// Seed returns the seed of t's run: $FILTERSTORE_SEED if set, else one from
// the clock. It logs the seed and the command that replays the run, and
// fails t if FILTERSTORE_SEED is not a decimal uint64.
func Seed(t testing.TB) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(Env); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a decimal uint64: %v", Env, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay: %s)", seed, Replay(t, seed))
	return seed
}

// New returns a generator seeded with Seed(t).
func New(t testing.TB) *rand.Rand {
	t.Helper()
	seed := Seed(t)
	return rand.New(rand.NewPCG(seed, 0))
}

// Replay returns the command that reruns t with FILTERSTORE_SEED=seed:
// "FILTERSTORE_SEED=N go test -run 'NAME' ./pkg/", with NAME matching t
// (and its parent tests) exactly and pkg the package's directory relative
// to the module root.
func Replay(t testing.TB, seed uint64) string {
	var name []string
	for _, part := range strings.Split(t.Name(), "/") {
		name = append(name, "^"+regexp.QuoteMeta(part)+"$")
	}
	run := "-run '" + strings.Join(name, "/") + "'"
	if _, ok := t.(*testing.B); ok {
		run = "-run '^$' -bench '" + strings.Join(name, "/") + "'"
	}
	return fmt.Sprintf("%s=%d go test %s %s", Env, seed, run, pkgDir())
}

// pkgDir returns the directory go test runs the test in (the package's),
// relative to the module root, as "./pkg/"; "." if it cannot tell.
func pkgDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for root := wd; ; {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			rel, err := filepath.Rel(root, wd)
			if err != nil {
				return "."
			}
			if rel == "." {
				return "./"
			}
			return "./" + filepath.ToSlash(rel) + "/"
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "."
		}
		root = parent
	}
}
