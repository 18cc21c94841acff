package format

import "testing"

func TestSessionContentRoundTrip(t *testing.T) {
	for _, first := range []uint64{0, 1, 1 << 40, ^uint64(0)} {
		b := SessionContent(first)
		if len(b) != SessionLen {
			t.Fatalf("SessionContent(%d) is %d bytes, want %d", first, len(b), SessionLen)
		}
		if got, ok := ParseSession(b); !ok || got != first {
			t.Fatalf("ParseSession(SessionContent(%d)) = %d, %v", first, got, ok)
		}
		for i := range b {
			bad := append([]byte(nil), b...)
			bad[i] ^= 0x04
			if got, ok := ParseSession(bad); ok {
				t.Fatalf("byte %d changed: ParseSession = %d, want nothing recorded", i, got)
			}
		}
		if _, ok := ParseSession(b[:len(b)-1]); ok {
			t.Fatal("a short marker parsed")
		}
	}
	if _, ok := ParseSession(nil); ok {
		t.Fatal("an empty marker parsed")
	}
}
