package testseed

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records what Seed logs and whether it failed.
type recorder struct {
	testing.TB
	logs   []string
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestSeedFromEnv(t *testing.T) {
	t.Setenv(Env, "18446744073709551615")
	r := &recorder{TB: t}
	if got := Seed(r); got != 1<<64-1 {
		t.Fatalf("Seed = %d, want %d", got, uint64(1<<64-1))
	}
	want := "seed 18446744073709551615 (replay: FILTERSTORE_SEED=18446744073709551615 go test -run '^TestSeedFromEnv$' ./internal/testseed/)"
	if len(r.logs) != 1 || r.logs[0] != want {
		t.Fatalf("logged %q, want %q", r.logs, want)
	}
	if r.failed != "" {
		t.Fatalf("failed: %s", r.failed)
	}
}

func TestSeedSameGenerator(t *testing.T) {
	t.Setenv(Env, "42")
	a, b := New(&recorder{TB: t}), New(&recorder{TB: t})
	for i := 0; i < 10; i++ {
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("draw %d: %d and %d from one seed", i, x, y)
		}
	}
}

func TestSeedFromClockLogged(t *testing.T) {
	t.Setenv(Env, "")
	r := &recorder{TB: t}
	seed := Seed(r)
	if len(r.logs) != 1 || !strings.HasPrefix(r.logs[0], fmt.Sprintf("seed %d (replay: FILTERSTORE_SEED=%d go test", seed, seed)) {
		t.Fatalf("logged %q for seed %d", r.logs, seed)
	}
}

func TestSeedBadEnv(t *testing.T) {
	for _, v := range []string{"-1", "0x10", "seed", "18446744073709551616"} {
		t.Setenv(Env, v)
		r := &recorder{TB: t}
		Seed(r)
		if !strings.Contains(r.failed, Env) {
			t.Errorf("%s=%q: failure %q, want one naming %s", Env, v, r.failed, Env)
		}
	}
}

func TestReplaySubtest(t *testing.T) {
	t.Run("a b.c", func(t *testing.T) {
		got := Replay(t, 7)
		want := `FILTERSTORE_SEED=7 go test -run '^TestReplaySubtest$/^a_b\.c$' ./internal/testseed/`
		if got != want {
			t.Fatalf("Replay = %q, want %q", got, want)
		}
	})
}
