package mmapbits

import (
	"testing"
	"unsafe"
)

// TestAnonWords: the words are zero, writable, aligned to a huge page,
// and free unmaps them once.
func TestAnonWords(t *testing.T) {
	for _, n := range []uint64{0, 1, 511, 1 << 20} {
		w, free, err := AnonWords(n, n%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(w)) != n {
			t.Fatalf("AnonWords(%d) gave %d words", n, len(w))
		}
		if n > 0 {
			if p := uintptr(unsafe.Pointer(&w[0])); p%hugePage != 0 {
				t.Fatalf("AnonWords(%d) at %#x, not aligned to %d", n, p, hugePage)
			}
			for i := uint64(0); i < n; i += 4099 {
				if w[i] != 0 {
					t.Fatalf("word %d is %#x, want 0", i, w[i])
				}
				w[i] = i + 1
			}
			w[n-1] = 7
		}
		if err := free(); err != nil {
			t.Fatalf("free: %v", err)
		}
	}
	if _, _, err := AnonWords(1<<62, true); err == nil {
		t.Fatal("AnonWords(1<<62) succeeded")
	}
}
