package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/filterstore/filterstore/wal"
)

// openReadOnly opens a snapshot of the store without the writer lock and
// without writing anything: the catalog through bbolt's read-only mode,
// filter files copy-on-write, and the WAL records after the checkpoint
// replayed into those private pages, so answers match what the live
// writer would have said at Open.
func (s *Store) openReadOnly() error {
	if _, err := os.Stat(s.cat.path); err != nil {
		return fmt.Errorf("store: %s is not a store directory (no %s): %w", s.dir, catalogFile, err)
	}
	st, err := s.cat.load()
	if err != nil {
		return err
	}
	s.nextID = st.nextID
	s.checkpointLSN.Store(st.checkpoint)
	byID := make(map[uint64]handle)
	for name, m := range st.filters {
		h, err := s.openFilter(name, m, s.opts.mapper.OpenSnapshot)
		if err != nil {
			s.abandon()
			return err
		}
		s.filters[name] = h
		byID[m.ID] = h
	}
	err = scanWAL(filepath.Join(s.dir, walDir), st.checkpoint+1, func(pos WALPosition, p []byte) error {
		lsn := pos.LSN
		r, err := decodeRecord(p)
		if err != nil {
			return fmt.Errorf("LSN %d: %w", lsn, err)
		}
		h, ok := byID[r.id]
		if !ok {
			return nil
		}
		b := h.base()
		if r.layer >= len(b.regions) {
			// A layer the writer added after our catalog read: the
			// snapshot ends before it.
			return errStopScan
		}
		if r.op == opWords {
			for _, w := range r.writes {
				if w.idx >= b.regions[r.layer].NumWords() {
					return fmt.Errorf("store: %w: WAL record LSN %d writes word %d beyond filter %q layer %d",
						ErrCorrupt, lsn, w.idx, b.name, r.layer)
				}
			}
		}
		return h.replay(r)
	})
	if err != nil && !errors.Is(err, errStopScan) {
		s.abandon()
		return err
	}
	return nil
}

var errStopScan = errors.New("store: stop scan")

// scanWAL reads the segments in dir with plain reads and calls fn for each
// record with lsn >= from, in order. A torn record ends the scan (a live
// writer may be appending); an invalid record in an earlier segment is
// ErrCorrupt.
func scanWAL(dir string, from uint64, fn func(pos WALPosition, payload []byte) error) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: wal: %w", err)
	}
	type seg struct {
		name  string
		first uint64
	}
	var segs []seg
	for _, e := range ents {
		if first, ok := wal.ParseSegmentName(e.Name()); ok {
			segs = append(segs, seg{e.Name(), first})
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].first < segs[j].first })
	for i, sg := range segs {
		if i+1 < len(segs) && segs[i+1].first <= from {
			continue // wholly below from
		}
		last := i == len(segs)-1
		path := filepath.Join(dir, sg.name)
		data, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // truncated by the writer meanwhile
			}
			return fmt.Errorf("store: wal: %w", err)
		}
		if len(data) < wal.SegmentHeaderSize {
			if last {
				return nil
			}
			return fmt.Errorf("store: wal segment %s: %w: %d bytes, shorter than its header", path, ErrCorrupt, len(data))
		}
		if _, err := wal.ParseSegmentHeader(data[:wal.SegmentHeaderSize]); err != nil {
			return fmt.Errorf("store: wal segment %s at offset 0: %w", path, err)
		}
		body := data[wal.SegmentHeaderSize:]
		rd := wal.NewReader(bytes.NewReader(body))
		var prev uint64
		for {
			lsn, p, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if last && errors.Is(err, wal.ErrTorn) && !validAfter(body, rd.Offset()+1, prev+1) {
					return nil
				}
				return fmt.Errorf("store: wal segment %s at offset %d: %w: %v", path, wal.SegmentHeaderSize+rd.Offset(), ErrCorrupt, err)
			}
			prev = lsn
			if lsn < from {
				continue
			}
			if err := fn(WALPosition{Segment: path, Offset: wal.SegmentHeaderSize + rd.Offset(), LSN: lsn}, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// validAfter reports whether a valid record with an LSN of at least minLSN
// starts in body at or after off: then an invalid record before it is
// corruption, not a torn tail.
func validAfter(body []byte, off int64, minLSN uint64) bool {
	_, _, ok := wal.FindValidRecord(body, off, minLSN)
	return ok
}
