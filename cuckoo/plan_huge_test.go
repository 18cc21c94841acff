package cuckoo

import (
	"errors"
	"math"
	"math/big"
	"testing"
)

// TestIsqrtExtremes: isqrt is exact up to 2^64-1. Before, its correction
// loop squared 2^32, which wraps to 0, and never ended for x at or above
// (2^32-1)^2.
func TestIsqrtExtremes(t *testing.T) {
	for _, x := range []uint64{0, 1, 2, 3, 4, 1<<32 - 1, 1 << 32, (1<<32 - 1) * (1<<32 - 1), (1<<32-1)*(1<<32-1) - 1, math.MaxUint64 - 1, math.MaxUint64} {
		want := new(big.Int).Sqrt(new(big.Int).SetUint64(x)).Uint64()
		if got := isqrt(x); got != want {
			t.Fatalf("isqrt(%d) = %d, want %d", x, got, want)
		}
	}
}

// TestPlanHugeCapacity: a capacity whose bucket count lies anywhere up
// to 2^64 is refused with ErrInvalid, at once. Before, one needing about
// 2^64 buckets hung Plan in isqrt (an adversarial review's finding), and
// rounding up past 2^64 could have wrapped to a small table.
func TestPlanHugeCapacity(t *testing.T) {
	for _, b := range []int{1, 2, 4, 8} {
		den := uint64(b) * TargetLoad(b)
		for _, buckets := range []*big.Int{
			new(big.Int).Lsh(big.NewInt(1), 56),
			new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 64), big.NewInt(1<<20)),
			new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 64), big.NewInt(1)),
		} {
			c := new(big.Int).Mul(buckets, new(big.Int).SetUint64(den))
			c.Div(c, big.NewInt(1000))
			if !c.IsUint64() {
				continue
			}
			capacity := c.Uint64()
			if _, err := Plan(capacity, b, 8); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Plan(%d, %d, 8), about %v buckets: %v, want ErrInvalid", capacity, b, buckets, err)
			}
		}
		if _, err := Plan(math.MaxUint64, b, 8); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Plan(MaxUint64, %d, 8): %v, want ErrInvalid", b, err)
		}
	}
}
