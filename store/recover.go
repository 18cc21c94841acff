package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// recover loads the catalog, removes orphan files, maps every filter,
// cross-checks each file header against the catalog, and replays the WAL
// after the checkpoint. It runs before the store is shared.
func (s *Store) recover() error {
	if err := s.cat.init(); err != nil {
		return err
	}
	st, err := s.cat.load()
	if err != nil {
		return err
	}
	s.nextID = st.nextID
	s.checkpointLSN.Store(st.checkpoint)
	if err := s.removeOrphans(st); err != nil {
		return err
	}
	for name, m := range st.filters {
		h, err := s.openFilter(name, m, s.opts.mapper.Open)
		if err != nil {
			return err
		}
		s.filters[name] = h
	}
	s.log, err = wal.Open(filepath.Join(s.dir, walDir), wal.Options{
		FS: s.opts.walFS, SegmentSize: s.opts.SegmentSize, SyncEvery: s.opts.SyncEvery,
		Sync: wal.SyncMode(s.opts.Sync), Logger: s.opts.Logger, OnSync: s.onSync,
	})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	n, err := s.replayWAL(st.checkpoint, func(lsn uint64, r record, h handle) error { return h.replay(r) })
	if err != nil {
		return err
	}
	if err := s.log.SetNextLSN(st.checkpoint + 1); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if n > 0 {
		s.opts.Logger.Info("recovered", "records", n, "from_lsn", st.checkpoint+1)
		return s.checkpointLocked()
	}
	return nil
}

// replayWAL calls fn for every record after checkpoint whose filter is in
// the catalog, in LSN order, and returns how many it visited.
func (s *Store) replayWAL(checkpoint uint64, fn func(lsn uint64, r record, h handle) error) (int, error) {
	if first, last := s.log.FirstLSN(), s.log.LastLSN(); last > checkpoint && first > checkpoint+1 {
		return 0, fmt.Errorf("store: %w: WAL starts at LSN %d but the checkpoint is at %d: records %d..%d are missing",
			ErrCorrupt, first, checkpoint, checkpoint+1, first-1)
	}
	byID := make(map[uint64]handle, len(s.filters))
	for _, h := range s.filters {
		byID[h.base().meta.ID] = h
	}
	n := 0
	err := s.log.Replay(checkpoint+1, func(lsn uint64, p []byte) error {
		r, err := decodeRecord(p)
		if err != nil {
			return fmt.Errorf("LSN %d: %w", lsn, err)
		}
		h, ok := byID[r.id]
		if !ok {
			return nil // dropped since
		}
		b := h.base()
		if r.layer >= len(b.regions) {
			return fmt.Errorf("store: %w: WAL record LSN %d names layer %d of filter %q, which has %d layers",
				ErrCorrupt, lsn, r.layer, b.name, len(b.regions))
		}
		if r.op == opWords {
			words := b.regions[r.layer].NumWords()
			for _, w := range r.writes {
				if w.idx >= words {
					return fmt.Errorf("store: %w: WAL record LSN %d writes word %d of filter %q layer %d, which has %d",
						ErrCorrupt, lsn, w.idx, b.name, r.layer, words)
				}
			}
		}
		n++
		return fn(lsn, r, h)
	})
	return n, err
}

// onSync is the WAL's OnSync hook: under SyncInterval it wakes the
// background goroutine to apply what became durable.
func (s *Store) onSync(uint64) {
	if s.opts.Sync != SyncInterval {
		return
	}
	select {
	case s.synced <- struct{}{}:
	default:
	}
}

// removeOrphans deletes files in the filters directory that the catalog
// does not reference: layers of filters created or grown, or dropped, when
// a crash struck between the file and the catalog change.
func (s *Store) removeOrphans(st *catalogState) error {
	dir := filepath.Join(s.dir, filtersDir)
	names, err := s.opts.mapper.List(dir)
	if err != nil {
		return err
	}
	layers := make(map[uint64]int, len(st.filters))
	for _, m := range st.filters {
		layers[m.ID] = len(m.Layers)
	}
	for _, name := range names {
		id, layer, ok := parseLayerPath(name)
		if ok {
			if n, known := layers[id]; known && layer < n {
				continue
			}
		} else if !strings.HasSuffix(name, ".tmp") {
			continue // not ours: leave it alone
		}
		s.opts.Logger.Info("removing orphan filter file", "file", name)
		if err := s.opts.mapper.Remove(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// openFilter maps every layer of m with open, checks each header against
// the catalog, and builds the handle.
func (s *Store) openFilter(name string, m *filterMeta, open func(string) (mmapbits.Region, error)) (handle, error) {
	b := &filterBase{s: s, name: name, meta: m}
	b.incomplete.Store(m.State == stateLoading)
	for i := range m.Layers {
		r, err := open(b.path(i))
		if err != nil {
			b.closeRegions()
			if errors.Is(err, mmapbits.ErrCorrupt) {
				return nil, fmt.Errorf("store: filter %q: %w", name, err)
			}
			return nil, fmt.Errorf("store: filter %q layer %d: %w: catalog lists the file but it cannot be opened: %v", name, i, ErrCorrupt, err)
		}
		b.regions = append(b.regions, r)
		if got, want := r.Header(), m.header(i); got != want {
			b.closeRegions()
			return nil, fmt.Errorf("store: filter %q: %w: header of %s does not match the catalog:\n file    %+v\n catalog %+v",
				name, ErrCorrupt, b.path(i), got, want)
		}
	}
	h, err := newHandle(b)
	if err != nil {
		b.closeRegions()
		return nil, fmt.Errorf("store: filter %q: %w: %v", name, ErrCorrupt, err)
	}
	return h, nil
}

// newHandle builds the kind-specific handle over b's mapped layers and
// restores the item counts from the catalog.
func newHandle(b *filterBase) (handle, error) {
	switch b.meta.Kind {
	case mmapbits.KindBloom:
		return newBloom(b)
	case mmapbits.KindCounting:
		return newCounting(b)
	case mmapbits.KindCuckoo:
		return newCuckoo(b)
	case mmapbits.KindBitmap:
		return newBitmap(b)
	}
	return nil, fmt.Errorf("unknown kind %v", b.meta.Kind)
}
