package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
// Pages another process maps are not dropped: that Open fails with
// ErrBusy, the marker staying, until they are unmapped. Then it rewrites
// every page (syncFilters: where no page could be dropped, as on a system
// without posix_fadvise, that is the best there is) and removes the
// marker once the files are synced.
//
// A layer file that is missing at that Open (moved away; its filter opens
// broken) cannot be dropped: if it comes back (moved back: the same
// inode, with its cached pages), the replay into those pages could be
// lost as above. So that Open leaves the marker listing those files only
// (a partial marker: resyncPartialHeader, one base name a line, then
// resyncPartialEnd; written to a temporary file and renamed over the
// marker), and later Opens drop, replay into and rewrite those files
// alone, leaving the catalog and the other files, which were read again
// from the disk already, as they are: a reader mapping them does not
// make those Opens fail. The files of a filter that opens broken at a
// resyncing Open for any other reason (its file's header does not check
// out: another file may stand at its path) are listed too: its own file
// was not seen. A listed file's filter dropped meanwhile leaves the list;
// the marker goes once every listed filter opens whole. Any content that
// is not a whole partial marker (the full marker's sentence, an empty or
// torn file) means a full resync, and a new failed msync or catalog
// commit writes the full marker over a partial one, or, where it cannot,
// records the failure in the session marker, which then overrides a
// partial marker (resyncList) until an Open has written the full one.

// evictForResync drops the pages of every layer file st names from the
// page cache, after syncing each, if the resync marker is there and the
// mapper can (mmapbits.Evicter). A file that is missing or is not a
// regular file is left to the filter's own open, which reports it (the
// filter opens broken); any other failure fails Open, which leaves the
// marker: a file that cannot be opened (its pages would stay as the cache
// holds them, for a later Open that can open it and no longer finds the
// marker), a failed sync, or pages that stay because another process maps
// the file (ErrBusy), which would have the replay build on what the cache
// holds.
func (s *Store) evictForResync(st *catalog.State) error {
	if pending, err := s.resyncPending(true); err != nil || !pending {
		return err
	}
	marker := filepath.Join(s.dir, format.ResyncName)
	s.resyncOnly = s.resyncList()
	ev, ok := s.opts.mapper.(mmapbits.Evicter)
	n := 0
	for _, m := range st.Filters {
		for i := range m.Layers {
			path := s.layerPath(m.ID, i)
			base := filepath.Base(path)
			if s.resyncOnly != nil && !s.resyncOnly[base] {
				continue // read again from the disk by an earlier Open
			}
			var err error
			if ok {
				err = ev.Evict(path)
			} else if _, serr := os.Lstat(path); serr != nil {
				err = serr
			}
			switch {
			case err == nil:
				n++
			case errors.Is(err, fs.ErrNotExist), errors.Is(err, regfile.ErrNotRegular):
				// Its pages (if the file comes back: moved away and
				// back) are still as the cache holds them: the marker
				// stays, listing it, for the Open that finds it again.
				s.resyncSkipped = append(s.resyncSkipped, base)
			case errors.Is(err, mmapbits.ErrBusy):
				// Its pages stay as the cache holds them, and those may
				// not be what a write makes durable: recovering over
				// them could lose acknowledged changes.
				return fmt.Errorf("store: open: an earlier msync failed, and the filter files must be read again from the disk, but another process maps them (a read-only store, an inspect command): close it and open again (%s stays until then): %w", format.ResyncName, err)
			default:
				return fmt.Errorf("store: open: %w", err)
			}
		}
	}
	if ok {
		s.opts.Logger.Warn("an earlier msync failed: dropped the filter files' pages from the cache, to rebuild them from the disk and the WAL", "marker", marker, "files", n)
	}
	return nil
}

// The partial resync marker's first and last lines (see above).
const (
	resyncPartialHeader = "filterstore resync of the layer files below only (the others were read again from the disk)"
	resyncPartialEnd    = "end"
)

// readResyncList returns the layer files a partial resync marker at path
// lists, by base name, or nil for a full marker (any other content, or
// one that cannot be read).
func readResyncList(path string) map[string]bool {
	f, err := regfile.Open(path, os.O_RDONLY)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil
	}
	lines := strings.Split(string(b), "\n")
	// header, names..., end, "" (the last newline)
	if len(lines) < 3 || lines[0] != resyncPartialHeader || lines[len(lines)-1] != "" || lines[len(lines)-2] != resyncPartialEnd {
		return nil
	}
	only := make(map[string]bool, len(lines)-3)
	for _, name := range lines[1 : len(lines)-2] {
		if name == "" || name != filepath.Base(name) {
			return nil
		}
		only[name] = true
	}
	return only
}

// writeResyncList durably replaces the resync marker with a partial one
// listing names: written to a temporary file, synced, renamed over the
// marker, the directory synced.
func (s *Store) writeResyncList(names []string) error {
	marker := filepath.Join(s.dir, format.ResyncName)
	tmp := marker + ".tmp"
	content := resyncPartialHeader + "\n" + strings.Join(names, "\n") + "\n" + resyncPartialEnd + "\n"
	f, err := regfile.OpenOwn(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err == nil {
		_, err = f.WriteString(content)
		if serr := f.Sync(); err == nil {
			err = serr
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, marker)
	}
	if err == nil {
		err = s.dirSync(s.dir)
	}
	if err != nil {
		return fmt.Errorf("store: open: writing %s: %w", marker, err)
	}
	return nil
}

// resyncPending reports whether the resync marker is there, or the
// session marker records a failed msync or catalog commit whose resync
// marker could not be made (markResync). With create set, it makes the
// resync marker from the session marker's record (before the session
// marker is rewritten), or Open fails; without, it writes nothing (Open
// changes no file before the catalog's checks). A marker that is not a
// file of its own fails Open.
func (s *Store) resyncPending(create bool) (bool, error) {
	marker := filepath.Join(s.dir, format.ResyncName)
	if _, err := os.Lstat(marker); err != nil {
		if b, rerr := format.ReadSession(s.dir); rerr != nil || !format.SessionResync(b) {
			return false, nil // (an error reading it is found again later)
		}
		if !create {
			return true, nil
		}
		if err := s.markResyncFile(); err != nil {
			return false, fmt.Errorf("store: open: %s records a failed msync or catalog commit: %w", sessionFile, err)
		}
		s.opts.Logger.Warn("the session marker records a failed msync or catalog commit: resync marker written", "marker", marker)
	}
	if err := regfile.CheckOwn(marker); err != nil {
		return false, fmt.Errorf("store: open: %w", err)
	}
	if create && readResyncList(marker) != nil {
		// A partial marker, and the session marker records a failure
		// since (markResync could not write the full marker over it):
		// the full marker, before the session marker is rewritten.
		if b, rerr := format.ReadSession(s.dir); rerr == nil && format.SessionResync(b) {
			if err := s.markResyncFile(); err != nil {
				return false, fmt.Errorf("store: open: %s records a failed msync or catalog commit: %w", sessionFile, err)
			}
			s.opts.Logger.Warn("the session marker records a failed msync or catalog commit: the partial resync marker made full", "marker", marker)
		}
	}
	return true, nil
}

// resyncList is readResyncList of the store's marker, nil (a full
// resync) also where the session marker records a failed msync or
// catalog commit that a partial marker predates.
func (s *Store) resyncList() map[string]bool {
	if b, err := format.ReadSession(s.dir); err == nil && format.SessionResync(b) {
		return nil
	}
	return readResyncList(filepath.Join(s.dir, format.ResyncName))
}

// evictCatalog syncs the catalog file and drops its pages from the page
// cache (a variable for tests).
var evictCatalog = func(path string) error { return mmapbits.OS{}.Evict(path) }

// evictCatalogForResync drops the catalog's pages from the page cache, if
// the resync marker is there, before the catalog is opened. A failed
// catalog commit writes the marker (catalogFailed), as a failed msync
// does: it can leave in the cache, clean, pages that bbolt wrote and the
// disk does not hold, which bbolt would read back as the catalog, and
// whose page ids a later commit writes again, where ext4 can lose the
// rewrite of a page whose write-back failed (see mmapbits.Evicter). Read
// from the disk, the catalog is the last commit that reached it. A
// catalog that is missing or not a regular file is left to the catalog's
// open, which reports it; any other failure fails Open, the marker
// staying: pages another process maps (a read-only store, an inspect
// command) stay in the cache (ErrBusy), and a failed sync means what the
// cache holds did not reach the disk.
func (s *Store) evictCatalogForResync() error {
	if pending, err := s.resyncPending(false); err != nil || !pending {
		return err
	}
	if s.resyncList() != nil {
		return nil // a partial marker: the catalog was read again already
	}
	err := evictCatalog(s.cat.Path)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, regfile.ErrNotRegular):
		// A catalog that is there when it is opened (moved back
		// meanwhile) holds its pages as the cache does: openCatalog
		// refuses it.
		s.catalogNotEvicted = true
		return nil
	case errors.Is(err, mmapbits.ErrBusy):
		return fmt.Errorf("store: open: an earlier msync or catalog commit failed, and the catalog must be read again from the disk, but another process maps it (a read-only store, an inspect command): close it and open again (%s stays until then): %w", format.ResyncName, err)
	default:
		return fmt.Errorf("store: open: %w", err)
	}
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
			// Not replayed into nor rewritten, and the file its Open saw
			// may not be the filter's own (another's put at its path):
			// its files stay listed, for the Open that opens it.
			if rewrite {
				for i := range b.meta.Layers {
					base := filepath.Base(s.layerPath(b.meta.ID, i))
					if (s.resyncOnly == nil || s.resyncOnly[base]) && !slices.Contains(s.resyncSkipped, base) {
						s.resyncSkipped = append(s.resyncSkipped, base)
					}
				}
			}
			continue
		}
		for i, r := range b.regions {
			if rewrite && (s.resyncOnly == nil || s.resyncOnly[filepath.Base(s.layerPath(b.meta.ID, i))]) {
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
	if rewrite && len(s.resyncSkipped) > 0 {
		if err := s.writeResyncList(s.resyncSkipped); err != nil {
			// The marker stays as it was (or, renamed but not synced,
			// either stays): full, or listing these files and maybe
			// more (only listed files are skipped at a partial one), so
			// the next Open resyncs at least as much again.
			s.opts.Logger.Warn("an earlier msync failed and filter files could not be read again from the disk (missing), and the resync marker listing them could not be written: the marker stays as it was", "marker", marker, "err", err)
			return nil
		}
		s.opts.Logger.Warn("an earlier msync failed and filter files could not be read again from the disk (missing): the resync marker stays, listing them, until they can", "marker", marker, "files", s.resyncSkipped)
		return nil
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

// markResync durably writes the resync marker. Where it cannot (the
// marker is a new file: on a disk that fails writes to blocks never
// written, as a full thin-provisioned one does, its first block is what
// fails), it records the failed msync in the session marker instead, in
// place (markSessionResync), which the next Open turns into the resync
// marker before it changes anything (evictForResync). It fails only if
// neither is durable.
func (s *Store) markResync() error {
	err := s.markResyncFile()
	if err == nil {
		return nil
	}
	if serr := s.markSessionResync(); serr != nil {
		return errors.Join(err, serr)
	}
	s.opts.Logger.Warn("cannot write the resync marker: the session marker records the failed msync instead", "err", err)
	return nil
}

// createResyncFile, if set (by tests), is called before the resync
// marker is created, and an error it returns is markResyncFile's.
var createResyncFile func() error

// markResyncFile durably writes the resync marker file.
func (s *Store) markResyncFile() error {
	if createResyncFile != nil {
		if err := createResyncFile(); err != nil {
			return fmt.Errorf("store: writing %s: %w", format.ResyncName, err)
		}
	}
	path := filepath.Join(s.dir, format.ResyncName)
	// O_TRUNC: over a partial marker, the full one (a torn write reads
	// as a full marker too).
	f, err := regfile.OpenOwn(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err == nil {
		_, err = f.WriteString("an msync of a filter file or a catalog commit failed: the next Open rebuilds every page from the disk and the WAL before trusting them\n")
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
