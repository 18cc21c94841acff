package store

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"

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

// The marker's content (format.SessionContent) records the first LSN of
// the newest WAL segment, written in place and fdatasynced before any
// record goes into that segment (at Open, and through
// wal.Options.OnSegment). A later Open that finds the marker (the writer
// died) knows the WAL went on at least to that segment, so a newest
// segment deleted or moved since is a loss it reports rather than the end
// of the log. A torn tail of the newest segment cannot be told from one a
// crash left, and is not caught.

// readSession returns the first LSN of the newest WAL segment the marker
// records, and known false if there is no marker or it records none (it
// is empty, or not understood: that is logged). It reads
// format.SessionLenResync+1 bytes at most, whatever the file's size.
func (s *Store) readSession() (newest uint64, known bool, err error) {
	b, err := format.ReadSession(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: open: %w", err)
	}
	if len(b) == 0 {
		return 0, false, nil
	}
	if v, _, ok := format.ParseSession(b); ok {
		return v, true, nil
	}
	s.opts.Logger.Warn("session marker not understood (torn, or not this build's); the newest WAL segment it would name is not checked", "file", filepath.Join(s.dir, sessionFile), "content", fmt.Sprintf("%q", b))
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
// did not close cleanly). It locks the marker (lockSession) and records
// in it, durably, this writer's session id and the WAL's newest segment:
// the writer may append to that segment before it starts another. The
// caller syncs the directory afterwards.
func (s *Store) startSession() (crashed bool, err error) {
	path := filepath.Join(s.dir, sessionFile)
	f, err := regfile.OpenOwn(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		crashed = true
		f, err = regfile.OpenOwn(path, os.O_WRONLY, 0)
	}
	if err != nil {
		return false, fmt.Errorf("store: open: %w", err)
	}
	if crashed {
		// Whatever its length (an older build's shorter content, bytes
		// written from outside), the marker holds exactly what
		// onSegment writes below, fdatasynced with it.
		if err := f.Truncate(int64(format.SessionLen)); err != nil {
			f.Close()
			return false, fmt.Errorf("store: open: truncate %s: %w", path, err)
		}
	}
	// A new session id on every Open, written before any page changes:
	// a reader that took the last writer for dead tells from it that a
	// writer has run since (see deadWriter). 0 says the marker is not
	// locked, and readers take the writer for a running one.
	var id uint64
	if err := lockSession(f); err != nil {
		s.opts.Logger.Warn("the session marker cannot be locked: read-only Checks cannot tell whether this writer runs, and report mismatches as unsettled", "error", err)
	} else {
		id = newSessionID()
	}
	s.sessionMu.Lock()
	s.session, s.sessionID = f, id
	s.sessionMu.Unlock()
	segs := s.log.Segments()
	if err := s.onSegment(segs[len(segs)-1].FirstLSN); err != nil {
		return crashed, fmt.Errorf("store: open: %w", err)
	}
	return crashed, nil
}

// newSessionID returns a random, nonzero writer session id.
func newSessionID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
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
	s.sessionFirst = first
	return s.writeSessionLocked()
}

// writeSessionLocked writes the marker's content, in place, and syncs it.
// s.sessionMu is held and the marker is open.
func (s *Store) writeSessionLocked() error {
	content := format.SessionContent(s.sessionFirst, s.sessionID)
	if s.sessionResync {
		content = format.SessionContentResync(s.sessionFirst, s.sessionID)
	}
	if _, err := s.session.WriteAt(content, 0); err != nil {
		return fmt.Errorf("store: write %s: %w", sessionFile, err)
	}
	if err := syncData(s.session); err != nil {
		return fmt.Errorf("store: sync %s: %w", sessionFile, err)
	}
	return nil
}

// markSessionResync records in the session marker, in place, that an
// msync of a filter file failed: markResync's fallback where the resync
// marker cannot be created.
func (s *Store) markSessionResync() error {
	s.sessionMu.Lock()
	defer s.sessionMu.Unlock()
	if s.session == nil {
		return fmt.Errorf("store: %s is not open", sessionFile)
	}
	s.sessionResync = true
	return s.writeSessionLocked()
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
	// Removed before its file is closed, which ends its lock: a reader
	// never finds it unlocked (a dead writer's) while this one runs.
	err := os.Remove(filepath.Join(s.dir, sessionFile))
	s.closeSession()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
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
