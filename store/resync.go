package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/regfile"
	"github.com/filterstore/filterstore/mmapbits"
)

// The resync marker, format.ResyncName, marks a store whose filter files
// saw a failed msync: Linux then marks the pages clean without writing
// them and reports the error once, so a later msync (in this process or
// the next) "succeeds" without writing them. Only rewriting every page,
// from the page cache that still holds them, makes them durable; the
// marker makes the next Open do it.

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
