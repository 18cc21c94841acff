package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
)

// PageError reports a data page of a filter file that does not match the
// checksum its last checkpoint stored: a flipped bit, a zeroed block, a
// page the disk lost. It wraps ErrCorrupt.
type PageError struct {
	Filter string
	Layer  int
	// File is the layer file's path relative to the store directory.
	File string
	// Page is the data page's index; Offset is its byte offset in the file.
	Page   uint64
	Offset int64
	// Stored is the checksum in the file, Computed that of the page now.
	Stored, Computed uint32
}

func (e *PageError) Error() string {
	return fmt.Sprintf("store: filter %q layer %d: %s data page %d (offset %d): checksum mismatch: stored %08x, computed %08x: %v",
		e.Filter, e.Layer, e.File, e.Page, e.Offset, e.Stored, e.Computed, ErrCorrupt)
}

// Unwrap returns ErrCorrupt.
func (e *PageError) Unwrap() error { return ErrCorrupt }

// CheckReport is what Check found.
type CheckReport struct {
	// Filters and Layers count the filters and layer files checked.
	Filters, Layers int
	// Pages counts the data pages that matched their checksums.
	Pages uint64
	// Changed counts pages not verified because they legitimately
	// differ from their checksums: changed since the last checkpoint (a
	// writer store), or by a WAL record after it (a read-only store), or
	// a page of a Bloom filter (or of a filter whose Load was cut short)
	// in a store whose last writer died, until its next clean Close.
	Changed uint64
	// Unsettled counts, in a read-only store beside a running writer (or
	// one that ran since the store opened, or where a dead writer cannot
	// be told from a live one: off Linux), pages that differ from their
	// checksums and from what the WAL read at Open explains: the writer
	// may have changed them since. They are not problems; check again
	// after a clean Close.
	Unsettled uint64
	// NoSums counts layer files of format version 1 or 2, which have no
	// data checksums.
	NoSums int
	// Problems holds a *PageError per mismatching page, an error per
	// layer whose every page and checksum are zero though its last
	// checkpoint counted items, and the error of every broken filter,
	// each wrapping ErrCorrupt; and an error per layer whose mapping
	// faulted on a read, which ends that layer's check: wrapping
	// ErrCorrupt for a file truncated (or removed) while mapped, else the
	// disk's read error (syscall.EIO).
	Problems []error
}

// Check verifies every data page of every filter against the checksum the
// last checkpoint stored for it, as bbolt's Tx.Check verifies its pages,
// and reports broken filters. It reads every page (the filters' full
// size) and runs beside lookups and changes, which it does not block,
// except for an instant per mismatching page, to tell a change in flight
// from damage. A page changed since the last checkpoint is counted, not
// verified, as is one that mismatches while a Load of its filter runs (a
// Load marks the pages it wrote only when it ends); in a read-only store,
// so is one a WAL record after the checkpoint explains, and one that
// mismatches while a writer has the store open (Unsettled: the writer's
// marker is looked for again at a mismatch, for a writer that opened
// during the Check). A read-only store tells a writer that died from a
// running one by the session marker's lock (Linux): if the writer was
// dead when the store opened and none has run since (the marker, the WAL
// and the catalog are as they were; see deadwriter.go), a mismatching cuckoo, counting or
// bitmap page is a problem, as in the store the next writer recovers,
// and a Bloom page counts as changed.
//
// The error is nil if it found no problem, else it joins the problems
// (errors.Is(err, ErrCorrupt) holds unless each is a read error);
// ErrClosed if the store is closed.
func (s *Store) Check() (*CheckReport, error) {
	if err := s.nilErr(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("store: check: %w", ErrClosed)
	}
	s.mu.Lock()
	hs := make([]handle, 0, len(s.filters))
	for _, h := range s.filters {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	return s.check(hs)
}

// CheckFilter is Check for the filter named name alone: its cost follows
// that filter's size, not the store's. A name no filter could have is
// ErrInvalid, as for Bloom, Drop and the other calls that take a name; a
// missing name is ErrNotFound.
func (s *Store) CheckFilter(name string) (*CheckReport, error) {
	if err := s.nilErr(); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("store: check: %w", ErrClosed)
	}
	s.mu.Lock()
	h, ok := s.filters[name]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("store: check %q: %w", name, ErrNotFound)
	}
	return s.check([]handle{h})
}

// check is Check of the filters hs.
func (s *Store) check(hs []handle) (*CheckReport, error) {
	rep := &CheckReport{}
	writer := roWriter{cat: &catalogIDs{}}
	if s.opts.ReadOnly {
		writer = s.roWriterNow(writer)
	}
	for _, h := range hs {
		b := h.base()
		if b.dropped.Load() {
			continue
		}
		rep.Filters++
		if b.broken != nil {
			rep.Problems = append(rep.Problems, b.broken)
			continue
		}
		b.mu.Lock()
		regions := append([]mmapbits.Region(nil), b.regions...)
		b.mu.Unlock()
		for layer, r := range regions {
			rep.Layers++
			if err := s.checkLayer(b, layer, r, &writer, rep); err != nil {
				return rep, err
			}
		}
	}
	if s.closed.Load() {
		return rep, fmt.Errorf("store: check: %w", ErrClosed)
	}
	return rep, errors.Join(rep.Problems...)
}

// checkLayer verifies one layer file's data pages into rep.
// *writer is what a read-only store knows of the writer (roWriter);
// checkLayer updates it at a mismatch, for a writer that opened since.
func (s *Store) checkLayer(b *filterBase, layer int, r mmapbits.Region, writer *roWriter, rep *CheckReport) error {
	h := r.Header()
	// Pages that matched their checksums, and of them those that sum to
	// 0: a zeroed page (PageSum) matches a zeroed checksum.
	var matched, zero uint64
	defer func() {
		if matched == 0 || matched != h.DataPages || zero != matched {
			return
		}
		// Every page is zero and matched, unchanged since the checkpoint:
		// if the checkpoint counted items, the data and its checksums were
		// zeroed together (a hole punched, blocks lost).
		if items, ok := s.zeroedItems(b, layer, r, writer); ok && items > 0 {
			rep.Problems = append(rep.Problems, fmt.Errorf("store: filter %q layer %d (%s): %w: the last checkpoint counted %d items, but every data page is zero and so is every checksum: the data and its checksums were zeroed",
				b.name(), layer, filepath.Join(format.FiltersName, format.LayerName(b.id, layer)), ErrCorrupt, items))
		}
	}()
	file := filepath.Join(format.FiltersName, format.LayerName(b.id, layer))
	// A page that faults (the file truncated by another process, or a
	// disk read error) ends the layer's check with a problem naming it.
	faulted := func(p uint64, err error) error {
		rep.Problems = append(rep.Problems, fmt.Errorf("store: filter %q layer %d (%s): checking page %d: %w", b.name(), layer, file, p, err))
		matched = 0 // no zeroed-items verdict on a partial check
		return nil
	}
	checkPage := func(p uint64) (c mmapbits.PageCheck, err error) {
		err = readMapped(b.path(layer), h, r.Words(), func() { c = r.CheckPage(p) })
		return c, err
	}
	for p := range h.DataPages {
		if beforeCheckPage != nil {
			beforeCheckPage(b, layer, p)
		}
		c, err := checkPage(p)
		if err != nil {
			return faulted(p, err)
		}
		switch {
		case !c.HasSum:
			if s.closed.Load() || b.dropped.Load() {
				return nil
			}
			rep.NoSums++
			return nil
		case c.Stale || b.ro.changed(layer, p):
			rep.Changed++
			continue
		case c.Stored == c.Computed:
			rep.Pages++
			matched++
			if c.Computed == 0 {
				zero++
			}
			continue
		}
		if !s.opts.ReadOnly {
			// A writer may be between its write and its Touch, and a
			// Load touches the pages it wrote only when it ends: look
			// again with every change out.
			s.gate.Lock()
			closed := s.closed.Load() || b.dropped.Load()
			loading := false
			var err error
			if !closed {
				c, err = checkPage(p)
				b.mu.Lock()
				loading = b.loading != nil
				b.mu.Unlock()
			}
			s.gate.Unlock()
			if closed {
				return nil
			}
			if err != nil {
				return faulted(p, err)
			}
			if c.Stale || c.Stored == c.Computed || loading {
				rep.Changed++
				continue
			}
		} else if !writer.mayChange {
			// A writer may have opened the store since Check looked for
			// its marker, and changed the page: read it again, then look
			// for the marker again. (A writer that closed meanwhile
			// stored the page's new checksum before it removed the
			// marker; one that ran and died changed the WAL or the
			// catalog.)
			var err error
			if c, err = checkPage(p); err != nil {
				return faulted(p, err)
			}
			if c.Stale || c.Stored == c.Computed {
				rep.Changed++
				continue
			}
			*writer = s.roWriterNow(*writer)
		}
		if s.opts.ReadOnly && writer.mayChange {
			rep.Unsettled++
			continue
		}
		if s.opts.ReadOnly && writer.dead && (b.kind == mmapbits.KindBloom || b.incomplete.Load()) {
			// The writer died before this store opened, and none has run
			// since: a Bloom page may hold the bits of an add whose
			// record never reached the WAL, an incomplete Load's page
			// any words, as the next writer's recovery assumes.
			rep.Changed++
			continue
		}
		if s.opts.ReadOnly && writer.cat.dropped(s, b) {
			// A writer dropped the filter (or renamed another over it)
			// since this store opened, after changing pages whose
			// checksums it then had no reason to store: its files are
			// gone, mapped here still.
			rep.Changed++
			continue
		}
		rep.Problems = append(rep.Problems, &PageError{
			Filter: b.name(), Layer: layer, File: file,
			Page: p, Offset: mmapbits.HeaderSize + int64(p)*mmapbits.PageSize, Stored: c.Stored, Computed: c.Computed})
	}
	return nil
}

// roWriter is what a read-only store's Check knows of the writer.
type roWriter struct {
	// mayChange: a writer may have changed pages since the store opened
	// (the session marker is there: a writer is running, or one ran
	// since and died). A mismatch is Unsettled.
	mayChange bool
	// dead: the marker is there, but the writer was dead when the store
	// began to open and none has run since (see deadWriter). A
	// mismatching cuckoo, counting or bitmap page that no WAL record
	// read at Open explains is damage; a Bloom page, or one of a filter
	// whose Load the death cut short, counts as changed.
	dead bool
	// cat is what the catalog, read at a mismatch, names (shared by
	// the copies roWriterNow makes).
	cat *catalogIDs
}

// catalogIDs is the set of filter ids a read-only store's Check found in
// the catalog, with the catalog file as it was when it read them: read
// again only when the file changed, not at every mismatching page (a
// damaged layer can have thousands).
type catalogIDs struct {
	file fs.FileInfo
	st   *catalog.State
	ids  map[uint64]bool
}

// catalogLoaded, if set (by tests), runs at each catalog load of a
// catalogIDs.
var catalogLoaded func()

// load returns the catalog as it is now, read again only when its file
// changed since the last load (a Check of thousands of filters reads it
// once, not once per layer), or nil if it cannot be read or is another
// store's.
func (c *catalogIDs) load(s *Store) *catalog.State {
	fi, err := os.Lstat(s.cat.Path)
	if err != nil {
		return nil
	}
	if c.file == nil || !sameFileState(fi, c.file) {
		c.file, c.st, c.ids = nil, nil, nil
		if catalogLoaded != nil {
			catalogLoaded()
		}
		st, err := s.cat.Load()
		if err != nil || st.StoreID != s.id {
			return nil
		}
		c.ids = make(map[uint64]bool, len(st.Filters))
		for _, m := range st.Filters {
			c.ids[m.ID] = true
		}
		c.file, c.st = fi, st
	}
	return c.st
}

// dropped reports whether the catalog as it is now no longer names
// filter b (ids are never reused; a Rename keeps them): a writer dropped
// it since the store opened. A catalog that cannot be read, or is
// another store's, drops nothing.
func (c *catalogIDs) dropped(s *Store, b *filterBase) bool {
	if c.load(s) == nil {
		return false
	}
	return !c.ids[b.id]
}

// roWriterNow returns what a read-only store knows of the writer now.
func (s *Store) roWriterNow(w roWriter) roWriter {
	switch {
	case !writerActive(s.dir):
		return roWriter{cat: w.cat}
	case s.stillDead(s.roDead):
		return roWriter{dead: true, cat: w.cat}
	}
	return roWriter{mayChange: true, cat: w.cat}
}

// beforeCheckPage, if not nil, runs before Check reads a page: a test
// seam, for changes racing a Check.
var beforeCheckPage func(b *filterBase, layer int, page uint64)

// zeroedItems returns the item count the last checkpoint recorded for a
// layer whose every data page Check found zero and matching its (zero)
// checksum, and ok false if it cannot tell that count apart from a
// change racing Check. A writer store holds the gate, as checkpoints do
// from their checksums to their catalog commit, and checks again that
// every page is zero, matched and unchanged; a read-only store reads the
// catalog as it is now (its own metadata is as of Open, and the writer
// may have emptied the filter and checkpointed since), unless a writer
// has the store open.
func (s *Store) zeroedItems(b *filterBase, layer int, r mmapbits.Region, writer *roWriter) (items uint64, ok bool) {
	if s.opts.ReadOnly {
		if writer.mayChange {
			return 0, false
		}
		st := writer.cat.load(s)
		if st == nil {
			return 0, false
		}
		m := st.Filters[b.name()]
		if m == nil || m.ID != b.id || layer >= len(m.Layers) {
			return 0, false
		}
		if m.Layers[layer].Items == 0 {
			return 0, true
		}
		// About to report damage: from the catalog as it is now, not
		// the cached copy, which a writer's commit that left the file's
		// size and (coarse) mtime as they were would not have refreshed.
		if st, err := s.cat.Load(); err != nil || st.StoreID != s.id {
			return 0, false
		} else if m = st.Filters[b.name()]; m == nil || m.ID != b.id || layer >= len(m.Layers) {
			return 0, false
		}
		return m.Layers[layer].Items, true
	}
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.closed.Load() || b.dropped.Load() {
		return 0, false
	}
	for p := range r.Header().DataPages {
		if c := r.CheckPage(p); !c.HasSum || c.Stale || c.Stored != c.Computed || c.Computed != 0 {
			return 0, false
		}
	}
	if s.failed() != nil {
		// A checkpoint that failed after it updated the checksums (a
		// failed msync) left its count behind them: an item deleted
		// since the last checkpoint that recorded one, its page now zero
		// and matching, is no damage. (Nor do the live counts tell: in
		// a failed store they count changes still staged.)
		return 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if layer >= len(b.meta.Layers) {
		return 0, false
	}
	return b.meta.Layers[layer].Items, true
}

// changed reports whether a WAL record after the checkpoint, read at a
// read-only Open, changed data page p of layer (the file may then hold
// it, so the checksum may not match). A nil overlay changed nothing.
func (o *roOverlay) changed(layer int, p uint64) bool {
	if o == nil {
		return false
	}
	_, ok := o.pages[wkey{layer, p}]
	return ok
}

// notePages records the data pages a WAL record changes (see changed).
func (o *roOverlay) notePages(h handle, r format.WALRecord) {
	if o.pages == nil {
		o.pages = make(map[wkey]struct{})
	}
	if r.Op == format.WALOpHash {
		if f, ok := h.(*Bloom); ok {
			if layers := *f.layers.Load(); r.Layer < len(layers) {
				block := layers[r.Layer].Block(r.Hash)
				o.pages[wkey{r.Layer, block * bloom.BlockWords / mmapbits.WordsPerPage}] = struct{}{}
			}
		}
		return
	}
	for _, w := range r.Writes {
		o.pages[wkey{r.Layer, w.Index / mmapbits.WordsPerPage}] = struct{}{}
	}
}
