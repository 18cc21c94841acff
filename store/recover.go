package store

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/cuckoo"
	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/internal/regfile"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// recover opens the catalog (creating one only in a directory with no
// filter file and no WAL segment), maps every filter, opens the WAL —
// which validates every segment and, through CheckRecord, every record
// against the catalog before anything is changed — and only then changes
// things: it removes orphan files it can prove are this store's, replays
// the WAL after each filter's checkpoint, and makes every filter file
// durable. It runs before the store is shared.
func (s *Store) recover() error {
	// After a failed msync or catalog commit, what the cache holds of the
	// catalog may not be on the disk: drop it before bbolt maps it.
	if err := s.evictCatalogForResync(); err != nil {
		return err
	}
	st, err := s.openCatalog()
	if err != nil {
		return err
	}
	// From here on, a catalog replaced from outside is found at the next
	// catalog change, which then fails instead of writing to it.
	if st.Checkpoint > wal.MaxLSN {
		return fmt.Errorf("store: %s: %w: its checkpoint is at LSN %d, beyond the last a WAL can hold (%d)", s.cat.Path, ErrCorrupt, st.Checkpoint, uint64(wal.MaxLSN))
	}
	if st.External > maxExtSeq {
		return fmt.Errorf("store: %s: %w: its external seq is %d, beyond the last a record can carry (%d)", s.cat.Path, ErrCorrupt, st.External, uint64(maxExtSeq))
	}
	s.cat.Own(st)
	s.nextID = st.NextID
	s.checkpointLSN.Store(st.Checkpoint)
	s.ext.init(st.External)
	upgrade := st.StoreID == 0 // a format 1 catalog: no identity yet
	if s.id = st.StoreID; upgrade {
		if s.id, err = catalog.NewStoreID(); err != nil {
			return err
		}
	}
	// The markers this Open writes or removes must be files of their own
	// (startSession, syncFilters refuse links): refused here, before
	// wal.Open repairs the WAL's tail, a failed Open changes no file.
	for _, name := range []string{sessionFile, format.ResyncName} {
		if err := regfile.CheckOwn(filepath.Join(s.dir, name)); err != nil {
			return fmt.Errorf("store: open: %w", err)
		}
	}
	// And this process must be allowed to write them, the catalog and the
	// WAL, before the first change: the resync marker that the session
	// marker may ask for, just below.
	if err := s.checkWritable(); err != nil {
		return err
	}
	// After a failed msync, what the cache holds of the filter files is
	// not what a write of it would make durable: drop it before mapping.
	if err := s.evictForResync(st); err != nil {
		return err
	}
	for name, m := range st.Filters {
		h, err := s.openFilter(name, m, s.opts.mapper.Open)
		if err != nil {
			return err
		}
		s.addFilter(name, h)
	}
	orphans, err := s.planOrphans(st)
	if err != nil {
		return err
	}
	need, ok := s.replayFrom()
	loads := map[uint64]uint64{} // filled by the record checker: see replayWAL
	if len(orphans) > 0 {
		// Removing them writes filters/.
		if err := checkDirWritable(filepath.Join(s.dir, format.FiltersName)); err != nil {
			return err
		}
	}
	newest, known, err := s.readSession()
	if err != nil {
		return err
	}
	first, last, found, err := s.walSegmentRange()
	if err != nil {
		return err
	} else if ok && found && first > need+1 {
		return missingRecords(first, need)
	} else if ok && !found {
		if err := s.walGone(need); err != nil {
			return err
		}
	}
	if known && found {
		if err := newestLost(newest, last); err != nil {
			return err
		}
	}
	// A format 1 catalog gets its store id below (SetStoreID), after
	// every check. Until then no file may carry the id: if that commit
	// fails, the next Open draws another, and a WAL segment this one
	// started with the first would then be another store's. So the
	// segments of the Open that upgrades carry none (0, as a format 1
	// store's do), and every later Open's carry the id.
	walID := s.id
	if upgrade {
		walID = 0
	}
	s.log, err = wal.Open(filepath.Join(s.dir, format.WALName), wal.Options{
		FS: s.opts.walFS, SegmentSize: s.opts.SegmentSize, SyncEvery: s.opts.SyncEvery,
		Sync: s.opts.Sync, Logger: s.opts.Logger, OnSync: s.onSync, OnSegment: s.onSegment,
		StoreID: walID, Check: s.recordChecker(st, loads),
	})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !found {
		// A WAL that held no segment (a new store, or one lost after a
		// clean Close: walGone let it through) starts after the
		// checkpoint now, before the session marker exists: restarting
		// it removes segments before it makes the new one, and a crash
		// or a failed create in between, with the marker there, would
		// look to the next Open like a WAL lost after a crash.
		if err := s.log.SetNextLSN(st.Checkpoint + 1); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	s.breakNewerThanWAL()

	// Everything checked out (and wal.Open, which changes nothing before
	// its own checks pass, repaired the WAL): from here on Open changes
	// files. The directory entries (catalog, filters/, wal/, this
	// directory) are synced on every Open, not only by the Open that made
	// them: one that died before its syncs must not leave them undone.
	// The session marker rides on the same sync.
	crashed, err := s.startSession()
	if err != nil {
		return err
	}
	s.deadWriter = crashed
	if crashed {
		// The last writer died. A Bloom filter's pages may hold bits no
		// record or checksum covers (an add whose record never reached
		// the WAL), and an incomplete Load's any words: their checksums
		// stay unknown until a clean Close recomputes them all. A
		// cuckoo, counting or bitmap page changes only once a record of
		// the change is durable, and replaying the records after the
		// checkpoint marks every page they cover stale: any other page
		// must still match its checksum, so it keeps it, and damage
		// there stays a mismatch Check reports, not one the next Close
		// recomputes away.
		for _, h := range s.filters {
			if b := h.base(); b.broken == nil && (b.kind == mmapbits.KindBloom || b.incomplete.Load()) {
				for _, r := range b.regions {
					r.InvalidateSums()
				}
			}
		}
	}
	for _, d := range []string{filepath.Dir(filepath.Clean(s.dir)), s.dir} {
		if err := s.dirSync(d); err != nil {
			return fmt.Errorf("store: open: sync %s: %w", d, err)
		}
	}
	if upgrade {
		if err := s.cat.SetStoreID(s.id); err != nil {
			if !catalogUntouched(err) {
				// As catalogFailed: the next Open reads the catalog
				// from the disk (the session marker is open here).
				s.markResyncAfterCatalog()
			}
			return fmt.Errorf("store: open: upgrading the catalog: %w", err)
		}
	}
	if err := s.removeOrphans(orphans); err != nil {
		return err
	}
	if replayHook != nil {
		replayHook(s)
	}
	// From here Open writes the mappings: a fault (a page the disk cannot
	// read, a file truncated by another process since Open checked it)
	// fails Open naming the file (guardOpen), where it killed the process.
	if err := s.guardOpen(func() error { s.lowerStamps(st.Checkpoint); return nil }); err != nil {
		return err
	}
	// The records to replay may read back from the page cache without
	// being on disk (a writer whose fdatasync of them failed): replayed,
	// synced into the filters and lost with the power, they would leave
	// changes no record explains. Write them again first.
	if err := s.log.RewriteInherited(need); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	var n int
	if err := s.guardOpen(func() (err error) {
		// Cuckoo layers' move counters stay odd for the whole replay
		// (see Cuckoo.replay), then even: readers in other processes
		// retry, or answer "maybe", meanwhile. (A writer that died
		// mid-move may have left one odd already; the counters only move
		// forward.)
		var seqs []*uint64
		for _, h := range s.filters {
			if b := h.base(); b.broken == nil && b.kind == mmapbits.KindCuckoo {
				for _, r := range b.regions {
					seq := r.Seq()
					if atomic.LoadUint64(seq)&1 == 0 {
						atomic.AddUint64(seq, 1)
					}
					seqs = append(seqs, seq)
				}
			}
		}
		n, err = s.replayWAL(need, loads)
		for _, seq := range seqs {
			atomic.AddUint64(seq, 1)
		}
		return err
	}); err != nil {
		return err
	}
	// The files may hold changes a killed writer made in memory and the
	// kernel has not written yet (the bits of an add whose record never
	// reached the WAL): answers will rest on them, so they must be on disk
	// first. With nothing dirty this costs a few syscalls, not a read of
	// the filter.
	if err := s.syncFilters(); err != nil {
		return err
	}
	if err := s.log.SetNextLSN(st.Checkpoint + 1); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if n > 0 {
		s.opts.Logger.Info("recovered", "records", n, "from_lsn", need+1)
		return s.checkpointLocked(ckptPlain)
	}
	return nil
}

// openCatalog loads the catalog, or creates one for a new store. It never
// creates a catalog where filter files or WAL segments exist: a lost
// catalog must be restored, not replaced.
func (s *Store) openCatalog() (*catalog.State, error) {
	st, err := s.cat.Load()
	if err == nil && s.catalogNotEvicted {
		return nil, fmt.Errorf("store: open: an earlier msync or catalog commit failed, and %s was missing when this Open would have dropped its pages from the cache, but is there now: open again (%s stays until then)", format.CatalogName, format.ResyncName)
	}
	if err == nil {
		return st, nil
	}
	if !errors.Is(err, catalog.ErrNoCatalog) {
		return nil, err
	}
	if err := s.lostCatalog("refusing to start a new store over them"); err != nil {
		return nil, err
	}
	id, err := catalog.NewStoreID()
	if err != nil {
		return nil, err
	}
	if err := s.cat.Create(id); err != nil {
		return nil, err
	}
	return s.cat.Load()
}

// lostCatalog returns an error wrapping ErrCorrupt, saying what (doing)
// and what it found, if the directory, whose catalog is missing, holds
// filter files or WAL segments: a store whose catalog was lost, not a new
// one. It returns nil if it holds neither.
func (s *Store) lostCatalog(doing string) error {
	var found []string
	if names, err := s.opts.mapper.List(filepath.Join(s.dir, format.FiltersName)); err != nil {
		return err
	} else if len(names) > 0 {
		found = append(found, fmt.Sprintf("%d files in %s/", len(names), format.FiltersName))
	}
	res, err := wal.Scan(filepath.Join(s.dir, format.WALName), wal.ScanOptions{FS: s.opts.walFS, KeepGoing: true}, nil)
	if err != nil && !errors.Is(err, wal.ErrCorrupt) {
		return fmt.Errorf("store: %w", err)
	}
	if res != nil && len(res.Segments) > 0 {
		found = append(found, fmt.Sprintf("%d WAL segments in %s/", len(res.Segments), format.WALName))
	}
	if len(found) > 0 {
		return fmt.Errorf("store: %s: %w: %s is missing but the directory holds %v: %s (restore the catalog from a backup)",
			s.dir, ErrCorrupt, format.CatalogName, found, doing)
	}
	return nil
}

// missingRecords is the error of a WAL that starts at LSN first while
// the filters need it from need+1: the catalog is older than the WAL (a
// copy put back, one from before a Load too: see filterBase.start), or
// segments were removed.
func missingRecords(first, need uint64) error {
	return fmt.Errorf("store: %w: WAL starts at LSN %d but filters need it from LSN %d: records %d..%d are missing (is %s older than the WAL, put back from a copy? or were WAL segments removed?)",
		ErrCorrupt, first, need+1, need+1, first-1, format.CatalogName)
}

// walGone returns an error wrapping ErrCorrupt if the WAL holds no
// segment while the session marker says the last writer did not close:
// a writer always leaves a segment once the marker is there (wal.Open
// makes one, recover restarts an empty WAL before it writes the marker,
// and a checkpoint never removes the last), so its records after need
// (the LSN every filter is synced through) were deleted. After a
// clean Close the WAL holds nothing the filters need, and an empty or
// missing wal/ loses nothing: walGone returns nil.
func (s *Store) walGone(need uint64) error {
	if !writerActive(s.dir) {
		return nil
	}
	return fmt.Errorf("store: %s: %w: %s/ holds no segment, but %s is there (the last writer did not close, or one is running): whatever it logged after LSN %d is lost; restore %s/ from a backup or from where it was moved (removing %s opens the store without those records, and Check then reports the pages the dead writer changed as checksum mismatches until the filter is rebuilt)",
		s.dir, ErrCorrupt, format.WALName, sessionFile, need, format.WALName, sessionFile)
}

// walSegmentRange returns the first LSNs of the WAL's oldest and newest
// segments, from the segment names alone (nothing is read), and whether
// there is a segment.
func (s *Store) walSegmentRange() (first, last uint64, found bool, err error) {
	names, err := s.opts.walFS.List(filepath.Join(s.dir, format.WALName))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("store: %w", err)
	}
	for _, name := range names {
		if lsn, ok := wal.ParseSegmentName(name); ok {
			if !found || lsn < first {
				first = lsn
			}
			if !found || lsn > last {
				last = lsn
			}
			found = true
		}
	}
	return first, last, found, nil
}

// replayFrom returns the lowest synced LSN of any filter: the WAL must
// hold every record after it. ok is false when no filter needs any.
func (s *Store) replayFrom() (need uint64, ok bool) {
	need = s.checkpointLSN.Load()
	for _, h := range s.filters {
		b := h.base()
		if b.broken != nil {
			continue
		}
		need, ok = min(need, b.meta.SyncedLSN), true
	}
	return need, ok
}

// recordChecker returns the wal.Options.Check of recovery: every record
// must decode, and a record a filter will replay must fit the filter's
// catalog entry. It notes in loads the LSN of the last load record each
// filter will replay. A record naming a filter or layer the catalog does not
// know yet means the catalog is older than the WAL (restored from a
// backup): Open then refuses rather than delete that filter's files as
// orphans.
// The WAL adds the segment and offset to the error.
func (s *Store) recordChecker(st *catalog.State, loads map[uint64]uint64) func(lsn uint64, p []byte) error {
	byID := make(map[uint64]*format.FilterMeta, len(st.Filters))
	for _, m := range st.Filters {
		byID[m.ID] = m
	}
	return func(lsn uint64, p []byte) error {
		rec, err := format.DecodeWALRecord(p)
		if err != nil {
			return err
		}
		if rec.Op == format.WALOpExternal && (rec.Seq == 0 || rec.Seq > maxExtSeq) {
			// Logged by a build that applied such a record: recovered,
			// it would report every seq durable and stop every apply.
			return fmt.Errorf("%w: external record with seq %d (seqs run 1 to %d)", ErrCorrupt, rec.Seq, uint64(maxExtSeq))
		}
		i := 0
		for r := range rec.Ops() {
			m := byID[r.FilterID]
			switch {
			case m == nil && r.FilterID >= st.NextID:
				err = fmt.Errorf("%w: record for filter id %d, but the catalog's next id is %d (is the catalog older than the WAL?)",
					ErrCorrupt, r.FilterID, st.NextID)
			case m == nil, lsn <= m.SyncedLSN:
				// A dropped filter, or a change its files already hold.
			default:
				err = m.CheckRecord(r)
				if r.Op == format.WALOpLoad {
					loads[r.FilterID] = lsn
				}
			}
			if err != nil {
				if rec.Op == format.WALOpBatch || rec.Op == format.WALOpExternal {
					err = fmt.Errorf("%s part %d: %w", rec.Op, i, err)
				}
				return err
			}
			i++
		}
		return nil
	}
}

// replayWAL applies, filter by filter, every record (every part of a batch
// record) after the filter's synced LSN, in LSN order, and returns how
// many it applied. Records of broken filters are skipped (and kept in the
// WAL). So are a filter's records before the last load record it
// replays (loads, by filter id): the filter comes back incomplete anyway,
// and their after-images, planned before a Load that may have moved
// fingerprints in place and ended, would overwrite the Load's words in
// the file (a catalog from before the Load, put back while the WAL still
// holds its record, would damage the file for the current catalog).
func (s *Store) replayWAL(from uint64, loads map[uint64]uint64) (int, error) {
	byID := make(map[uint64]handle, len(s.filters))
	for _, h := range s.filters {
		byID[h.base().id] = h
	}
	n := 0
	err := s.log.Replay(from+1, func(lsn uint64, p []byte) error {
		rec, err := format.DecodeWALRecord(p)
		if err != nil {
			return fmt.Errorf("LSN %d: %w", lsn, err)
		}
		if rec.Op == format.WALOpExternal {
			// External-log mode: the engine replays its records after
			// the last one this WAL holds.
			s.ext.recovered(rec.Seq)
		}
		// A batch record's parts are replayed in order, each as the
		// record it encodes; the WAL's CRC made the batch whole.
		for r := range rec.Ops() {
			h, ok := byID[r.FilterID]
			if !ok {
				continue // dropped since
			}
			b := h.base()
			if b.broken != nil || lsn <= b.meta.SyncedLSN || lsn < loads[b.id] {
				continue
			}
			if r.Op == format.WALOpLoad {
				// A Load began, or an external op was skipped, after the
				// catalog entry was written, and no checkpoint recorded
				// the filter whole since: its keys may be partly in (a
				// cuckoo Load moves fingerprints in place).
				if !b.incomplete.Load() {
					s.opts.Logger.Warn("a Load of this filter began, or an external op on it was skipped, after its catalog entry (a Load interrupted before the catalog marked it, or an older catalog put back): the filter is incomplete until it is rebuilt",
						"filter", b.name(), "lsn", lsn)
					// Its pages may hold words the Load wrote, and the
					// records before this one are skipped, so nothing
					// marks the pages they changed: every checksum is
					// unknown, as Open makes those of a filter the
					// catalog calls incomplete after a crash, until a
					// clean Close recomputes them.
					for _, r := range b.regions {
						r.InvalidateSums()
					}
				}
				b.incomplete.Store(true)
				b.off.Store(true)
				n++
				continue
			}
			if r.Layer >= len(b.regions) {
				return fmt.Errorf("store: %w: WAL record LSN %d names layer %d of filter %q, which has %d layers",
					ErrCorrupt, lsn, r.Layer, b.name(), len(b.regions))
			}
			n++
			if err := h.replay(r); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// replayHook, if set (by tests), runs in Open once every file is checked
// and mapped, before Open writes any mapping (the stamps, the replay).
var replayHook func(s *Store)

// guardOpen runs fn, a part of Open that writes the filters' mappings
// (the stamps, the cuckoo move counters, the replay of the WAL), under
// the fault guard of changes: a fault (a page the disk cannot read, a
// file truncated by another process since Open checked it) fails Open
// with an error naming the file, where it killed the process before. The
// files are as fn left them: the WAL holds every record still, and the
// next Open replays them again.
func (s *Store) guardOpen(fn func() error) (err error) {
	addr, faulted := faultGuarded(func() { err = fn() })
	if !faulted {
		return err
	}
	for _, h := range s.filters {
		if ferr, ok := h.base().faultError(addr, "a read or write"); ok {
			return fmt.Errorf("store: open: recovering filter %q: %w", h.base().name(), ferr)
		}
	}
	return fmt.Errorf("store: open: recovering: %w: a read or write of a mapping faulted (SIGBUS at %#x)", syscall.EIO, addr)
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

// openFilter maps every layer of m with open and checks each header
// against the catalog. A filter whose files cannot be mapped or do not
// match opens broken: its lookups answer "maybe", its changes fail with
// ErrCorrupt naming the file, and Drop removes it; the store's other
// filters are not affected. A file that could not be mapped for want of
// descriptors or memory, or, for a writer, that this process may not open
// (permission denied), says nothing about the file's contents
// (notTheFile): openFilter then returns that error, for Open to fail
// with, rather than a filter broken for the whole session and called
// corrupt, which an operator might Drop. A read-only store opens such a
// filter broken, its error wrapping the permission error too, so that an
// inspection reports the rest of the store (cmd/inspect tells a file it
// could not read from a corrupt one).
func (s *Store) openFilter(name string, m *format.FilterMeta, open func(string) (mmapbits.Region, error)) (handle, error) {
	b := newBase(s, name, m)
	b.incomplete.Store(m.State == format.StateLoading)
	brk := func(layer int, cause error) (handle, error) {
		if notTheFile(cause, s.opts.ReadOnly) {
			b.closeRegions()
			b.regions = nil
			file := filepath.Join(format.FiltersName, filepath.Base(b.path(layer)))
			return nil, fmt.Errorf("store: open: filter %q layer %d (%s): %w", name, layer, file, cause)
		}
		return s.breakOpen(b, layer, cause), nil
	}
	for i := range m.Layers {
		if slices.Contains(s.resyncSkipped, filepath.Base(b.path(i))) {
			// Missing when evictForResync would have dropped its pages:
			// a file there now (moved back meanwhile) holds them as the
			// cache does, which a write may not make durable. Broken
			// (and listed) until an Open drops them first.
			return brk(i, fmt.Errorf("%w: the file was missing when this Open dropped the filter files' pages from the cache (%s)", fs.ErrNotExist, format.ResyncName))
		}
		r, err := open(b.path(i))
		if err != nil {
			return brk(i, err)
		}
		b.regions = append(b.regions, r)
		if err := m.CheckHeader(r.Header(), i, s.id); err != nil {
			return brk(i, err)
		}
		if st, want := r.Stamp(), m.Layers[i].Stamp; st < want {
			return brk(i, fmt.Errorf("%w: the file is older than the catalog says: its checkpoint stamp is LSN %d, and the catalog records that the checkpoint at LSN %d wrote it (an older copy of the file put back, or writes the disk lost); restore the file that checkpoint wrote, or drop the filter", ErrCorrupt, st, want))
		}
	}
	h, err := newHandle(b)
	if err != nil {
		return brk(0, err)
	}
	if b.incomplete.Load() {
		b.off.Store(true)
	}
	return h, nil
}

// notTheFile reports whether err, from opening or mapping a layer file,
// is about this process rather than the file's contents, for Open to fail
// with: out of resources (outOfResources), or, unless readOnly,
// permission denied (EACCES, EPERM: the file's mode, owner or attributes,
// a security module) or a read-only file system (EROFS), which an
// operator fixes without touching the data.
func notTheFile(err error, readOnly bool) bool {
	return outOfResources(err) || !readOnly && (errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS))
}

// outOfResources reports whether err is the system's refusal for want of
// file descriptors or memory (EMFILE, ENFILE, ENOMEM, or EAGAIN: from
// mmap, a mapping past the locked-memory limit or of a file under a
// mandatory lock): a state of this process, machine or another process's
// lock, which may pass, not a fault of the file's contents.
func outOfResources(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EAGAIN)
}

// newHandle builds the kind-specific handle over b's mapped layers and
// restores the item counts from the catalog.
func newHandle(b *filterBase) (handle, error) {
	switch b.kind {
	case mmapbits.KindBloom:
		return newBloom(b)
	case mmapbits.KindCounting:
		return newCounting(b)
	case mmapbits.KindCuckoo:
		return newCuckoo(b)
	case mmapbits.KindBitmap:
		return newBitmap(b)
	}
	return nil, fmt.Errorf("unknown kind %v", b.kind)
}

// breakOpen unmaps b, a filter being opened, and returns it broken by
// cause, found in its layer file layer.
func (s *Store) breakOpen(b *filterBase, layer int, cause error) handle {
	b.closeRegions()
	b.regions = nil
	file := filepath.Join(format.FiltersName, filepath.Base(b.path(layer)))
	if strings.Contains(cause.Error(), file) {
		// The mapper's error names the file already.
		b.broken = fmt.Errorf("store: filter %q is broken: %w: layer %d: %w", b.name(), ErrCorrupt, layer, cause)
	} else {
		b.broken = fmt.Errorf("store: filter %q is broken: %w: layer %d file %s: %w", b.name(), ErrCorrupt, layer, file, cause)
	}
	b.off.Store(true)
	s.opts.Logger.Error("filter broken", "filter", b.name(), "err", b.broken)
	return brokenHandle(b)
}

// breakNewerThanWAL opens broken every filter with a layer file whose
// stamp is past the WAL's last record, when the WAL holds records past
// the filter's synced LSN. (With none, nothing is replayed, and a
// WAL restarted at the checkpoint says nothing of the files: one lost
// after a clean Close, or one an Open restarted before it was stopped;
// lowerStamps then brings stamps past ckpt down to it.) A checkpoint
// stamps a layer it syncs with its LSN, and every change a durable record
// made is stored in the map with the stamp raised to the record's LSN
// (applyThrough), in the header page the kernel writes back with the
// data: so the stamp is at least the LSN of the newest change the file
// holds, and no crash leaves it past the WAL's end (a change reaches the
// map only once its record is fdatasynced; a checkpoint fdatasyncs the
// WAL through its LSN first, and the segment it then starts begins after
// it). A plain copy of a live store leaves one, its WAL copied before its
// filter files while writes went on (and so does a disk that lost synced
// WAL pages). Replaying the older log's after-images into such a file
// would put cuckoo slots, counters and bitmap words back to older values
// and lose what moved since (keys read absent, the filter "ok"); broken,
// the filter answers "maybe" until the right files come back. (Bloom adds
// set bits before their records are durable and do not raise the stamp:
// an older log's Bloom records only set bits again, which loses nothing.)
// A read-only open, which applies the after-images to its overlay rather
// than to the file, checks the same from stamps it reads before its WAL
// scan (newerThanWAL).
//
// Per filter, from its own synced LSN: a filter an earlier Open found
// broken keeps the synced LSN of its last checkpoint, below the catalog's,
// and the WAL keeps its records (checkpoint); compared with the catalog's
// checkpoint, past which the WAL held nothing once that Open had closed,
// the next Open let it through "ok" and replayed the older after-images
// into it (an adversarial review: 4 bitmap bits, 49 counting and 48
// cuckoo keys absent, Check clean).
func (s *Store) breakNewerThanWAL() {
	end := s.log.LastLSN()
	for name, h := range s.filters {
		b := h.base()
		if b.broken != nil || end <= b.meta.SyncedLSN {
			// Nothing past its checkpoint to replay into it.
			continue
		}
		for i, r := range b.regions {
			if st := r.Stamp(); st > end {
				s.addFilter(name, s.breakOpen(b, i, newerThanWALError(st, end)))
				break
			}
		}
	}
}

// newerThanWALError is the cause of a filter broken by a layer stamp past
// end, the WAL's last record.
func newerThanWALError(stamp, end uint64) error {
	return fmt.Errorf("%w: the file is newer than the WAL: its stamp says it holds changes through LSN %d, and the WAL ends at LSN %d (a copy of the store taken while its writer ran, the WAL copied before the filter files: copy a live store with Backup; or WAL writes the disk lost); restore the files of one moment, or drop the filter", ErrCorrupt, stamp, end)
}

// lowerStamps brings every stamp past the catalog's checkpoint ckpt down
// to it, in a store whose WAL holds no record past ckpt (so nothing is
// replayed, and the WAL goes on from ckpt+1): such a stamp belongs to LSNs
// the store will hand out again, and would stay past the new WAL's end
// for as long as its layer does not change, which breakNewerThanWAL would
// take for a copy's. Only a catalog put back from an older copy, the WAL
// then removed, leaves one (a misuse Open tolerates: the files are newer
// than the catalog, and no replay puts them back). The stamp stays at or
// above the catalog's own record of the layer (at most ckpt). The
// syncFilters of Open writes the header pages.
func (s *Store) lowerStamps(ckpt uint64) {
	if s.log.LastLSN() > ckpt {
		return
	}
	for _, h := range s.filters {
		if b := h.base(); b.broken == nil {
			for _, r := range b.regions {
				if r.Stamp() > ckpt {
					r.SetStamp(ckpt)
				}
			}
		}
	}
}

// brokenHandle is the handle of a broken filter: its kind's type with no
// layers (every method checks b.off or b.broken before using them).
func brokenHandle(b *filterBase) handle {
	b.items = func() []uint64 { return nil }
	b.applyWrites = func(int, []format.WordWrite) error { return b.broken }
	switch b.kind {
	case mmapbits.KindBloom:
		f := &Bloom{b: b}
		f.layers.Store(new([]*bloom.Filter))
		f.slow = bloom.SlowFront(f.hasSlow, f.hasHashSlow)
		f.guard.init(b, &f.front, f.slow, bloom.SlowFront)
		f.setFront()
		return f
	case mmapbits.KindCounting:
		f := &Counting{b: b}
		f.slow = bloom.SlowCountingFront(f.hasSlow, f.hasHashSlow)
		f.guard.init(b, &f.front, f.slow, bloom.SlowCountingFront)
		f.setFront()
		return f
	case mmapbits.KindCuckoo:
		f := &Cuckoo{b: b}
		f.layers.Store(new([]*cuckoo.Filter))
		f.slow = cuckoo.SlowFront(f.hasSlow, f.hasHashSlow)
		f.guard.init(b, &f.front, f.slow, cuckoo.SlowFront)
		f.setFront()
		return f
	}
	return &Bitmap{b: b, bits: b.meta.Bits}
}
