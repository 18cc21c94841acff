package bloom

import (
	"encoding/binary"
	"flag"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("bloom.seed", 0, "seed for randomized tests (0: from the clock; env BLOOM_SEED also works)")

// testRand returns a generator seeded from -bloom.seed, $BLOOM_SEED or the
// clock, and logs the seed so a failure can be replayed.
func testRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		if s := os.Getenv("BLOOM_SEED"); s != "" {
			v, err := strconv.ParseUint(s, 0, 64)
			if err != nil {
				t.Fatalf("BLOOM_SEED=%q: %v", s, err)
			}
			seed = v
		}
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -bloom.seed=%d or BLOOM_SEED=%d)", seed, seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
}

// key returns the 8-byte key of integer i, written into buf.
func key(buf *[8]byte, i uint64) []byte {
	binary.LittleEndian.PutUint64(buf[:], i)
	return buf[:]
}

// absentBase is where the integers of keys never added start.
const absentBase = 1 << 62
