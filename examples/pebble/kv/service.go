package kv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/filterstore/filterstore/store"
)

// Names of the directories and filters a Service keeps (see the package
// doc).
const (
	pebbleDir  = "pebble"
	filtersDir = "filters"
	seenName   = "seen" // generation 0's; generation N's is "seen.N" (binding.go)
	liveName   = "live"
)

// Options configure Open. A nil *Options, and zero fields, mean the
// defaults given per field.
type Options struct {
	// Capacity is the number of keys the filters' first layers hold; both
	// filters grow past it. Default 1<<20.
	Capacity uint64
	// ErrorRate is the Bloom filter's false-positive rate, in (0, 1).
	// Default 0.01. (The cuckoo filter's follows from its 16-bit
	// fingerprints: about 1 in 8000.)
	ErrorRate float64
}

func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Capacity == 0 {
		c.Capacity = 1 << 20
	}
	if c.ErrorRate == 0 {
		c.ErrorRate = 0.01
	}
	if !(c.ErrorRate > 0 && c.ErrorRate < 1) {
		return c, fmt.Errorf("kv: %w: Options.ErrorRate %v is outside (0, 1)", ErrInvalid, c.ErrorRate)
	}
	return c, nil
}

// Service is a key-value store on pebble with filters in front of Get (see
// the package doc). Its methods are safe for concurrent use; Close waits
// for the calls in progress.
type Service struct {
	mode Mode
	dir  string

	// mu is held shared by every call and exclusively by Close.
	mu     sync.RWMutex
	closed bool

	db    *pebble.DB
	fs    *store.Store // nil in ModePebbleOnly, as seen and live
	seen  *store.Bloom
	live  *store.Cuckoo
	locks keyLocks
	group putGroup // ModeBatch's write groups (group.go)

	// crashPoint, if not nil, runs between the two writes of a change in
	// a filter mode; its error stops the change there, as a crash
	// would: both writes are durable when they return, so what is on
	// disk is what a crash at that point leaves (tests). In
	// ModeExternal it runs after the pebble commit, before the filters
	// apply the change.
	crashPoint func() error

	// groupStart, if not nil, runs when a put starts leading a write
	// group, before the group writes anything (tests: to let puts queue
	// behind it).
	groupStart func()

	// applyFault, if not nil, replaces the filter store's ApplyExternal
	// (tests: a store that fails, with its lookups still answering).
	applyFault func(rec []byte) ([]bool, error)

	// trimEvery is how many external records ModeExternal logs between
	// trims of the filter log; 0: never (tests).
	trimEvery uint64
	replayed  int    // filter log records replayed by Open
	rebuilt   uint64 // keys loaded by Open's rebuild of the filters (binding.go)
	gen       uint64 // the filters' generation (binding.go)
	trimMu    sync.Mutex

	// untrusted is set when the filters may lack a key pebble holds
	// (ModeExternal: an apply the filter store refused); Get then reads
	// pebble for every key.
	untrusted atomic.Bool

	groups      atomic.Uint64
	pebbleReads atomic.Uint64
	skipped     atomic.Uint64
	kept        atomic.Uint64
}

// Stats are counters since Open.
type Stats struct {
	// PebbleReads counts the point reads of pebble: by Get, and by Put and
	// Delete where the cuckoo filter said "maybe" and they had to learn
	// whether pebble holds the key.
	PebbleReads uint64
	// Skipped counts the Gets a filter answered "absent" without reading
	// pebble.
	Skipped uint64
	// Kept counts the cuckoo copies a Delete left behind because the
	// filter refused to delete them (store.ErrAmbiguous): keys that stay
	// "maybe present" (see the package doc).
	Kept uint64
	// Replayed counts the filter log records Open applied to the filters
	// (ModeExternal, or a filter mode opening a directory ModeExternal
	// left): batches pebble committed that the filters had not kept.
	Replayed uint64
	// Rebuilt counts the keys Open loaded into filters it rebuilt from
	// pebble because the filter store it found was not the one pebble's
	// writes went through, or was older than the filter log pebble kept
	// (binding.go); 0 if it rebuilt none.
	Rebuilt uint64
	// Groups counts the write groups that ModeBatch committed (group.go):
	// puts of new keys per group is how many shared each filter Batch and
	// pebble batch.
	Groups uint64
	// FilterSyncs counts the fdatasyncs of the filter store's WAL
	// (store.Stats): the syncs a put waits for besides pebble's in
	// ModePerFilter and ModeBatch; 0 in ModePebbleOnly.
	FilterSyncs uint64
}

// Open opens the service in dir, creating it if it does not exist, with
// the given mode. opts may be nil. A directory whose pebble database was
// written in ModePebbleOnly cannot be opened in a filter mode, nor one
// with filters in ModePebbleOnly: ErrModeMismatch.
func Open(dir string, mode Mode, opts *Options) (*Service, error) {
	var errs []error
	if !mode.valid() {
		errs = append(errs, fmt.Errorf("kv: %w: mode %d", ErrInvalid, int(mode)))
	}
	o, err := opts.withDefaults()
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kv: %w", err)
	}
	hasPebble, err := exists(filepath.Join(dir, pebbleDir))
	if err != nil {
		return nil, err
	}
	hasFilters, err := exists(filepath.Join(dir, filtersDir))
	if err != nil {
		return nil, err
	}
	switch {
	case mode.filtered() && hasPebble && !hasFilters:
		return nil, fmt.Errorf("kv: %w: %s holds a pebble database written without filters; %v would miss its keys", ErrModeMismatch, dir, mode)
	case !mode.filtered() && hasFilters:
		return nil, fmt.Errorf("kv: %w: %s has filters, which %v would leave stale", ErrModeMismatch, dir, mode)
	}

	s := &Service{mode: mode, dir: dir, trimEvery: defaultTrimEvery}
	if mode.filtered() {
		// The filters first: a crash before pebble exists leaves
		// filters with nothing in them, which the check above accepts.
		// ModeExternal's store syncs its own WAL in the background:
		// pebble's log is the durability.
		sync := store.SyncAlways
		if mode == ModeExternal {
			sync = store.SyncInterval
		}
		if err := s.openStore(sync); err != nil {
			return nil, err
		}
	}
	s.db, err = pebble.Open(filepath.Join(dir, pebbleDir), &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		err = fmt.Errorf("kv: open pebble: %w", err)
		if s.fs != nil {
			err = errors.Join(err, s.fs.Close())
		}
		return nil, err
	}
	if mode.filtered() {
		err = s.bind(o)
		if err == nil && mode == ModeExternal {
			s.replayed, err = s.replayFilterLog()
		} else if err == nil {
			err = s.catchUp(o)
		}
		if err == nil {
			err = s.rebuildEmpty(o)
		}
		if err != nil {
			err = errors.Join(err, s.db.Close())
			if s.fs != nil {
				err = errors.Join(err, s.fs.Close())
			}
			return nil, err
		}
	}
	return s, nil
}

// openStore opens the filter store with the given sync mode; bind (at
// Open) or attach (after catchUp's reopen) finds the filters in it.
func (s *Service) openStore(sync store.SyncMode) error {
	fs, err := store.Open(filepath.Join(s.dir, filtersDir), &store.Options{Sync: sync})
	if err != nil {
		return fmt.Errorf("kv: open filters: %w", err)
	}
	s.fs = fs
	return nil
}

// attach sets s.seen and s.live to the filters of generation s.gen,
// creating them if create, else failing with an error wrapping
// store.ErrNotFound if one is missing.
func (s *Service) attach(o Options, create bool) error {
	var err error
	if create {
		s.seen, err = s.fs.EnsureBloom(genName(seenName, s.gen), seenConfig(o))
		if err == nil {
			s.live, err = s.fs.EnsureCuckoo(genName(liveName, s.gen), liveConfig(o))
		}
	} else {
		s.seen, err = s.fs.Bloom(genName(seenName, s.gen))
		if err == nil {
			s.live, err = s.fs.Cuckoo(genName(liveName, s.gen))
		}
	}
	if err != nil {
		return fmt.Errorf("kv: open filters: %w", err)
	}
	return nil
}

// seenConfig is the configuration of the Bloom filter of keys ever put.
func seenConfig(o Options) store.BloomConfig {
	return store.BloomConfig{Capacity: o.Capacity, ErrorRate: o.ErrorRate}
}

// liveConfig is the configuration of the cuckoo filter of live keys.
func liveConfig(o Options) store.CuckooConfig { return store.CuckooConfig{Capacity: o.Capacity} }

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("kv: %w", err)
}

// Mode returns the mode the service was opened with.
func (s *Service) Mode() Mode { return s.mode }

// Stats returns the counters since Open.
func (s *Service) Stats() Stats {
	st := Stats{PebbleReads: s.pebbleReads.Load(), Skipped: s.skipped.Load(), Kept: s.kept.Load(), Replayed: uint64(s.replayed), Rebuilt: s.rebuilt, Groups: s.groups.Load()}
	if s.fs != nil {
		st.FilterSyncs = s.fs.Stats().WAL.Syncs
	}
	return st
}

// Close waits for the calls in progress and closes pebble and the filter
// store (which checkpoints). Later calls return ErrClosed; so does a second
// Close.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	var errs []error
	if err := s.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("kv: close pebble: %w", err))
	}
	if s.fs != nil {
		if err := s.fs.Close(); err != nil {
			errs = append(errs, fmt.Errorf("kv: close filters: %w", err))
		}
	}
	return errors.Join(errs...)
}

// enter takes s.mu shared for one call; the caller releases it with
// s.mu.RUnlock. It fails with ErrClosed after Close.
func (s *Service) enter() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	return nil
}
