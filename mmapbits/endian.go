package mmapbits

import (
	"encoding/binary"
	"errors"
)

// errBigEndian is returned by every mapping call on a big-endian host: data
// words are little-endian on disk and are read in place.
var errBigEndian = errors.New("mmapbits: big-endian hosts are not supported: data words are little-endian and read in place")

func hostLittleEndian() bool {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], 1)
	return b[0] == 1
}
