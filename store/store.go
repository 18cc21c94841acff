package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/filterstore/filterstore/internal/catalog"
	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Store is an open store directory. All methods are safe for concurrent
// use. A nil or zero Store (not one Open returned) has no directory: its
// methods return an error wrapping ErrInvalid that names it, or a zero
// ID, Stats and ExternalDurable.
type Store struct {
	dir  string
	opts Options
	id   uint64 // the store's identity (catalog, file headers, WAL segment headers)
	lock *dirLock
	// session is the session marker, open for writing while this writer
	// has the store open (see sessionFile); guarded by sessionMu.
	session   *os.File
	sessionID uint64 // written in the marker (see startSession)
	// sessionFirst is the first LSN of the newest WAL segment, the one
	// the marker records; sessionResync, that it records a failed msync
	// too (markResync). Both guarded by sessionMu.
	sessionFirst  uint64
	sessionResync bool
	sessionMu     sync.Mutex
	// deadWriter: this Open found the marker of a writer that died, so
	// the checksums of its Bloom (and incomplete) filters are unknown
	// until a clean Close recomputes them; a filter that opened broken is
	// not recomputed, so the marker must then stay.
	deadWriter bool
	// resyncOnly is, when the resync marker lists layer files (a partial
	// one, see resync.go), the base names of those; nil for a full one.
	// resyncSkipped holds the base names of the layer files this Open
	// found the marker for and could not drop the pages of (missing, not
	// a regular file): the marker stays, listing them (syncFilters).
	resyncOnly    map[string]bool
	resyncSkipped []string
	// catalogNotEvicted: the catalog was missing (or not a regular file)
	// when evictCatalogForResync would have dropped its pages.
	catalogNotEvicted bool
	cat               *catalog.Catalog
	log               *wal.Log // nil when read-only
	// roDead is, in a read-only store whose Open began with the writer
	// dead, the record of it (see deadWriter); nil otherwise.
	roDead *deadWriter

	// gate is the commit gate: mutations hold it shared from planning to
	// acknowledgement; Checkpoint, Drop and Close hold it exclusively.
	gate sync.RWMutex

	mu sync.Mutex // guards filters, byID and nextID
	// createMu serializes the calls that make a filter (create, import):
	// held, with the gate shared, through their file I/O and catalog
	// commit, where mu is held only to read and change the maps and
	// nextID, so that lookups by name, List and ApplyExternal do not wait
	// for a create's fsyncs. Taken before mu, never while holding it.
	createMu sync.Mutex
	filters  map[string]handle
	byID     map[uint64]handle // a writer's filters by id (ApplyExternal); nil when read-only
	nextID   uint64

	checkpointLSN atomic.Uint64
	// keptBytes is the WAL's size when the last checkpoint ended: what it
	// could not remove (the active segment, and what broken filters
	// keep). A size-triggered checkpoint waits for CheckpointBytes more.
	keptBytes atomic.Int64
	closed    atomic.Bool
	failure   atomic.Pointer[failedError] // set once, by fail
	failCh    chan struct{}               // closed when failure is set
	synced    chan struct{}               // SyncInterval: a WAL fdatasync completed
	stop      chan struct{}
	bg        sync.WaitGroup
	ckptMu    sync.Mutex // one checkpoint at a time
	ext       extState   // external-log mode (external.go)

	hooks testHooks
}

// testHooks are points where tests stop or fail the store; all nil in
// production.
type testHooks struct {
	// afterBits runs in a Bloom add after its bits are set and before its
	// record is appended to the WAL, with the filter's mutex held.
	afterBits func()
	// backupFile runs in Backup before it copies each file (src); an
	// error stops the backup as a failed copy would.
	backupFile func(src string) error
	// backupLocked runs in Backup once it holds ckptMu, after its first
	// checks of the paths.
	backupLocked func()
	// pipeFlush runs on a pipelined Load's goroutine that adds a full
	// batch, before it adds it.
	pipeFlush func()
	// bulkRawKeys is told, as a Load starts, whether its batches keep
	// the keys for a builder to hash (loadRawKeys).
	bulkRawKeys func(raw bool)
	// loadEnded runs in a Load once every key is added and its build
	// published, before its pages are marked stale for the closing
	// checkpoint, with no lock held.
	loadEnded func()
}

// handle is a filter handle of any kind.
type handle interface {
	base() *filterBase
	// replay applies one logged record during recovery, writing every
	// word it covers even where the value is already there (see
	// filterBase.replayWrites).
	replay(r format.WALRecord) error
	// count adds one record's change of the item counts, without
	// touching the data (read-only stores).
	count(r format.WALRecord)
}

// Hash returns the 64-bit hash of key (XXH64) that every filter derives its
// positions from. Pass it to the ...Hash methods to hash a key once for
// several filters or operations.
func Hash(key []byte) uint64 { return xxhash.Sum64(key) }

// Open opens the store in dir, creating it if needed (unless ReadOnly),
// takes the writer lock, and recovers: it replays the WAL written since the
// last checkpoint, so its cost grows with that, never with filter size.
//
// Open checks everything it reads before it changes anything: if the
// catalog, the WAL or the directory does not check out, it fails (an error
// wrapping ErrCorrupt that names the file) and leaves every file as it
// found it. It never starts a new catalog in a directory that holds filter
// files or WAL segments. A filter whose files are missing or damaged opens
// broken (see Info) while the others work.
func Open(dir string, opts *Options) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("store: open: %w: the directory path is empty", ErrInvalid)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{
		dir: dir, opts: o, filters: make(map[string]handle), byID: make(map[uint64]handle),
		cat:  catalog.New(dir),
		stop: make(chan struct{}), synced: make(chan struct{}, 1),
		failCh: make(chan struct{}),
	}
	s.cat.NoSync = o.simulated
	if err := refuseIncompleteBackup(dir); err != nil {
		return nil, err
	}
	if o.ReadOnly {
		s.byID = nil // ApplyExternal is refused
		if err := s.openReadOnly(); err != nil {
			return nil, err
		}
		return s, nil
	}
	if err := mkdirDurable(dir); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := mkdirDurable(filepath.Join(dir, format.FiltersName)); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if s.lock, err = lockDir(filepath.Join(dir, format.LockName)); err != nil {
		return nil, err
	}
	if err := refuseSharedFiles(dir); err != nil {
		s.lock.release()
		return nil, err
	}
	if err := s.lock.dirErr; err != nil {
		o.Logger.Warn("the store directory cannot be flocked here: only LOCK keeps a second writer out, and deleting it would let one in", "err", err)
	}
	if err := s.recover(); err != nil {
		s.abandon()
		return nil, err
	}
	s.bg.Add(1)
	go s.background()
	return s, nil
}

// abandon releases what a failed Open acquired.
func (s *Store) abandon() {
	for _, h := range s.filters {
		h.base().closeRegions()
	}
	if s.log != nil {
		s.log.Close()
	}
	s.closeSession()
	s.lock.release()
}

// fail marks the store failed by cause, unless it failed already, and
// returns the store's failure error. From then on every change is refused
// and no checkpoint is recorded: what cause left on disk is unknown (after
// a failed fsync Linux may report the next one clean without writing
// anything), so only the WAL as the next Open finds it is trusted.
func (s *Store) fail(cause error) error {
	if cause == nil {
		return s.failed()
	}
	var fe *failedError
	if errors.As(cause, &fe) {
		return s.failed()
	}
	if s.failure.CompareAndSwap(nil, &failedError{cause: cause}) {
		close(s.failCh) // wakes ApplyExternal calls waiting for a seq
		s.opts.Logger.Error("store failed: refusing changes until reopened", "err", cause)
	}
	return s.failed()
}

// failedNow is failed, after failing the store by the WAL's sticky error
// if it has one. Under SyncInterval WaitDurable accepts a record written
// before a failed fdatasync, and the store notices a failure of the
// background fdatasync only on its next tick: an answer checks the log
// itself, so that none is acknowledged once a sync has failed.
func (s *Store) failedNow() error {
	if err := s.log.Err(); err != nil {
		return s.fail(err)
	}
	return s.failed()
}

// failed returns the store's failure error, nil if it has not failed.
func (s *Store) failed() error {
	if e := s.failure.Load(); e != nil {
		return e
	}
	return nil
}

// catalogFailed turns a failed catalog write into the error to return.
// A lock that another process held too long, or no descriptor or memory
// left to open the catalog with, or no permission to open it for writing
// (catalog.NotStarted, notTheFile), means nothing was written: only the operation fails, and the same call
// may succeed once it passes. Anything else (a failed write or fdatasync)
// may have left the commit on disk or not, and fails the store (except
// where the caller can tell both outcomes apart: create, for a full
// disk), then writes the resync marker (markResync), so that the next
// Open reads the catalog from the disk, not from the cache.
func (s *Store) catalogFailed(err error) error {
	if catalogUntouched(err) {
		return err
	}
	// Failed first, so that no other change commits meanwhile; then,
	// whether or not the store had failed already (a WAL failure writes
	// no marker), the marker: the cache may hold pages of the catalog
	// that the disk does not (a failed write-back), which the next Open
	// drops (evictCatalogForResync).
	// Deferred, after fail: a panic there must not skip it.
	defer s.markResyncAfterCatalog()
	return s.fail(err)
}

// markResyncAfterCatalog writes the resync marker after a failed catalog
// commit (markResync), logging if neither marker could be written.
func (s *Store) markResyncAfterCatalog() {
	if merr := s.markResync(); merr != nil {
		s.opts.Logger.Error("cannot mark the store for a rebuild after a failed catalog commit: neither the resync marker nor the session marker could be written", "err", merr)
	}
}

// catalogUntouched reports whether a catalog operation failed without
// writing anything, for a reason that may pass: another process held the
// catalog's lock past the timeout, or the catalog could not be opened for
// want of descriptors or memory, or for writing at all (permission
// denied, a read-only file system: its mode or attributes changed under
// a running writer; notTheFile), or its commit could not grow the file
// past the process's file size limit (RLIMIT_FSIZE: EFBIG from bbolt's
// ftruncate, before it writes a page; catalog.GrowRefused).
func catalogUntouched(err error) bool {
	return errors.Is(err, bolterrors.ErrTimeout) || catalog.NotStarted(err) && notTheFile(err, false) || catalog.GrowRefused(err)
}

// nilErr returns the error of a nil or zero Store: one that Open did not
// return (Open sets cat, which nothing clears). nil for an opened store,
// closed or not.
func (s *Store) nilErr() error {
	if s == nil || s.cat == nil {
		return nilHandleError("Store", "Open")
	}
	return nil
}

func (s *Store) layerPath(id uint64, layer int) string {
	return format.LayerPath(s.dir, id, layer)
}

// Close checkpoints, unmaps every filter and releases the lock. Handles
// answer lookups with "maybe present" afterwards and mutations with
// ErrClosed. Close of a failed store writes nothing more and returns the
// failure: no checkpoint, catalog commit or change to the session marker,
// and no trim of the WAL's reserved space; where the WAL itself has not
// failed, records already written to it are still fdatasynced. A second
// Close returns ErrClosed.
func (s *Store) Close() error {
	if err := s.nilErr(); err != nil {
		return err
	}
	if s.opts.ReadOnly {
		if s.closed.Swap(true) {
			return fmt.Errorf("store: close: %w", ErrClosed)
		}
		s.closeFilters()
		return nil
	}
	// The store is marked closed and checkpointed under one hold of the
	// gate: a change that waited for the gate while the checkpoint ran
	// (a Load's next batch, whose words have no record and are
	// checksummed only by a checkpoint) gets ErrClosed, rather than
	// landing after the last checkpoint and before the close. (It used
	// to land there: its pages kept stale checksums, and with the
	// session marker removed every later Check reported them as damage.)
	//
	// The locks are released by defers: a panic in the checkpoint (the
	// caller's Logger cannot cause one, package safelog) must not leave
	// them held, with every later call of the store waiting for ever.
	err, again := func() (err error, again bool) {
		s.ckptMu.Lock()
		defer s.ckptMu.Unlock()
		s.gate.Lock()
		defer s.gate.Unlock()
		if s.closed.Swap(true) {
			return nil, true
		}
		if s.failed() == nil {
			err = s.checkpointLocked(ckptFull)
		}
		return err, false
	}()
	if again {
		return fmt.Errorf("store: close: %w", ErrClosed)
	}
	s.ext.mu.Lock()
	s.ext.wakeAll() // ApplyExternal calls waiting for a seq see the close
	s.ext.mu.Unlock()
	close(s.stop)
	s.bg.Wait()
	s.closeFilters()
	closeLog := s.log.Close
	if s.failed() != nil {
		// No trim of the WAL's reserved space: a failed store changes
		// no file from then on.
		closeLog = s.log.CloseUntrimmed
	}
	if cerr := closeLog(); err == nil && cerr != nil {
		err = s.fail(cerr)
	}
	if err == nil && s.failed() == nil && !s.unsettledBroken() {
		// Everything is checkpointed, every checksum current. (Before
		// the lock goes: the next writer's marker is its own.)
		err = s.endSession()
	}
	s.closeSession() // a failed store's marker stays
	if lerr := s.lock.release(); err == nil {
		err = lerr
	}
	if ferr := s.failed(); ferr != nil {
		return ferr
	}
	return err
}

// unsettledBroken reports a filter whose checksums a dead writer left
// unknown and that no Close could recompute: it opened broken after a
// crash. The session marker then stays, so that the Open that finds the
// filter whole again treats them as unknown too.
func (s *Store) unsettledBroken() bool {
	if !s.deadWriter {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.filters {
		if h.base().broken != nil {
			return true
		}
	}
	return false
}

// closeFilters makes every handle answer "maybe" and then unmaps it: a
// lookup that read the placeholder pages replacing a mapping sees the flag when
// it checks again.
func (s *Store) closeFilters() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.filters {
		b := h.base()
		b.off.Store(true)
		b.closeRegions()
	}
}

// lookup returns the handle of name, checking its kind.
func (s *Store) lookup(name string, kind mmapbits.Kind) (handle, error) {
	if err := s.nilErr(); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("store: %w", ErrClosed)
	}
	s.mu.Lock()
	h, ok := s.filters[name]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("store: filter %q: %w", name, ErrNotFound)
	}
	if k := h.base().kind; k != kind {
		return nil, fmt.Errorf("store: filter %q is a %v filter, not %v: %w", name, k, kind, ErrWrongKind)
	}
	return h, nil
}

// create makes a filter's first layer file and its catalog entry, then
// builds its handle with mk. The file is durable before the catalog entry,
// so a crash in between leaves an orphan file that Open removes. A full
// disk fails the create and leaves nothing behind.
func (s *Store) create(name string, m *format.FilterMeta, mk func(b *filterBase) (handle, error)) (handle, error) {
	if err := s.nilErr(); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if s.opts.ReadOnly {
		return nil, fmt.Errorf("store: create %q: %w", name, ErrReadOnly)
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed.Load() {
		return nil, fmt.Errorf("store: create %q: %w", name, ErrClosed)
	}
	if err := s.failed(); err != nil {
		return nil, err
	}
	// createMu, not mu, is held through the I/O below: every change of
	// the filter names (create, import: createMu; Rename, Drop: the gate,
	// exclusively) and of nextID (create, import, skipID) is excluded
	// meanwhile, while lookups go on.
	s.createMu.Lock()
	defer s.createMu.Unlock()
	// Again, with createMu held: the create or import that held it may
	// have failed the store (a failed catalog commit), and none queued
	// behind it commits after the failure (see catalogFailed).
	if err := s.failed(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	_, exists := s.filters[name]
	m.ID = s.nextID
	s.mu.Unlock()
	if exists {
		return nil, fmt.Errorf("store: create %q: %w", name, ErrExists)
	}
	// Nothing of the new filter is in the WAL yet.
	m.SyncedLSN = s.checkpointLSN.Load()
	b := newBase(s, name, m)
	r, err := s.opts.mapper.Create(b.path(0), m.Header(0, s.id))
	for skipped := 0; errors.Is(err, fs.ErrExist) && skipped < maxSkippedIDs; skipped++ {
		if err := s.skipID(name); err != nil {
			return nil, err
		}
		m.ID = s.nextIDNow()
		b = newBase(s, name, m)
		r, err = s.opts.mapper.Create(b.path(0), m.Header(0, s.id))
	}
	if err != nil {
		return nil, fmt.Errorf("store: create %q: %w", name, err)
	}
	b.regions = []mmapbits.Region{r}
	h, err := mk(b)
	if err != nil {
		r.Close()
		s.opts.mapper.Remove(b.path(0))
		return nil, err
	}
	if err := s.cat.PutFilters(m.ID+1, map[string]*format.FilterMeta{name: m}); err != nil {
		r.Close()
		if isNoSpace(err) || catalogUntouched(err) {
			// Whether the commit reached the disk or not, the next Open
			// sorts it out: the filter exists, or its file (all zero, id
			// at the catalog's next id) is a proven orphan. The id is not
			// reused meanwhile, so its file stays in the way of no one.
			s.mu.Lock()
			s.nextID++
			s.mu.Unlock()
			return nil, fmt.Errorf("store: create %q: %w", name, err)
		}
		return nil, s.catalogFailed(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.addFilter(name, h)
	return h, nil
}

// nextIDNow returns nextID, read under mu.
func (s *Store) nextIDNow() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextID
}

// maxSkippedIDs bounds how many ids in a row a create or an import skips
// because a file is in the way (skipID).
const maxSkippedIDs = 64

// skipID is called when the first layer file of a new filter could not
// be made at the next id because something is there already: a file the
// catalog names no filter for and that Open left alone, unable to prove
// it this store's orphan (another store's file, a directory, a backup
// written there). Creates would otherwise fail at that id for good. It
// records in the catalog that the id is taken, before anything of the
// next id is made, so that Open's runs of failed creates' files start
// past it, and moves on to the next id. Called with s.createMu held (and
// not s.mu).
func (s *Store) skipID(name string) error {
	id := s.nextIDNow()
	path := s.layerPath(id, 0)
	if err := s.cat.PutFilters(id+1, nil); err != nil {
		if isNoSpace(err) || catalogUntouched(err) {
			return fmt.Errorf("store: create %q: %s is in the way, and skipping its id failed: %w", name, path, err)
		}
		return s.catalogFailed(err)
	}
	s.opts.Logger.Warn("a file the catalog names no filter for is where a new filter's file goes: its id is skipped", "file", path, "filter", name)
	s.mu.Lock()
	s.nextID++
	s.mu.Unlock()
	return nil
}

// Drop deletes a filter: its catalog entry first, then its files. Handles
// to it answer lookups "maybe" and report ErrClosed for changes
// afterwards. A broken filter can be dropped. An error removing the files
// is returned after the drop is done, saying so (the filter is gone, and
// the next Open removes the files), as Rename returns one for the filter
// it replaces.
func (s *Store) Drop(name string) error {
	if err := s.nilErr(); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("store: drop %q: %w", name, ErrReadOnly)
	}
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.closed.Load() {
		return fmt.Errorf("store: drop %q: %w", name, ErrClosed)
	}
	if err := s.failed(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.filters[name]
	if !ok {
		return fmt.Errorf("store: drop %q: %w", name, ErrNotFound)
	}
	if err := s.cat.DeleteFilter(name); err != nil {
		return s.catalogFailed(err)
	}
	s.removeFilter(name, h)
	if err := s.discard(h); err != nil {
		return fmt.Errorf("store: drop %q: dropped, but its files were not removed (the next Open removes them): %w", name, err)
	}
	return nil
}

// addFilter makes h the open filter called name. Called with s.mu held.
func (s *Store) addFilter(name string, h handle) {
	s.filters[name] = h
	if s.byID != nil {
		s.byID[h.base().id] = h
	}
}

// removeFilter forgets h, the open filter called name. Called with s.mu
// held.
func (s *Store) removeFilter(name string, h handle) {
	delete(s.filters, name)
	if s.byID != nil {
		delete(s.byID, h.base().id)
	}
}

// discard retires the handle of a filter the catalog no longer has
// (Drop, or Rename over it): its handles answer lookups "maybe" and
// changes ErrClosed, its mappings go, then its files. A crash before the
// files are gone leaves orphans with an id below the catalog's next id,
// which the next Open removes. Called with the gate held exclusively and
// s.mu held, after the catalog commit.
func (s *Store) discard(h handle) error {
	b := h.base()
	b.dropped.Store(true)
	b.off.Store(true)
	spare := b.spare // a new layer's file the catalog never recorded
	b.closeRegions()
	var errs []error
	for i := range b.meta.Layers {
		if err := s.opts.mapper.Remove(b.path(i)); err != nil {
			errs = append(errs, err)
		}
	}
	if spare != nil {
		if err := s.opts.mapper.Remove(b.path(spare.layer)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// List returns the Info of every filter, sorted by name, broken ones
// included (State "broken", with the Reason). Like Info it reads no
// filter's data: its cost is O(filters × layers).
func (s *Store) List() ([]Info, error) {
	if err := s.nilErr(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("store: list: %w", ErrClosed)
	}
	// Each filter is listed under the name it had when the handles were
	// taken, under mu: its Info is read after mu is released (info takes
	// the filter's mutex, which a new layer holds through its file's
	// I/O), and reading the name then listed a filter renamed meanwhile
	// under its new name beside the one it replaced (a name twice).
	type named struct {
		name string
		h    handle
	}
	s.mu.Lock()
	hs := make([]named, 0, len(s.filters))
	for name, h := range s.filters {
		hs = append(hs, named{name, h})
	}
	s.mu.Unlock()
	out := make([]Info, 0, len(hs))
	for _, nh := range hs {
		in, _ := nh.h.base().info()
		in.Name = nh.name
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
