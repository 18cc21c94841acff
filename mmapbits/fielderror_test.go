package mmapbits

import (
	"errors"
	"testing"
)

// TestFieldErrorOffsets checks that each header failure at a known field
// names that field's offset as a value, not only in its message.
func TestFieldErrorOffsets(t *testing.T) {
	good := sampleHeader().Append(nil)
	for _, tc := range []struct {
		name   string
		mutate func(b []byte)
		want   error
		off    int64
	}{
		{"magic", func(b []byte) { b[3] ^= 1 }, ErrBadMagic, offMagic},
		{"version", func(b []byte) { b[offVersion] = 9 }, ErrBadVersion, offVersion},
		{"checksum", func(b []byte) { b[50] ^= 1 }, ErrBadChecksum, crcOffset},
	} {
		b := append([]byte(nil), good...)
		tc.mutate(b)
		_, _, err := DecodeHeader(b)
		var fe *FieldError
		if !errors.As(err, &fe) || !errors.Is(err, tc.want) || !errors.Is(err, ErrCorrupt) || fe.Offset != tc.off {
			t.Errorf("%s: %v (FieldError %+v), want %v at offset %d", tc.name, err, fe, tc.want, tc.off)
		}
	}
	if got := fieldOffset("DataPages"); got != 16 {
		t.Errorf("fieldOffset(DataPages) = %d, want 16", got)
	}
}
