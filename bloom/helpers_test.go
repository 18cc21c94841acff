package bloom

import "encoding/binary"

// key returns the 8-byte key of integer i, written into buf.
func key(buf *[8]byte, i uint64) []byte {
	binary.LittleEndian.PutUint64(buf[:], i)
	return buf[:]
}

// absentBase is where the integers of keys never added start.
const absentBase = 1 << 62
