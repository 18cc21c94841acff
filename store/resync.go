package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/regfile"
	"github.com/filterstore/filterstore/mmapbits"
)

// The resync marker, format.ResyncName, marks a store whose filter files
// saw a failed msync: Linux then marks the pages clean without writing
// them and reports the error once, so a later msync (in this process or
// the next) "succeeds" without writing them. Nor does writing such a page
// again always make it durable: on ext4, a page of a preallocated
// (unwritten) extent, as every layer file's are until written, reads
// zeros once it leaves the cache, though it was written again and synced
// without an error (see mmapbits.Evicter). So the Open that finds the
// marker first drops the filter files' pages from the cache
// (evictForResync), before it maps them: they then read what the disk
// holds, the last checkpoint's data and whatever writes after it reached
// the disk, and the replay of the WAL from the catalog's checkpoint (which
// a failed checkpoint never advances) puts back every logged change since.
// Then it rewrites every page (syncFilters), for pages another process
// still maps, which no eviction drops, and removes the marker once the
// files are synced.

// evictForResync drops the pages of every layer file st names from the
// page cache, after syncing each, if the resync marker is there and the
// mapper can (mmapbits.Evicter). A file that is missing, is not a regular
// file or cannot be opened is left to the filter's own open, which
// reports it (the filter opens broken); any other failure, a failed sync
// above all, fails Open, which leaves the marker.
func (s *Store) evictForResync(st *catalog.State) error {
	marker := filepath.Join(s.dir, format.ResyncName)
	if _, err := os.Lstat(marker); err != nil {
		return nil // none (an error other than "missing" is found again later)
	}
	if err := regfile.CheckOwn(marker); err != nil {
		return fmt.Errorf("store: open: %w", err)
	}
	ev, ok := s.opts.mapper.(mmapbits.Evicter)
	if !ok {
		return nil
	}
	n := 0
	for _, m := range st.Filters {
		for i := range m.Layers {
			err := ev.Evict(s.layerPath(m.ID, i))
			switch {
			case err == nil:
				n++
			case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission), errors.Is(err, regfile.ErrNotRegular):
			default:
				return fmt.Errorf("store: open: %w", err)
			}
		}
	}
	s.opts.Logger.Warn("an earlier msync failed: dropped the filter files' pages from the cache, to rebuild them from the disk and the WAL", "marker", marker, "files", n)
	return nil
}

// syncFilters makes every healthy filter file durable at Open. If the
// marker is there, it first dirties every data page (one store of the
// value a word holds per page, and Touch for the simulated mapper), then
// syncs, and removes the marker once that succeeded. A failed sync leaves
// (or writes) the marker and fails Open.
func (s *Store) syncFilters() error {
	marker := filepath.Join(s.dir, format.ResyncName)
	_, statErr := os.Lstat(marker) // a link was refused before (recover)
	rewrite := statErr == nil
	if rewrite {
		s.opts.Logger.Warn("an earlier msync failed: rewriting every page of every filter before trusting them", "marker", marker)
	}
	for _, h := range s.filters {
		b := h.base()
		if b.broken != nil {
			continue
		}
		for i, r := range b.regions {
			if rewrite {
				words := r.Words()
				for p := 0; p < len(words); p += mmapbits.WordsPerPage {
					atomic.AddUint64(&words[p], 0)
				}
				r.Touch(0, uint64(len(words)))
			}
			if err := r.Sync(); err != nil {
				err = fmt.Errorf("store: open: filter %q layer %d: %w", b.name(), i, err)
				if merr := s.markResync(); merr != nil {
					err = errors.Join(err, merr)
				}
				return err
			}
		}
	}
	if rewrite {
		if err := os.Remove(marker); err != nil {
			return fmt.Errorf("store: open: %w", err)
		}
		if err := s.dirSync(s.dir); err != nil {
			return fmt.Errorf("store: open: sync %s: %w", s.dir, err)
		}
	}
	return nil
}

// markResync durably writes the resync marker.
func (s *Store) markResync() error {
	path := filepath.Join(s.dir, format.ResyncName)
	f, err := regfile.OpenOwn(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err == nil {
		_, err = f.WriteString("an msync of a filter file failed: the next Open rewrites every page before trusting them\n")
		if serr := f.Sync(); err == nil {
			err = serr
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = s.dirSync(s.dir)
	}
	if err != nil {
		return fmt.Errorf("store: writing %s: %w", path, err)
	}
	return nil
}
