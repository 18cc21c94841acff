package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// Layout of a store directory.
const (
	lockFile   = "LOCK"
	filtersDir = "filters"
	walDir     = "wal"
)

// Store is an open store directory. All methods are safe for concurrent
// use.
type Store struct {
	dir  string
	opts Options
	lock *dirLock
	cat  *catalog
	log  *wal.Log // nil when read-only

	// gate is the commit gate: mutations hold it shared from planning to
	// acknowledgement; Checkpoint, Drop and Close hold it exclusively.
	gate sync.RWMutex

	mu      sync.Mutex // guards filters and nextID
	filters map[string]handle
	nextID  uint64

	checkpointLSN atomic.Uint64
	closed        atomic.Bool
	synced        chan struct{} // SyncInterval: a WAL fdatasync completed
	stop          chan struct{}
	bg            sync.WaitGroup
	ckptMu        sync.Mutex // one checkpoint at a time
}

// handle is a filter handle of any kind.
type handle interface {
	base() *filterBase
	// replay applies one logged record during recovery.
	replay(r record) error
}

// Hash returns the 64-bit hash of key (XXH64) that every filter derives its
// positions from. Pass it to the ...Hash methods to hash a key once for
// several filters or operations.
func Hash(key []byte) uint64 { return xxhash.Sum64(key) }

// Open opens the store in dir, creating it if needed (unless ReadOnly),
// takes the writer lock, and recovers: it replays the WAL written since the
// last checkpoint, so its cost grows with that, never with filter size.
func Open(dir string, opts *Options) (*Store, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{
		dir: dir, opts: o, filters: make(map[string]handle),
		cat:  &catalog{path: filepath.Join(dir, catalogFile), readOnly: o.ReadOnly},
		stop: make(chan struct{}), synced: make(chan struct{}, 1),
	}
	if o.ReadOnly {
		return s, s.openReadOnly()
	}
	if err := os.MkdirAll(filepath.Join(dir, filtersDir), 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if s.lock, err = lockDir(filepath.Join(dir, lockFile)); err != nil {
		return nil, err
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
	s.lock.release()
}

func (s *Store) layerPath(id uint64, layer int) string {
	return filepath.Join(s.dir, filtersDir, fmt.Sprintf("%d-%d.flt", id, layer))
}

// parseLayerPath is layerPath's inverse for names in the filters directory.
func parseLayerPath(name string) (id uint64, layer int, ok bool) {
	base, found := strings.CutSuffix(name, ".flt")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(base, "-")
	if !found {
		return 0, 0, false
	}
	id, err1 := strconv.ParseUint(a, 10, 64)
	l, err2 := strconv.Atoi(b)
	return id, l, err1 == nil && err2 == nil && l >= 0
}

// Close checkpoints, unmaps every filter and releases the lock. Handles
// answer lookups with "maybe present" afterwards and mutations with
// ErrClosed.
func (s *Store) Close() error {
	if s.opts.ReadOnly {
		if s.closed.Swap(true) {
			return fmt.Errorf("store: close: %w", ErrClosed)
		}
		for _, h := range s.filters {
			h.base().closeRegions()
		}
		return nil
	}
	err := s.Checkpoint()
	s.gate.Lock()
	if s.closed.Swap(true) {
		s.gate.Unlock()
		return fmt.Errorf("store: close: %w", ErrClosed)
	}
	s.gate.Unlock()
	close(s.stop)
	s.bg.Wait()
	s.mu.Lock()
	for _, h := range s.filters {
		h.base().closeRegions()
	}
	s.mu.Unlock()
	if cerr := s.log.Close(); err == nil {
		err = cerr
	}
	if lerr := s.lock.release(); err == nil {
		err = lerr
	}
	return err
}

// Checkpoint makes every change so far durable in the filter files, records
// the WAL position and item counts in the catalog, and deletes WAL segments
// it no longer needs. Close and the background checkpointer call it.
func (s *Store) Checkpoint() error {
	if s.opts.ReadOnly {
		return fmt.Errorf("store: checkpoint: %w", ErrReadOnly)
	}
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.closed.Load() {
		return fmt.Errorf("store: checkpoint: %w", ErrClosed)
	}
	return s.checkpointLocked()
}

// checkpointLocked runs with the gate held exclusively: no mutation is in
// flight, every appended record has been applied or is in an overlay.
func (s *Store) checkpointLocked() error {
	start := time.Now()
	if err := s.log.Sync(); err != nil {
		return err
	}
	lsn := s.log.LastLSN()
	s.mu.Lock()
	handles := make(map[string]handle, len(s.filters))
	for n, h := range s.filters {
		handles[n] = h
	}
	s.mu.Unlock()
	metas := make(map[string]*filterMeta, len(handles))
	synced := 0
	for name, h := range handles {
		b := h.base()
		b.mu.Lock()
		b.applyThrough(lsn)
		meta := b.snapshotMeta()
		b.mu.Unlock()
		if b.dirty.Swap(false) {
			for _, r := range b.regions {
				if err := r.Sync(); err != nil {
					b.dirty.Store(true)
					return err
				}
			}
			synced++
		}
		metas[name] = meta
	}
	if err := s.cat.checkpoint(lsn, metas); err != nil {
		return err
	}
	// The catalog now holds these counts: later catalog writes of a
	// filter (a new layer) must carry them, not counts from before.
	for name, m := range metas {
		b := handles[name].base()
		b.mu.Lock()
		b.meta = m
		b.mu.Unlock()
	}
	s.checkpointLSN.Store(lsn)
	// Start a new segment so that the active one, now wholly obsolete,
	// can go too: Open then reads nothing the checkpoint covers.
	if err := s.log.StartSegment(); err != nil {
		return err
	}
	if err := s.log.TruncateBefore(lsn + 1); err != nil {
		return err
	}
	s.opts.Logger.Debug("checkpoint", "lsn", lsn, "filters", len(metas), "synced", synced, "took", time.Since(start))
	return nil
}

// background runs periodic and size-triggered checkpoints and, under
// SyncInterval, applies overlays after each WAL fdatasync.
func (s *Store) background() {
	defer s.bg.Done()
	var tick <-chan time.Time
	if s.opts.CheckpointEvery > 0 {
		t := time.NewTicker(s.opts.CheckpointEvery)
		defer t.Stop()
		tick = t.C
	}
	size := time.NewTicker(100 * time.Millisecond)
	defer size.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.synced:
			s.applySynced()
		case <-tick:
			s.backgroundCheckpoint()
		case <-size.C:
			if s.log.Size() >= s.opts.CheckpointBytes {
				s.backgroundCheckpoint()
			}
		}
	}
}

func (s *Store) backgroundCheckpoint() {
	if err := s.Checkpoint(); err != nil && !errors.Is(err, ErrClosed) {
		s.opts.Logger.Error("background checkpoint failed", "err", err)
	}
}

// applySynced moves every change the WAL has fdatasynced from the overlays
// to the maps (SyncInterval).
func (s *Store) applySynced() {
	lsn := s.log.DurableLSN()
	s.mu.Lock()
	hs := make([]handle, 0, len(s.filters))
	for _, h := range s.filters {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	for _, h := range hs {
		b := h.base()
		b.mu.Lock()
		b.applyThrough(lsn)
		b.mu.Unlock()
	}
}

// lookup returns the handle of name, checking its kind.
func (s *Store) lookup(name string, kind mmapbits.Kind) (handle, error) {
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
	if k := h.base().meta.Kind; k != kind {
		return nil, fmt.Errorf("store: filter %q is a %v filter, not %v: %w", name, k, kind, ErrWrongKind)
	}
	return h, nil
}

// create makes a filter's first layer file and its catalog entry, then
// builds its handle with mk. The file is durable before the catalog entry,
// so a crash in between leaves an orphan file that Open removes.
func (s *Store) create(name string, m *filterMeta, mk func(b *filterBase) (handle, error)) (handle, error) {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.filters[name]; ok {
		return nil, fmt.Errorf("store: create %q: %w", name, ErrExists)
	}
	m.ID = s.nextID
	b := &filterBase{s: s, name: name, meta: m}
	r, err := s.opts.mapper.Create(b.path(0), m.header(0))
	if err != nil {
		return nil, err
	}
	b.regions = []mmapbits.Region{r}
	h, err := mk(b)
	if err == nil {
		err = s.cat.putFilters(s.nextID+1, map[string]*filterMeta{name: m})
	}
	if err != nil {
		r.Close()
		s.opts.mapper.Remove(b.path(0))
		return nil, err
	}
	s.nextID++
	s.filters[name] = h
	return h, nil
}

// Drop deletes a filter: its catalog entry first, then its files. Handles
// to it report ErrClosed afterwards.
func (s *Store) Drop(name string) error {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.filters[name]
	if !ok {
		return fmt.Errorf("store: drop %q: %w", name, ErrNotFound)
	}
	if err := s.cat.deleteFilter(name); err != nil {
		return err
	}
	b := h.base()
	b.dropped.Store(true)
	delete(s.filters, name)
	b.closeRegions()
	var errs []error
	for i := range b.meta.Layers {
		if err := s.opts.mapper.Remove(b.path(i)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// List returns the Info of every filter, sorted by name.
func (s *Store) List() ([]Info, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("store: list: %w", ErrClosed)
	}
	s.mu.Lock()
	hs := make([]handle, 0, len(s.filters))
	for _, h := range s.filters {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	out := make([]Info, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.base().info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
