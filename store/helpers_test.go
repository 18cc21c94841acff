package store

import (
	"math/rand/v2"
	"testing"
)

func newTestRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

// infoer is a filter handle.
type infoer interface{ Info() (Info, error) }

// mustInfo returns f's Info, failing the test on an error.
func mustInfo(tb testing.TB, f infoer) Info {
	tb.Helper()
	in, err := f.Info()
	if err != nil {
		tb.Fatalf("Info: %v", err)
	}
	return in
}
