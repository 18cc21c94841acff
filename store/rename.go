package store

import "fmt"

// Rename gives the filter from the name to, in one catalog transaction:
// either the old state or the new one survives a crash, never a mix. A
// filter already called to is replaced (Redis RENAME): it leaves the
// catalog in the same transaction, and is then retired as Drop retires
// one — its handles answer lookups "maybe" and changes ErrClosed, and its
// files are removed (or, after a crash, by the next Open).
//
// Handles of from keep working: they are the same filter under its new
// name. Looking up from afterwards gives ErrNotFound. The filter's files
// are named by its id, so no file moves, and a filter of any kind may
// replace one of any kind. Renaming a filter to its own name changes
// nothing and returns nil (as RENAME does); ErrNotFound if it does not
// exist.
//
// Together with Load, it rebuilds a filter while the old one serves:
// create "users.next", Load it from a snapshot of the data, then
// Rename("users.next", "users").
//
// A broken or incomplete filter (a Load that did not end, or failed)
// answers every lookup "maybe": it may move to a free name (out of the
// way of a rebuild, keeping a broken filter's WAL records for its
// restored file), but it replaces no filter. Renaming one over another
// filter fails with its error (wrapping ErrCorrupt or ErrIncomplete) and
// changes nothing: had a rebuild's Load failed, its Rename would
// otherwise swap the working filter for one that answers "maybe". A
// Rename over another filter while a Load of from runs waits for the
// Load to end (as an Add to from does), then replaces the filter only if
// the Load completed; a Rename to a free name does not wait.
//
// Rename waits for in-flight changes, as Drop and Checkpoint do. An error
// removing the replaced filter's files is returned after the rename is
// done (the next Open removes them). A failed
// catalog commit fails the store (the rename may or may not be on disk;
// the next Open shows which), except a catalog lock another process held
// past 5 s, which changes nothing.
func (s *Store) Rename(from, to string) error {
	if err := s.nilErr(); err != nil {
		return err
	}
	if err := checkName(from); err != nil {
		return err
	}
	if err := checkName(to); err != nil {
		return err
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("store: rename %q: %w", from, ErrReadOnly)
	}
	for {
		loading, err := s.rename(from, to)
		if loading == nil {
			return err
		}
		// from is loading and would replace a filter: whether it may
		// depends on how the Load ends. Its batches take the gate, so
		// wait without it.
		<-loading
	}
}

// rename is Rename once the arguments are checked; if from is being
// loaded and to exists, it changes nothing and returns the Load's channel
// (closed when the Load ends) for Rename to wait on.
func (s *Store) rename(from, to string) (loading chan struct{}, err error) {
	// Exclusive: no mutation, Load batch, new layer or checkpoint writes
	// the catalog entry of either filter by name meanwhile, and no
	// mutation of to is in flight when its mappings go.
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.closed.Load() {
		return nil, fmt.Errorf("store: rename %q: %w", from, ErrClosed)
	}
	if err := s.failed(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.filters[from]
	if !ok {
		return nil, fmt.Errorf("store: rename %q: %w", from, ErrNotFound)
	}
	if from == to {
		return nil, nil
	}
	old, replaced := s.filters[to]
	if replaced {
		b := h.base()
		b.mu.Lock()
		loading := b.loading
		b.mu.Unlock()
		if loading != nil {
			return loading, nil
		}
		if err := b.unusable(); err != nil {
			return nil, fmt.Errorf("store: rename %q over %q: %w", from, to, err)
		}
	}
	if err := s.cat.RenameFilter(from, to); err != nil {
		return nil, s.catalogFailed(err)
	}
	if replaced {
		s.removeFilter(to, old)
	}
	delete(s.filters, from)
	s.filters[to] = h // same id: byID keeps it
	h.base().nm.Store(&to)
	if !replaced {
		return nil, nil
	}
	if err := s.discard(old); err != nil {
		return nil, fmt.Errorf("store: rename %q to %q: renamed, but the files of the filter it replaced were not removed (the next Open removes them): %w", from, to, err)
	}
	return nil, nil
}
