package store

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/filterstore/filterstore/internal/format"
)

// A reader (a read-only store's Check) tells a writer that died from one
// that runs, to know whether a page that differs from its checksum, and
// from what the WAL it read explains, is damage or a change in flight.
//
//   - The writer holds an open file description lock on the session
//     marker from its Open to its Close (lockSession); a reader asks for
//     it without taking it (sessionHeld). A marker there whose lock no
//     process holds is a dead writer's (or that of a writer whose Open
//     failed).
//   - Each writer Open writes a new random session id into the marker
//     before it changes any page. A reader that found the writer dead
//     when it opened, and finds the same marker content, the lock free,
//     and the WAL's entries and the catalog the same files (name, inode,
//     size, modification time) at a mismatch, knows no writer has run
//     since: nothing changed the page.
//   - A marker with session 0 (a writer that could not lock it, or a
//     build before session ids), an empty or torn one, or a file system
//     where the lock cannot be asked (off Linux; network and cluster file
//     systems, whose locks or caches may not show another host's writer)
//     says nothing: the writer is taken for a running one.

// writerState is what a reader can tell of the store's writer.
type writerState int

const (
	// writerNone: no session marker; no writer has the store open, and
	// the last one closed cleanly.
	writerNone writerState = iota
	// writerLive: a writer may be running (see above).
	writerLive
	// writerDead: the last writer died (or its Open failed), and nothing
	// changes pages.
	writerDead
)

// writerNow returns the state of dir's writer as it is now, and the
// marker's content (nil with no marker).
func writerNow(dir string) (writerState, []byte) {
	content, ok := readMarker(dir)
	if !ok {
		return writerNone, nil
	}
	// The content before the lock: a writer that opens meanwhile holds
	// the lock before it writes its session id.
	if _, session, ok := format.ParseSession(content); ok && session != 0 {
		if held, known := sessionHeld(dir); known && !held {
			return writerDead, content
		}
	}
	return writerLive, content
}

// readMarker returns the session marker's content, and ok false if there
// is no marker. A marker that cannot be read reads as empty.
func readMarker(dir string) (content []byte, ok bool) {
	b, err := format.ReadSession(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		return []byte{}, true
	}
	return b, true
}

// deadWriter is a read-only store's record that the writer was dead when
// its Open began: the marker's content, and the files a writer changes as
// it goes on (the WAL's segments, the catalog) as they were then.
type deadWriter struct {
	marker []byte
	files  []fs.FileInfo // the catalog, then wal/'s entries in name order
}

// deadWriterNow returns the record of a dead writer, or nil if the
// writer is not known dead or the files cannot be read.
func (s *Store) deadWriterNow() *deadWriter {
	state, marker := writerNow(s.dir)
	if state != writerDead {
		return nil
	}
	files, err := s.writerFiles()
	if err != nil {
		return nil
	}
	return &deadWriter{marker: marker, files: files}
}

// writerFiles lstats the catalog and every entry of wal/.
func (s *Store) writerFiles() ([]fs.FileInfo, error) {
	cat, err := os.Lstat(s.cat.Path)
	if err != nil {
		return nil, err
	}
	files := []fs.FileInfo{cat}
	entries, err := os.ReadDir(filepath.Join(s.dir, format.WALName))
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

// stillDead reports whether the writer is dead now and no writer has run
// since d was recorded: the marker is the same, its lock free, and the
// WAL and the catalog are the same files, of the same sizes and
// modification times.
func (s *Store) stillDead(d *deadWriter) bool {
	if d == nil {
		return false
	}
	if state, marker := writerNow(s.dir); state != writerDead || !bytes.Equal(marker, d.marker) {
		return false
	}
	files, err := s.writerFiles()
	if err != nil || len(files) != len(d.files) {
		return false
	}
	for i, fi := range files {
		if !sameFileState(fi, d.files[i]) {
			return false
		}
	}
	return true
}

// sameFileState reports whether a and b are the same file (name and
// inode) with the same size, modification time and mode: unchanged,
// as far as an lstat can tell.
func sameFileState(a, b fs.FileInfo) bool {
	return a.Name() == b.Name() && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode()
}
