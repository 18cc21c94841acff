package store

import (
	"path/filepath"
	"strings"
)

// removeOrphans deletes files in the filters directory that the catalog
// does not reference and that provably belong to this store: layers of
// filters created or grown, or dropped, when a crash struck between the
// file and the catalog change, and temporary files of an interrupted
// create. A file is removed only if its header names this store's id and
// the filter id and layer of its name; anything else (a file of another
// store, an unreadable one, a file from before store ids) is left alone
// and logged.
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
		base, tmp := strings.CutSuffix(name, ".tmp")
		id, layer, ok := parseLayerPath(base)
		if !ok {
			continue // not ours: leave it alone
		}
		if n, known := layers[id]; known && layer < n && !tmp {
			continue
		}
		path := filepath.Join(dir, name)
		if why := s.provenOrphan(path, id, layer); why != "" {
			s.opts.Logger.Warn("leaving a filter file the catalog does not name", "file", name, "reason", why)
			continue
		}
		s.opts.Logger.Info("removing orphan filter file", "file", name)
		if err := s.opts.mapper.Remove(path); err != nil {
			return err
		}
	}
	return nil
}

// provenOrphan returns "" if the file at path is this store's file of
// filter id, layer layer, or else why it cannot tell.
func (s *Store) provenOrphan(path string, id uint64, layer int) string {
	v, err := s.opts.mapper.OpenView(path)
	if err != nil {
		return "its header cannot be read: " + err.Error()
	}
	h := v.Header()
	v.Close()
	switch {
	case h.StoreID == 0:
		return "it predates store ids"
	case h.StoreID != s.id:
		return "its header names another store"
	case h.FilterID != id || int(h.Layer) != layer:
		return "its header names another filter or layer than its file name"
	}
	return ""
}
