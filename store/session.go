package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
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
// is empty, or not understood: that is logged). It reads format.SessionLen+1
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
	b := make([]byte, format.SessionLen+1)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, false, fmt.Errorf("store: open: read %s: %w", path, err)
	}
	if n == 0 {
		return 0, false, nil
	}
	if v, ok := format.ParseSession(b[:n]); ok {
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
	if err := lockSession(f); err != nil {
		// Readers then take this writer for a dead one: they would
		// report its changes to cuckoo, counting and bitmap pages, made
		// after they opened, as damage.
		s.opts.Logger.Warn("the session marker cannot be locked: a read-only Check beside this writer may report the pages it changes as checksum mismatches", "error", err)
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
	if _, err := s.session.WriteAt(format.SessionContent(first), 0); err != nil {
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

// writerState is what a reader can tell of the store's writer.
type writerState int

const (
	// writerNone: no session marker; no writer has the store open, and
	// the last one closed cleanly.
	writerNone writerState = iota
	// writerLive: the marker is there and locked, or its lock cannot be
	// asked (off Linux): a writer may be changing pages.
	writerLive
	// writerDead: the marker is there and no process holds its lock: the
	// last writer died (or its Open failed), and nothing changes pages.
	writerDead
)

// writerNow returns the state of dir's writer as it is now.
func writerNow(dir string) writerState {
	if !writerActive(dir) {
		return writerNone
	}
	if held, known := sessionHeld(dir); known && !held {
		return writerDead
	}
	return writerLive
}

// deadWriter is a read-only store's record that the writer was dead when
// its Open began: the files the writer changes as it goes on (the WAL's
// segments, the catalog) as they were then. A writer that ran since
// changed no data page without changing one of them: a cuckoo, counting
// or bitmap page changes only after a durable WAL record of the change,
// a Load's pages after its load record, and a checkpoint stores the
// checksums of what it syncs and commits the catalog.
type deadWriter struct {
	files []fs.FileInfo // the catalog, then wal/'s entries in name order
}

// deadWriterNow returns the record of a dead writer, or nil if the
// writer is not known dead or the files cannot be read.
func (s *Store) deadWriterNow() *deadWriter {
	if writerNow(s.dir) != writerDead {
		return nil
	}
	files, err := s.writerFiles()
	if err != nil {
		return nil
	}
	return &deadWriter{files: files}
}

// writerFiles lstats the catalog and every entry of wal/.
func (s *Store) writerFiles() ([]fs.FileInfo, error) {
	cat, err := os.Lstat(s.cat.Path)
	if err != nil {
		return nil, err
	}
	files := []fs.FileInfo{cat}
	walDir := filepath.Join(s.dir, format.WALName)
	entries, err := os.ReadDir(walDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		files = append(files, fi)
	}
	return files, nil
}

// stillDead reports whether the writer is dead now and no writer has
// run since d was recorded: the marker's lock is free and the WAL and
// the catalog are the same files, of the same sizes and modification
// times.
func (s *Store) stillDead(d *deadWriter) bool {
	if d == nil || writerNow(s.dir) != writerDead {
		return false
	}
	files, err := s.writerFiles()
	if err != nil || len(files) != len(d.files) {
		return false
	}
	for i, fi := range files {
		was := d.files[i]
		if fi.Name() != was.Name() || !os.SameFile(fi, was) || fi.Size() != was.Size() || !fi.ModTime().Equal(was.ModTime()) || fi.Mode() != was.Mode() {
			return false
		}
	}
	return true
}
