package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// A read-only store never writes and takes no writer lock, so it can run
// beside a live writer (another process, or cmd/inspect). It maps every
// layer file read-only and shared, so its lookups read the files as they
// are, the writer's later changes included, and keeps what the WAL records
// after each filter's checkpoint say in an in-memory roOverlay built at
// Open: the bits Bloom adds set, and the last after-image of every word
// the other kinds' records wrote.
//
// A word no record after the checkpoint wrote before Open holds, in the
// live file, its checkpoint value plus the writer's later changes; a word
// some record wrote is read from the overlay, as it was at Open. That view
// is exact as of Open for counting filters and bitmaps (a counter or bit
// never moves to another word), and never misses an item acknowledged
// before Open: its change is either in the overlay or, with its record at
// or below the checkpoint, in the synced file. (A change the writer has
// logged but not yet applied — SyncInterval applies after the background
// fsync, and a power loss undoes pages until the next writer recovers — is
// in the overlay.)
//
// Cuckoo entries move between buckets, so an entry acknowledged before
// Open may leave a word the overlay shows for one it does not; a cuckoo
// lookup answers "present" if either the overlay view or the live files
// say so. A change acknowledged before Open is either applied in the live
// file (moved or removed only by later changes), or not applied yet — then
// its record and every later one are in the overlay, and the bucket it
// sits in at Open is an overlay word. Moves in the live files are
// bracketed by the move-sequence word in each file's header page, which
// the reader shares with the writer, so a live read never misses an entry
// in flight. Bloom adds only set bits: a lookup is present if its bits
// are set in a layer's live file with the overlay's bits ORed in. (Bits,
// not the added hashes: an add that found every bit of its key set by
// others logs nothing, yet is acknowledged, and after a power loss those
// bits may be in no file, only in the records of the keys that set them.)
//
// Open reads the catalog, maps the files, then scans the WAL. A writer
// may drop a filter or checkpoint meanwhile: a layer file that vanished
// belongs to a filter the catalog, read again, no longer has (it is left
// out; if another filter has its name now — a Rename over it — Open
// starts over); WAL segments that vanished, or a WAL that starts after
// what a filter needs while the catalog moved on, mean a checkpoint ran,
// and Open starts over. So does a Load that ended meanwhile (its
// checkpoint keeps the segments): a filter the snapshot has incomplete
// that the catalog, read again, has complete (loadEnded). Records of
// layers or filters newer than the catalog read are ignored: they were
// acknowledged after Open began.

// roOverlay is a read-only filter's view of the WAL records after its
// checkpoint.
//
// Open gathers the records in maps (bits, words); once it has read the
// WAL, setViews freezes them, per layer, into what lookups read (blocks,
// views): values in slices numbered by a sparseIndex, and drops the maps.
type roOverlay struct {
	bits  bloomBits         // Bloom: the bits logged adds set (until setViews)
	words map[wkey]uint64   // other kinds: the last after-image of each word (until setViews)
	pages map[wkey]struct{} // data pages the records change (layer, page), for Check
	// blocks (Bloom) and views (other kinds), per layer, are set by
	// setViews.
	blocks []roBlocks
	views  []roView
}

// roBlocks is a Bloom layer's noted bits, frozen: bits[n] for the block
// idx numbers n.
type roBlocks struct {
	idx  sparseIndex
	bits [][bloom.BlockWords]uint64
}

// has reports whether every bit of h is set in l's live words with the
// bits noted for its block ORed in, for an h the live words alone missed:
// false at once where no bit of h's block is noted.
func (x *roBlocks) has(l *bloom.Filter, h uint64) bool {
	n, ok := x.idx.find(l.Block(h))
	if !ok {
		return false
	}
	var buf [bloom.MaxK]uint16
	block, pos := l.Geometry().Locate(h, buf[:0])
	return blockHas(l, block, pos, &x.bits[n])
}

// bloomHas reports whether every bit of h is set, in some layer, in the
// live words with the bits logged adds set ORed in. The caller has found
// h in no layer's live words: a layer with no bit noted in h's block is
// not read again.
func (o *roOverlay) bloomHas(layers []*bloom.Filter, h uint64) bool {
	for i, x := range o.blocks[:min(len(o.blocks), len(layers))] {
		if x.has(layers[i], h) {
			return true
		}
	}
	return false
}

// view returns layer's words as the overlay says they were at Open. It is
// a pointer, kept in o, so that passing it as Words allocates nothing.
func (o *roOverlay) view(layer int) *roView { return &o.views[layer] }

// setViews freezes the overlay for the filter's layers (mapped, as a
// read-only store's are, once for good): what the maps noted per layer
// goes into blocks and views, and the maps go.
func (o *roOverlay) setViews(regions []mmapbits.Region) {
	o.blocks = make([]roBlocks, len(regions))
	o.views = make([]roView, len(regions))
	blocks := make([][]uint64, len(regions))
	for k := range o.bits {
		if k.layer < len(regions) {
			blocks[k.layer] = append(blocks[k.layer], k.idx)
		}
	}
	words := make([][]uint64, len(regions))
	for k := range o.words {
		if k.layer < len(regions) {
			words[k.layer] = append(words[k.layer], k.idx)
		}
	}
	for i, r := range regions {
		slices.Sort(blocks[i])
		x := roBlocks{idx: newSparseIndex(blocks[i]), bits: make([][bloom.BlockWords]uint64, len(blocks[i]))}
		for n, b := range blocks[i] {
			x.bits[n] = o.bits[wkey{i, b}]
		}
		o.blocks[i] = x
		slices.Sort(words[i])
		v := roView{idx: newSparseIndex(words[i]), vals: make([]uint64, len(words[i])), words: r.Words()}
		v.dense = 4*len(v.vals) >= len(v.words)
		for n, w := range words[i] {
			v.vals[n] = o.words[wkey{i, w}]
		}
		o.views[i] = v
	}
	o.bits, o.words = nil, nil
}

// roView is a layer's words with the overlay's after-images on top:
// vals[n] for the word idx numbers n.
type roView struct {
	idx   sparseIndex
	vals  []uint64
	words []uint64
	dense bool // vals covers a quarter of words or more (see notedBlock)
}

func (v *roView) Load(i uint64) uint64 {
	if n, ok := v.idx.find(i); ok {
		return v.vals[n]
	}
	return atomic.LoadUint64(&v.words[i])
}

func (v *roView) Store(uint64, uint64) { panic("store: roView is read-only") }

// notedBlock reports whether the records after the checkpoint changed a
// word of a counting filter's block: if none, a lookup of a key whose
// counters it holds reads what it read in the live words. Where they
// changed a quarter of the layer's words or more, it reports true without
// looking: most blocks hold such a word, and the check would only delay
// the read of the view, which tells the same (with 1e6 records after the
// checkpoint in a filter of 1e7 keys, misses took 178-189 ns with the
// check against 143-150 without, BenchmarkReadOnlyHas).
func (v *roView) notedBlock(block uint64) bool {
	return v.dense || v.idx.anyIn(block*bloom.BlockWords, bloom.BlockWords)
}

// noted reports whether the records after the checkpoint changed word i
// or word j: if neither, a lookup of a key whose buckets they are reads
// what it read in the live words.
func (v *roView) noted(i, j uint64) bool {
	if _, ok := v.idx.find(i); ok {
		return true
	}
	_, ok := v.idx.find(j)
	return ok
}

// roAttempts bounds how often a read-only Open starts over because the
// writer checkpointed while it read.
const roAttempts = 10

// roAfterCatalog, if set (by tests), runs in each read-only open attempt
// right after it read the catalog.
var roAfterCatalog func()

// roAfterNoCatalog, if set (by tests), runs in a read-only open right
// after it found no catalog.
var roAfterNoCatalog func()

// errRetry says a read-only Open saw the writer move and must start over.
var errRetry = errors.New("store: the writer moved meanwhile")

// openReadOnly opens a read-only store (see above).
func (s *Store) openReadOnly() error {
	if _, err := os.Stat(s.cat.Path); err != nil {
		if lst, lerr := os.Lstat(s.cat.Path); errors.Is(err, fs.ErrNotExist) && lerr == nil && lst.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("store: catalog %s: %w: a symbolic link to nothing: %w", s.cat.Path, ErrCorrupt, err)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			// There may be one that cannot be reached (permission
			// denied, a symlink loop): not "not a store".
			return fmt.Errorf("store: %s: cannot read %s: %w", s.dir, format.CatalogName, err)
		}
		if roAfterNoCatalog != nil {
			roAfterNoCatalog()
		}
		// A store that lost its catalog is corrupt, as a writer's Open
		// says, not "not a store".
		if lerr := s.lostCatalog("a read-only open has no filter list"); lerr != nil {
			// Unless a writer made the store meanwhile: it makes the
			// catalog before any WAL segment or filter file, so files
			// found after the catalog was missing, with the catalog
			// there now, are a store made in between (before, such an
			// Open failed with ErrCorrupt, "restore the catalog from a
			// backup", an adversarial review found).
			if _, serr := os.Stat(s.cat.Path); serr != nil {
				return lerr
			}
		} else {
			return fmt.Errorf("store: %s is not a store directory (no %s): %w: %w", s.dir, format.CatalogName, ErrNotFound, err)
		}
	}
	var err error
	for range roAttempts {
		if err = s.tryReadOnly(); !errors.Is(err, errRetry) {
			return err
		}
		s.closeFilters()
		s.filters = make(map[string]handle)
	}
	// The writer's, not the store's: the cause (a checkpoint that
	// removed records this open needed, say) is quoted, not wrapped, so
	// that it does not read as ErrCorrupt.
	return fmt.Errorf("store: %s: %w: the writer checkpointed or renamed during each of %d read-only opens in a row; try again (the last: %v)", s.dir, ErrLocked, roAttempts, err)
}

func (s *Store) tryReadOnly() error {
	// Before the catalog is read: a writer that runs from here on
	// changes the WAL or the catalog (see deadWriter).
	s.roDead = s.deadWriterNow()
	st, err := s.cat.Load()
	if err != nil {
		return err
	}
	if roAfterCatalog != nil {
		roAfterCatalog()
	}
	s.id, s.nextID = st.StoreID, st.NextID
	s.checkpointLSN.Store(st.Checkpoint)
	s.ext.durable = st.External // what ExternalDurable reports: the catalog's, all a reader knows durable
	var vanished []string
	for name, m := range st.Filters {
		h, err := s.openFilter(name, m, s.opts.mapper.OpenRead)
		if err != nil {
			s.closeFilters()
			return err
		}
		if b := h.base(); b.broken != nil && errors.Is(b.broken, fs.ErrNotExist) {
			vanished = append(vanished, name)
		}
		s.filters[name] = h
	}
	if len(vanished) > 0 {
		// Dropped by the writer since the catalog was read? Then it is
		// not part of this snapshot. Replaced by another filter under its
		// name (a Rename over it, or a Drop and a Create)? Then this
		// snapshot would lack a filter that has the name before and
		// after: start over from the new catalog. Otherwise it is broken.
		now, err := s.cat.Load()
		if err != nil {
			s.closeFilters()
			return err
		}
		for _, name := range vanished {
			switch m := now.Filters[name]; {
			case m == nil:
				delete(s.filters, name)
			case m.ID != st.Filters[name].ID:
				return fmt.Errorf("%w: filter %q was replaced", errRetry, name)
			}
		}
	}
	// Each filter's newest layer stamp, read before the WAL: a change a
	// live writer stored in a file by then has its record in the WAL the
	// scan below reads (see newerThanWAL).
	stamps := make(map[string]layerStamp, len(s.filters))
	for name, h := range s.filters {
		if b := h.base(); b.broken == nil {
			stamps[name] = newestStamp(b)
		}
	}
	need, ok := s.replayFrom()
	if !ok {
		// No filter needs records, but the scan still checks that the
		// WAL is this store's.
		need = st.Checkpoint
	}
	byID := make(map[uint64]handle, len(s.filters))
	for _, h := range s.filters {
		byID[h.base().id] = h
	}
	// The marker before the segments: a live writer records a segment
	// there only once the segment exists.
	newest, known, err := s.readSession()
	if err != nil {
		s.closeFilters()
		return err
	}
	first := uint64(0) // LSN of the first record after need
	beyond := make(map[uint64]layerBeyond)
	res, err := wal.Scan(filepath.Join(s.dir, format.WALName), wal.ScanOptions{FS: s.opts.walFS, From: need + 1, StoreID: s.id, Live: true},
		func(pos wal.Position, p []byte) error {
			if first == 0 {
				first = pos.LSN
			}
			return s.overlayRecord(byID, beyond, pos, p)
		})
	if err != nil {
		s.closeFilters()
		return err
	}
	for _, sg := range res.Segments {
		if sg.Vanished {
			return errRetry
		}
	}
	if ok && len(res.Segments) == 0 {
		if err := s.walGone(need); err != nil {
			s.closeFilters()
			return err
		}
	}
	if n := len(res.Segments); known && n > 0 {
		if err := newestLost(newest, res.Segments[n-1].FirstLSN); err != nil {
			s.closeFilters()
			return err
		}
	}
	if res.Next > need+1 && first != need+1 {
		// Records need+1.. are gone: a checkpoint deleted them (then the
		// catalog has moved on: start over), or the WAL lost them. With
		// no record at or after need+1, the WAL starts at its next LSN.
		if first == 0 {
			first = res.Next
		}
		missing := missingRecords(first, need)
		if now, err := s.cat.Load(); err == nil && now.Checkpoint == st.Checkpoint {
			s.closeFilters()
			return missing
		}
		return fmt.Errorf("%w: %w", errRetry, missing)
	}
	if res.Next > 0 {
		s.newerThanWAL(stamps, res.Next-1)
	}
	if err := s.layersBeyond(st, beyond); err != nil {
		s.closeFilters()
		return err
	}
	if err := s.loadEnded(st); err != nil {
		return err
	}
	for _, h := range s.filters {
		if b := h.base(); b.ro != nil {
			b.ro.setViews(b.regions)
			if fr, ok := h.(interface{ setFront() }); ok {
				fr.setFront() // the overlay's front, where there is one
			}
		}
	}
	return nil
}

// loadEnded returns errRetry if a filter that is incomplete in this
// snapshot (a Load was running, or its load record followed the catalog
// read) is complete in the catalog now: the Load ended meanwhile. Its
// checkpoint keeps the WAL's segments (ckptLoad), so nothing else makes
// the open start over, and the filter would answer "maybe" for the read-
// only store's whole life. A filter still incomplete now (an interrupted
// Load, an older catalog put back) costs one catalog read, no retry.
func (s *Store) loadEnded(st *catalog.State) error {
	var incomplete []string
	for name, h := range s.filters {
		if b := h.base(); b.broken == nil && b.incomplete.Load() {
			incomplete = append(incomplete, name)
		}
	}
	if len(incomplete) == 0 {
		return nil
	}
	now, err := s.cat.Load()
	if err != nil || now.Checkpoint == st.Checkpoint {
		return nil // the writer recorded nothing since: this snapshot stands
	}
	for _, name := range incomplete {
		if m := now.Filters[name]; m != nil && m.ID == st.Filters[name].ID && m.State != format.StateLoading {
			return fmt.Errorf("%w: the Load of filter %q ended", errRetry, name)
		}
	}
	return nil
}

// layerBeyond is the first record a read-only Open's scan found for a
// layer its catalog snapshot does not name (see layersBeyond).
type layerBeyond struct {
	lsn   uint64
	layer int
}

// layersBeyond decides about the records for layers the catalog snapshot
// st does not name, by filter id (overlayOp skips them). A writer records
// a new layer in the catalog before it logs a record for it, so the
// catalog read now names the layer if the writer added it after st was
// read: then this snapshot starts over (errRetry), as it does if the
// filter was dropped meanwhile. If the catalog still does not name it,
// the catalog is older than the WAL (a copy put back, or a damaged newest
// bbolt page, which bbolt passes over for the one before): ErrCorrupt, as
// a writer's Open reports, rather than answer "absent" for the keys of
// the layer's acknowledged records.
func (s *Store) layersBeyond(st *catalog.State, beyond map[uint64]layerBeyond) error {
	if len(beyond) == 0 {
		return nil
	}
	now, err := s.cat.Load()
	if err != nil {
		return err
	}
	layers := make(map[uint64]int, len(now.Filters))
	if now.StoreID == st.StoreID {
		for _, m := range now.Filters {
			layers[m.ID] = len(m.Layers)
		}
	}
	for id, lb := range beyond {
		if n, ok := layers[id]; !ok || n > lb.layer {
			return fmt.Errorf("%w: filter id %d has a layer %d or was dropped", errRetry, id, lb.layer)
		}
		name := ""
		for nm, m := range st.Filters {
			if m.ID == id {
				name = nm
			}
		}
		return fmt.Errorf("store: %w: the WAL's record at LSN %d is for layer %d of filter %q, which the catalog (%s) does not name: the catalog is older than the WAL (a copy put back, or a damaged last commit that bbolt passed over); the records of that layer would be lost",
			ErrCorrupt, lb.lsn, lb.layer, name, s.cat.Path)
	}
	return nil
}

// overlayRecord adds one WAL record (each part of a batch record) to its
// filter's roOverlay and counts; a record for a layer the catalog does not
// name goes to beyond instead (see layersBeyond).
func (s *Store) overlayRecord(byID map[uint64]handle, beyond map[uint64]layerBeyond, pos wal.Position, p []byte) error {
	rec, err := format.DecodeWALRecord(p)
	if err != nil {
		return fmt.Errorf("store: wal segment %s offset %d (LSN %d): %w", pos.Segment, pos.Offset, pos.LSN, err)
	}
	for r := range rec.Ops() {
		if err := s.overlayOp(byID, beyond, pos, r); err != nil {
			return err
		}
	}
	return nil
}

// overlayOp adds one single-filter record r, at pos, to its filter's
// roOverlay and counts; a load record after the filter's checkpoint
// marks the filter incomplete instead.
func (s *Store) overlayOp(byID map[uint64]handle, beyond map[uint64]layerBeyond, pos wal.Position, r format.WALRecord) error {
	h, ok := byID[r.FilterID]
	if !ok {
		return nil // dropped, or created after the catalog was read
	}
	b := h.base()
	if r.Op == format.WALOpLoad && b.broken == nil && pos.LSN > b.meta.SyncedLSN {
		// A Load began, or an external op was skipped, after the
		// catalog entry read: the filter is incomplete, as the writer's
		// Open makes it.
		b.incomplete.Store(true)
		b.off.Store(true)
		return nil
	}
	if b.broken != nil || pos.LSN <= b.meta.SyncedLSN {
		return nil // nothing to read, or already in the files
	}
	if r.Layer >= len(b.meta.Layers) {
		// A layer added since the catalog was read, or a catalog older
		// than the WAL: layersBeyond tells which once the scan is done.
		if _, seen := beyond[b.id]; !seen {
			beyond[b.id] = layerBeyond{lsn: pos.LSN, layer: r.Layer}
		}
		return nil
	}
	if err := b.meta.CheckRecord(r); err != nil {
		return fmt.Errorf("store: wal segment %s offset %d (LSN %d): %w", pos.Segment, pos.Offset, pos.LSN, err)
	}
	if b.ro == nil {
		b.ro = &roOverlay{}
		if fr, ok := h.(interface{ setFront() }); ok {
			fr.setFront() // the slow front, which reads the overlay
		}
	}
	if bf, ok := h.(*Bloom); ok && r.Op == format.WALOpHash {
		if b.ro.bits == nil {
			b.ro.bits = make(bloomBits)
		}
		b.ro.bits.add(r.Layer, (*bf.layers.Load())[r.Layer].Geometry(), r.Hash)
	} else {
		if b.ro.words == nil {
			b.ro.words = make(map[wkey]uint64)
		}
		for _, w := range r.Writes {
			b.ro.words[wkey{r.Layer, w.Index}] = w.Value
		}
	}
	b.ro.notePages(h, r)
	h.count(r)
	return nil
}

// layerStamp is the newest stamp of a filter's layer files, and the
// layer that has it.
type layerStamp struct {
	stamp uint64
	layer int
}

// newestStamp returns b's newest layer stamp.
func newestStamp(b *filterBase) layerStamp {
	var ls layerStamp
	for i, r := range b.regions {
		if st := r.Stamp(); st > ls.stamp {
			ls = layerStamp{st, i}
		}
	}
	return ls
}

// newerThanWAL opens broken, read-only, every filter whose stamp (read
// before the WAL was) is past end, the WAL's last record, where the WAL
// holds records past the filter's checkpoint: the writer's Open breaks it
// so (breakNewerThanWAL), and the overlay would put the older
// after-images over the file's newer words, as replaying them would (an
// adversarial review: a store whose WAL lost its last records read 4
// bitmap bits, 49 counting and 48 cuckoo keys absent read-only, and
// inspect's ls, info and check said "needs recovery", exit 0, where the
// writer's Open then found the filters broken).
func (s *Store) newerThanWAL(stamps map[string]layerStamp, end uint64) {
	for name, ls := range stamps {
		h := s.filters[name]
		if h == nil {
			continue
		}
		b := h.base()
		if b.broken != nil || end <= b.meta.SyncedLSN || ls.stamp <= end {
			continue
		}
		b.ro = nil
		s.filters[name] = s.breakOpen(b, ls.layer, newerThanWALError(ls.stamp, end))
	}
}
