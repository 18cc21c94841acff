package format

import (
	"fmt"
	"strconv"

	"github.com/filterstore/filterstore/internal/crc"
)

// The session marker's content (SessionName), once the writer has opened
// the store and each time it starts a WAL segment: "wal ", the first LSN
// of the newest segment in 20 digits, a space, the CRC-32C of what
// precedes it in 8 hex digits, and a newline (SessionLen bytes). An empty
// marker (one of an older build, or of a writer that died before it
// wrote it), or one whose CRC does not match (a write torn by a crash, or
// read while a live writer rewrote it), records nothing.
const (
	sessionPrefix = "wal "
	SessionLen    = len(sessionPrefix) + 20 + 1 + 8 + 1
)

// SessionContent is the marker's content for a newest WAL segment whose
// first LSN is first.
func SessionContent(first uint64) []byte {
	b := fmt.Appendf(nil, "%s%020d", sessionPrefix, first)
	return fmt.Appendf(b, " %08x\n", crc.Checksum(b))
}

// ParseSession returns the first LSN of the newest WAL segment that
// marker content b records, and ok false if b records none.
func ParseSession(b []byte) (first uint64, ok bool) {
	if len(b) != SessionLen || string(b[:len(sessionPrefix)]) != sessionPrefix || b[SessionLen-10] != ' ' || b[SessionLen-1] != '\n' {
		return 0, false
	}
	body := b[:SessionLen-10]
	sum, err := strconv.ParseUint(string(b[SessionLen-9:SessionLen-1]), 16, 32)
	if err != nil || uint32(sum) != crc.Checksum(body) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(body[len(sessionPrefix):]), 10, 64)
	return v, err == nil
}
