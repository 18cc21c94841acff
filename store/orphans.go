package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// planOrphans finds the files in the filters directory that the catalog
// does not name and that provably are this store's leftovers, to be
// removed once Open has checked everything; it changes nothing. A file is
// an orphan only if its header names this store's id and the filter id
// and layer of its name, and it is one of:
//
//   - a temporary file of an interrupted create (never renamed into use),
//     or one shorter than a header or with a header page of zeros (the
//     create died before writing it, or a power loss took it);
//   - a layer of a filter the catalog does not have, with an id below the
//     catalog's next id: the filter was dropped and a crash struck before
//     its files were removed;
//   - the file of a create or a new layer that a crash cut short before
//     the catalog named it: the catalog's next id and layer 0, or a
//     known filter's next layer — and then still all zero, as a file no
//     one ever wrote must be. Creates whose catalog commit failed (a full
//     disk, the catalog locked past its timeout) leave such a file each
//     and do not reuse its id, so layer-0 files at the next id and the
//     ones after it, every id from the next one up to theirs present and
//     all zero, are such leftovers too.
//
// A file of this store that is none of these (an id beyond that run, a
// layer beyond the next, or a next-id or next-layer file holding data)
// means the catalog is older than the files — restored from
// a backup — and Open fails with ErrCorrupt rather than delete a filter
// the catalog forgot. Files that are not this store's (another store's, a
// file from before store ids, an unreadable one) are left alone.
func (s *Store) planOrphans(st *catalog.State) ([]string, error) {
	dir := filepath.Join(s.dir, format.FiltersName)
	names, err := s.opts.mapper.List(dir)
	if err != nil {
		return nil, err
	}
	layers := make(map[uint64]int, len(st.Filters))
	for _, m := range st.Filters {
		layers[m.ID] = len(m.Layers)
	}
	var doomed []string
	// Zero layer-0 files at the next id and beyond, by id: failed
	// creates', if their ids run on from the next id without a gap.
	fresh := make(map[uint64]string)
	var beyond []string // files of ids past the run, if any
	for _, name := range names {
		base, tmp := strings.CutSuffix(name, format.TmpSuffix)
		id, layer, ok := format.ParseLayerName(base)
		if !ok {
			continue // not ours: leave it alone
		}
		n, known := layers[id]
		if known && layer < n && !tmp {
			continue
		}
		path := filepath.Join(dir, name)
		if why := s.provenOurs(path, id, layer, tmp); why != "" {
			s.opts.Logger.Warn("leaving a filter file the catalog does not name", "file", name, "reason", why)
			continue
		}
		switch {
		case tmp, !known && id < st.NextID:
		case !known && id >= st.NextID && layer == 0:
			fresh[id] = path // checked below, once the run is known
			continue
		case known && layer == n:
			if err := s.checkZero(path); err != nil {
				return nil, err
			}
		default:
			beyond = append(beyond, name)
			continue
		}
		doomed = append(doomed, path)
	}
	next := st.NextID
	for ; fresh[next] != ""; next++ {
		if err := s.checkZero(fresh[next]); err != nil {
			return nil, err
		}
		doomed = append(doomed, fresh[next])
	}
	for id := range fresh {
		if id >= next {
			beyond = append(beyond, filepath.Base(fresh[id]))
		}
	}
	if len(beyond) > 0 {
		slices.Sort(beyond)
		return nil, fmt.Errorf("store: %w: %s is this store's, but the catalog (next id %d) names no such filter or layer: is the catalog older than the files? (restore a newer one)",
			ErrCorrupt, filepath.Join(format.FiltersName, beyond[0]), st.NextID)
	}
	return doomed, nil
}

// checkZero returns an error wrapping ErrCorrupt unless every data word
// of the file at path, which the catalog does not name, is 0.
func (s *Store) checkZero(path string) error {
	if zero, err := s.allZero(path); err != nil || !zero {
		return fmt.Errorf("store: %w: %s holds data, but the catalog names no such filter or layer: is the catalog older than the files? (restore a newer one)",
			ErrCorrupt, filepath.Join(format.FiltersName, filepath.Base(path)))
	}
	return nil
}

// removeOrphans removes what planOrphans found.
func (s *Store) removeOrphans(paths []string) error {
	for _, path := range paths {
		s.opts.Logger.Info("removing orphan filter file", "file", filepath.Base(path))
		if err := s.opts.mapper.Remove(path); err != nil {
			return err
		}
	}
	return nil
}

// provenOurs returns "" if the file at path is this store's file of filter
// id, layer layer, or else why it cannot tell. A temporary file (tmp)
// shorter than a header is an interrupted create's that died before it
// wrote one (a create writes the header first), and one whose header page
// is all zero (ErrZeroHeader) a create's whose header a power loss took
// before it reached the disk: neither was ever renamed into use, so no
// catalog entry or record needs what it holds, and nothing else names a
// file so in the filters directory.
func (s *Store) provenOurs(path string, id uint64, layer int, tmp bool) string {
	v, err := s.opts.mapper.OpenView(path)
	if tmp && (errors.Is(err, mmapbits.ErrShortHeader) || errors.Is(err, mmapbits.ErrZeroHeader)) {
		return ""
	}
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

// allZero reports whether every data word of the file at path is 0. It
// reads the whole file, which only a crash-cut create or a catalog older
// than its files make it do.
func (s *Store) allZero(path string) (bool, error) {
	v, err := s.opts.mapper.OpenView(path)
	if err != nil {
		return false, err
	}
	defer v.Close()
	for i := range v.NumWords() {
		if w, ok := v.Word(i); !ok || w != 0 {
			return false, nil
		}
	}
	return true, nil
}
