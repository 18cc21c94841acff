package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/filterstore/filterstore/internal/format"
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

// startSession creates the session marker and reports whether it was
// there already (the last writer did not close cleanly). The caller syncs
// the directory afterwards.
func (s *Store) startSession() (crashed bool, err error) {
	path := filepath.Join(s.dir, sessionFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: open: %w", err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("store: open: %w", err)
	}
	return false, nil
}

// endSession removes the session marker durably, after a Close whose
// checkpoint recomputed every checksum.
func (s *Store) endSession() error {
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
