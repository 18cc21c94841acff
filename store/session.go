package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/regfile"
	"github.com/filterstore/filterstore/wal"
)

// sessionFile is in the store directory while a writer has the store open:
// Open creates it before its directory sync (so it costs no extra fsync)
// and a Close that checkpointed everything removes it. Found by Open, it
// says the last writer died: its pages may hold writes that no checkpoint
// covered the checksums of (the bits of an add whose record never reached
// the WAL, pages the kernel wrote back before a power loss), so every
// checksum is unknown until the next clean Close recomputes them all. A
// reader that finds it (a read-only Open, cmd/inspect) knows a writer is
// running or died, and that a page differing from its checksum may be a
// legitimate change not yet checkpointed.
const sessionFile = format.SessionName

// The marker's content, once the writer has opened the store and each
// time it starts a WAL segment: "wal ", the first LSN of the newest
// segment in 20 digits, a space, the CRC-32C of what precedes it in 8 hex
// digits, and a newline (sessionLen bytes), written in place and
// fdatasynced before any record goes into that segment (at Open, and
// through wal.Options.OnSegment). A later Open that finds the marker (the
// writer died) knows the WAL went on at least to that segment, so a
// newest segment deleted or moved since is a loss it reports rather than
// the end of the log. A torn tail of the newest segment cannot be told
// from one a crash left, and is not caught. A marker that is empty (one
// of a build before this one, or a writer that died before it wrote it),
// or whose CRC does not match (a write torn by a crash, or read while a
// live writer rewrote it), records nothing.
const (
	sessionPrefix = "wal "
	sessionLen    = len(sessionPrefix) + 20 + 1 + 8 + 1
)

// sessionContent is the marker's content for a newest segment whose first
// LSN is first.
func sessionContent(first uint64) []byte {
	b := fmt.Appendf(nil, "%s%020d", sessionPrefix, first)
	return fmt.Appendf(b, " %08x\n", crc.Checksum(b))
}

// parseSession returns the LSN content records, and ok false if it is
// not a marker's content.
func parseSession(b []byte) (uint64, bool) {
	if len(b) != sessionLen || string(b[:len(sessionPrefix)]) != sessionPrefix || b[sessionLen-10] != ' ' || b[sessionLen-1] != '\n' {
		return 0, false
	}
	body := b[:sessionLen-10]
	sum, err := strconv.ParseUint(string(b[sessionLen-9:sessionLen-1]), 16, 32)
	if err != nil || uint32(sum) != crc.Checksum(body) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(body[len(sessionPrefix):]), 10, 64)
	return v, err == nil
}

// readSession returns the first LSN of the newest WAL segment the marker
// records, and known false if there is no marker or it records none (it
// is empty, or not understood: that is logged). It reads sessionLen+1
// bytes at most, whatever the file's size.
func (s *Store) readSession() (newest uint64, known bool, err error) {
	path := filepath.Join(s.dir, sessionFile)
	f, err := regfile.Open(path, os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: open: %w", err)
	}
	defer f.Close()
	b := make([]byte, sessionLen+1)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, false, fmt.Errorf("store: open: read %s: %w", path, err)
	}
	if n == 0 {
		return 0, false, nil
	}
	if v, ok := parseSession(b[:n]); ok {
		return v, true, nil
	}
	s.opts.Logger.Warn("session marker not understood (torn, or not this build's); the newest WAL segment it would name is not checked", "file", path, "content", fmt.Sprintf("%q", b[:n]))
	return 0, false, nil
}

// newestLost returns an error wrapping ErrCorrupt if the marker records
// that the last writer started WAL segment newest while the newest
// segment there now starts at last: segments were deleted or moved after
// the writer died (or a running writer's were), with records no filter
// file holds.
func newestLost(newest, last uint64) error {
	if last >= newest {
		return nil
	}
	return fmt.Errorf("store: %w: %s records that the last writer started WAL segment %s, but the newest segment in %s/ is %s: the segments from %s on were deleted or moved after it died, and the changes logged in them are lost; put them back (removing %s opens the store without them, and Check then reports the pages they changed as checksum mismatches until the filter is rebuilt)",
		ErrCorrupt, sessionFile, wal.SegmentName(newest), format.WALName, wal.SegmentName(last), wal.SegmentName(newest), sessionFile)
}

// startSession opens the session marker for writing, creating it if it
// is not there, and reports whether it was there already (the last writer
// did not close cleanly). Unless it records already the WAL's newest
// segment (recorded, if known: the marker's content as Open found it), it
// records that segment, durably: the writer may append to it before it
// starts another. The caller syncs the directory afterwards.
func (s *Store) startSession(recorded uint64, known bool) (crashed bool, err error) {
	path := filepath.Join(s.dir, sessionFile)
	f, err := regfile.OpenOwn(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		crashed = true
		f, err = regfile.OpenOwn(path, os.O_WRONLY, 0)
	}
	if err != nil {
		return false, fmt.Errorf("store: open: %w", err)
	}
	s.sessionMu.Lock()
	s.session = f
	s.sessionMu.Unlock()
	segs := s.log.Segments()
	if newest := segs[len(segs)-1].FirstLSN; !crashed || !known || recorded != newest {
		if err := s.onSegment(newest); err != nil {
			return crashed, fmt.Errorf("store: open: %w", err)
		}
	}
	return crashed, nil
}

// onSegment is the WAL's Options.OnSegment: it records first, the first
// LSN of the segment the WAL starts, in the session marker, durably.
// Before the marker exists (a new store's first segment, a WAL restarted
// before the marker is made) it does nothing: startSession records the
// newest segment then.
func (s *Store) onSegment(first uint64) error {
	s.sessionMu.Lock()
	defer s.sessionMu.Unlock()
	if s.session == nil {
		return nil
	}
	if _, err := s.session.WriteAt(sessionContent(first), 0); err != nil {
		return fmt.Errorf("store: write %s: %w", sessionFile, err)
	}
	if err := syncData(s.session); err != nil {
		return fmt.Errorf("store: sync %s: %w", sessionFile, err)
	}
	return nil
}

// closeSession closes the marker's file, leaving the marker.
func (s *Store) closeSession() {
	s.sessionMu.Lock()
	defer s.sessionMu.Unlock()
	if s.session != nil {
		s.session.Close()
		s.session = nil
	}
}

// endSession removes the session marker durably, after a Close whose
// checkpoint recomputed every checksum.
func (s *Store) endSession() error {
	s.closeSession()
	if err := os.Remove(filepath.Join(s.dir, sessionFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: close: %w", err)
	}
	if err := s.dirSync(s.dir); err != nil {
		return fmt.Errorf("store: close: sync %s: %w", s.dir, err)
	}
	return nil
}

// writerActive reports whether the session marker is there: a writer has
// the store open, or the last one died.
func writerActive(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, sessionFile))
	return err == nil
}
