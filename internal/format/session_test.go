package format

import (
	"fmt"
	"testing"

	"github.com/filterstore/filterstore/internal/crc"
)

func TestSessionContentRoundTrip(t *testing.T) {
	for _, first := range []uint64{0, 1, 1 << 40, ^uint64(0)} {
		for _, session := range []uint64{0, 1, 0xdeadbeefcafe, ^uint64(0)} {
			b := SessionContent(first, session)
			if len(b) != SessionLen {
				t.Fatalf("SessionContent(%d, %x) is %d bytes, want %d", first, session, len(b), SessionLen)
			}
			if f, s, ok := ParseSession(b); !ok || f != first || s != session {
				t.Fatalf("ParseSession(SessionContent(%d, %x)) = %d, %x, %v", first, session, f, s, ok)
			}
			for i := range b {
				bad := append([]byte(nil), b...)
				bad[i] ^= 0x04
				if f, s, ok := ParseSession(bad); ok {
					t.Fatalf("byte %d changed: ParseSession = %d, %x, want nothing recorded", i, f, s)
				}
			}
			if _, _, ok := ParseSession(b[:len(b)-1]); ok {
				t.Fatal("a short marker parsed")
			}
		}
	}
	if _, _, ok := ParseSession(nil); ok {
		t.Fatal("an empty marker parsed")
	}
}

// TestSessionContentV1: a marker of a build before the session field
// parses, with session 0.
func TestSessionContentV1(t *testing.T) {
	b := fmt.Appendf(nil, "wal %020d", 12345)
	b = fmt.Appendf(b, " %08x\n", crc.Checksum(b))
	if len(b) != SessionLenV1 {
		t.Fatalf("%d bytes, want %d", len(b), SessionLenV1)
	}
	if f, s, ok := ParseSession(b); !ok || f != 12345 || s != 0 {
		t.Fatalf("ParseSession(v1) = %d, %x, %v, want 12345, 0, true", f, s, ok)
	}
}

// TestSessionContentResync: the content that records a failed msync
// parses as the plain content does, SessionResync tells the two apart,
// and a changed byte or a plain marker's bytes under the longer length
// record nothing.
func TestSessionContentResync(t *testing.T) {
	b := SessionContentResync(1<<40, 0xdeadbeefcafe)
	if len(b) != SessionLenResync {
		t.Fatalf("SessionContentResync is %d bytes, want %d", len(b), SessionLenResync)
	}
	if f, s, ok := ParseSession(b); !ok || f != 1<<40 || s != 0xdeadbeefcafe {
		t.Fatalf("ParseSession(SessionContentResync) = %d, %x, %v", f, s, ok)
	}
	if !SessionResync(b) {
		t.Fatal("SessionResync of the resync content: false")
	}
	if SessionResync(SessionContent(1<<40, 0xdeadbeefcafe)) {
		t.Fatal("SessionResync of the plain content: true")
	}
	for i := range b {
		bad := append([]byte(nil), b...)
		bad[i] ^= 0x04
		if SessionResync(bad) {
			t.Fatalf("byte %d changed: SessionResync true", i)
		}
	}
	// A plain marker's fields with another word where "resync" goes,
	// its CRC right: not a resync marker, and records nothing.
	odd := fmt.Appendf(nil, "wal %020d %016x xxxxxx", 1, 2)
	odd = fmt.Appendf(odd, " %08x\n", crc.Checksum(odd))
	if len(odd) != SessionLenResync {
		t.Fatalf("%d bytes, want %d", len(odd), SessionLenResync)
	}
	if _, _, ok := ParseSession(odd); ok || SessionResync(odd) {
		t.Fatal("a marker with another word in the resync field parsed")
	}
}
