package format

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/internal/regfile"
)

// The session marker's content (SessionName), written by the writer at
// Open and each time it starts a WAL segment:
//
//	wal <first LSN, 20 digits> <session, 16 hex digits> <CRC-32C, 8 hex digits>\n
//
// The first LSN is that of the newest WAL segment; the session is a
// random number each writer Open draws (0: a writer that could not lock
// the marker, see store's lockSession); the CRC covers what precedes it.
// Builds before the session field wrote "wal <first LSN> <CRC>\n"
// (SessionLenV1 bytes), which parses with session 0. An empty marker (a
// writer that died before it wrote it), or one whose CRC does not match
// (a write torn by a crash, or read while a live writer rewrote it),
// records nothing.
//
// A writer whose msync of a filter file failed and that could not create
// the resync marker (ResyncName: a new file, whose first block a failing
// disk may not be able to write) records it here instead, in place, in a
// block the marker has written already (SessionLenResync bytes):
//
//	wal <first LSN, 20 digits> <session, 16 hex digits> resync <CRC-32C, 8 hex digits>\n
const (
	sessionPrefix    = "wal "
	sessionResync    = " resync"
	SessionLenV1     = len(sessionPrefix) + 20 + 1 + 8 + 1
	SessionLen       = len(sessionPrefix) + 20 + 1 + 16 + 1 + 8 + 1
	SessionLenResync = SessionLen + len(sessionResync)
)

// SessionContent is the marker's content for a newest WAL segment whose
// first LSN is first, written by the writer session session.
func SessionContent(first, session uint64) []byte {
	b := fmt.Appendf(nil, "%s%020d %016x", sessionPrefix, first, session)
	return fmt.Appendf(b, " %08x\n", crc.Checksum(b))
}

// SessionContentResync is SessionContent recording, besides, that the
// writer's msync of a filter file failed (see the content's description).
func SessionContentResync(first, session uint64) []byte {
	b := fmt.Appendf(nil, "%s%020d %016x%s", sessionPrefix, first, session, sessionResync)
	return fmt.Appendf(b, " %08x\n", crc.Checksum(b))
}

// SessionResync reports whether marker content b records that the writer's
// msync of a filter file failed (SessionContentResync).
func SessionResync(b []byte) bool {
	_, _, ok := ParseSession(b)
	return ok && len(b) == SessionLenResync
}

// ParseSession returns the first LSN of the newest WAL segment and the
// writer session that marker content b records, and ok false if b
// records none.
func ParseSession(b []byte) (first, session uint64, ok bool) {
	n := len(b)
	if (n != SessionLen && n != SessionLenV1 && n != SessionLenResync) || string(b[:len(sessionPrefix)]) != sessionPrefix || b[n-10] != ' ' || b[n-1] != '\n' {
		return 0, 0, false
	}
	body := b[:n-10]
	sum, err := strconv.ParseUint(string(b[n-9:n-1]), 16, 32)
	if err != nil || uint32(sum) != crc.Checksum(body) {
		return 0, 0, false
	}
	if n == SessionLenResync {
		if string(body[len(body)-len(sessionResync):]) != sessionResync {
			return 0, 0, false
		}
		body, n = body[:len(body)-len(sessionResync)], SessionLen
	}
	lsn := body[len(sessionPrefix):]
	if n == SessionLen {
		if lsn[20] != ' ' {
			return 0, 0, false
		}
		if session, err = strconv.ParseUint(string(lsn[21:]), 16, 64); err != nil {
			return 0, 0, false
		}
		lsn = lsn[:20]
	}
	first, err = strconv.ParseUint(string(lsn), 10, 64)
	return first, session, err == nil
}

// ReadSession returns the content of dir's session marker, at most
// SessionLenResync+1 bytes of it whatever the file's size, or an error (one
// wrapping fs.ErrNotExist if there is no marker; a marker that is not a
// regular file is refused, as regfile.Open refuses it).
func ReadSession(dir string) ([]byte, error) {
	path := filepath.Join(dir, SessionName)
	f, err := regfile.Open(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, SessionLenResync+1)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b[:n], nil
}
