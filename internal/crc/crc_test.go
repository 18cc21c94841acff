package crc

import (
	"hash/crc32"
	"testing"
)

// TestVectors pins the checksum to the published CRC-32C check value and
// to a vector computed independently of this package's table.
func TestVectors(t *testing.T) {
	if got := Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Errorf("Checksum(123456789) = %#08x, want 0xe3069283", got)
	}
	if got := Checksum(nil); got != 0 {
		t.Errorf("Checksum(nil) = %#08x, want 0", got)
	}
	b := []byte("filterstore catalog value")
	if got, want := Checksum(b), crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)); got != want {
		t.Errorf("Checksum = %#08x, crc32.Castagnoli gives %#08x", got, want)
	}
}

func TestUpdateComposes(t *testing.T) {
	b := []byte("length|crc-|lsn-----payload bytes")
	for i := 0; i <= len(b); i++ {
		if got, want := Update(Update(0, b[:i]), b[i:]), Checksum(b); got != want {
			t.Fatalf("split at %d: %#08x, want %#08x", i, got, want)
		}
	}
}
