package prefetch

import (
	"testing"
	"unsafe"
)

// TestLines prefetches lines of a buffer, none of them, and the same line
// many times: the addresses must be read from the list (a wrong stride
// reads past it and faults) and nothing may change.
func TestLines(t *testing.T) {
	buf := make([]uint64, 1<<16)
	for i := range buf {
		buf[i] = uint64(i)
	}
	var ps []unsafe.Pointer
	for i := 0; i < len(buf); i += 97 {
		ps = append(ps, unsafe.Pointer(&buf[i]))
	}
	Lines(ps)
	Lines(nil)
	Lines(ps[:1])
	same := make([]unsafe.Pointer, 300)
	for i := range same {
		same[i] = unsafe.Pointer(&buf[len(buf)-1])
	}
	Lines(same)
	for i, v := range buf {
		if v != uint64(i) {
			t.Fatalf("buf[%d] = %d after prefetching, want %d", i, v, i)
		}
	}
}

// TestLinesAllocs checks that Lines allocates nothing.
func TestLinesAllocs(t *testing.T) {
	buf := make([]uint64, 64)
	ps := []unsafe.Pointer{unsafe.Pointer(&buf[0]), unsafe.Pointer(&buf[8])}
	if n := testing.AllocsPerRun(100, func() { Lines(ps) }); n != 0 {
		t.Errorf("Lines allocated %v times, want 0", n)
	}
}
