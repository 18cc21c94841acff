package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/filterstore/filterstore/store"
)

// The binding: pebble records which filters its writes went through: the
// filter store's id, the generation of the two filters in it, and the seq
// through which the filter log was trimmed, under the filter log's key of
// seq 0, which no record uses (seqs start at 1):
//
//	"\xff\xfffilterlog/" | 0 (u64)  ->  store id | trimmed through | generation (u64 each, big-endian)
//
// Generation 0's filters are "seen" and "live"; a rebuild makes the next
// generation's, "seen.N" and "live.N", and drops the older ones once the
// binding names the new ones.
//
// Open compares the binding with the filter store it opened, before any
// replay. A store of another id (DIR/filters emptied, or replaced by
// another directory), one that lacks the generation's filters (an older
// copy from before a rebuild), one whose ExternalDurable is below the
// trim (an older copy of itself put back after the log records it would
// need were deleted) would answer "absent" for keys pebble holds, and no
// replay can bring them back; a filter that is broken or incomplete
// answers "maybe", but every change to it fails. Open rebuilds both
// filters from pebble's keys instead (Stats.Rebuilt). A directory from before bindings has nothing to
// compare: there a filter log whose oldest record is past the store's
// ExternalDurable + 1 makes Open rebuild. And after its replay, Open
// rebuilds filters that are empty beside pebble's keys.
type binding struct {
	id, trimmed, gen uint64
	found            bool
}

// bindingKey is the binding's pebble key.
func bindingKey() []byte { return logKey(0) }

// genName is the name of filter base's generation gen.
func genName(base string, gen uint64) string {
	if gen == 0 {
		return base
	}
	return base + "." + strconv.FormatUint(gen, 10)
}

// readBinding returns the binding pebble holds (found false if none: a
// new directory, or one from before bindings).
func (s *Service) readBinding() (binding, error) {
	v, closer, err := s.db.Get(bindingKey())
	if errors.Is(err, pebble.ErrNotFound) {
		return binding{}, nil
	}
	if err != nil {
		return binding{}, fmt.Errorf("kv: filter binding: %w", err)
	}
	defer closer.Close()
	if len(v) != 24 {
		return binding{}, fmt.Errorf("kv: %w: the filter binding (pebble key %x) holds %d bytes, want 24", ErrCorrupt, bindingKey(), len(v))
	}
	be := binary.BigEndian
	return binding{id: be.Uint64(v), trimmed: be.Uint64(v[8:]), gen: be.Uint64(v[16:]), found: true}, nil
}

// setBinding adds to b the binding of the open filter store and s.gen,
// trimmed through seq trimmed.
func (s *Service) setBinding(b *pebble.Batch, trimmed uint64) error {
	v := binary.BigEndian.AppendUint64(nil, s.fs.ID())
	v = binary.BigEndian.AppendUint64(v, trimmed)
	v = binary.BigEndian.AppendUint64(v, s.gen)
	return b.Set(bindingKey(), v, nil)
}

// bind finds the filters at Open, before any replay: those the binding
// names, or, if they cannot be the ones pebble's writes went through,
// filters it rebuilds from pebble's keys (see binding); in a directory
// without a binding it records one.
func (s *Service) bind(o Options) error {
	bd, err := s.readBinding()
	if err != nil {
		return err
	}
	if !bd.found {
		return s.bindFirst(o)
	}
	s.gen = bd.gen
	if err := s.attach(o, false); errors.Is(err, store.ErrNotFound) {
		return s.rebuild(o, fmt.Sprintf("the filter store lacks generation %d's filters", bd.gen))
	} else if err != nil {
		return err
	}
	switch {
	case bd.id != s.fs.ID():
		return s.rebuild(o, fmt.Sprintf("the filter store is %016x, pebble's writes went through %016x", s.fs.ID(), bd.id))
	case s.fs.ExternalDurable() < bd.trimmed:
		return s.rebuild(o, fmt.Sprintf("the filter store holds the filter log through seq %d, but pebble deleted it through %d", s.fs.ExternalDurable(), bd.trimmed))
	}
	if why := s.unusable(); why != "" {
		return s.rebuild(o, why)
	}
	return s.dropOtherGens()
}

// bindFirst is bind for a directory without a binding: a new one, or one
// from before bindings, whose generation-0 filters it opens or creates.
func (s *Service) bindFirst(o Options) error {
	s.gen = 0
	if err := s.attach(o, true); err != nil {
		return err
	}
	why := s.unusable()
	if why == "" {
		var err error
		if why, err = s.logGap(); err != nil {
			return err
		}
	}
	if why != "" {
		return s.rebuild(o, why)
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := s.setBinding(b, s.fs.ExternalDurable()); err != nil {
		return fmt.Errorf("kv: filter binding: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("kv: filter binding: %w", err)
	}
	return nil
}

// unusable says why the filters cannot serve, or "" if they can: one is
// broken or incomplete (a Load that did not finish, an external add that
// did not fit), so its changes fail, or its lookups answer "maybe".
func (s *Service) unusable() string {
	for _, f := range []interface{ Info() (store.Info, error) }{s.seen, s.live} {
		in, err := f.Info()
		if err != nil {
			return fmt.Sprintf("a filter cannot describe itself: %v", err)
		}
		if in.State != "ok" {
			return fmt.Sprintf("filter %q is %s", in.Name, in.State)
		}
	}
	return ""
}

// logGap says why filters with no binding cannot be the ones pebble's
// writes went through, or "": the filter log's oldest record is past the
// store's ExternalDurable + 1 (an older copy put back after a trim), so
// the records between are gone.
func (s *Service) logGap() (string, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logKey(1), UpperBound: logEnd()})
	if err != nil {
		return "", fmt.Errorf("kv: filter log: %w", err)
	}
	why := ""
	if it.First() {
		if seq := binary.BigEndian.Uint64(it.Key()[len(filterLogPrefix):]); seq > s.fs.ExternalDurable()+1 {
			why = fmt.Sprintf("the filter log starts at seq %d, past the filter store's %d", seq, s.fs.ExternalDurable())
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return "", fmt.Errorf("kv: filter log: %w", err)
	}
	return why, nil
}

// rebuildEmpty rebuilds the filters, after Open's replay, if the cuckoo
// filter of live keys is still empty while pebble holds a key: a filter
// store made anew beside a pebble that went on, in a directory from
// before bindings, or pebble written without the filters. (Before the
// replay, a crash between a put's commit and its apply looks the same.)
func (s *Service) rebuildEmpty(o Options) error {
	if in, err := s.live.Info(); err != nil || in.Items > 0 {
		return nil // (a filter that cannot tell is unusable: bind saw to it)
	}
	var n uint64
	for _, err := range s.pebbleKeys(&n) {
		if err != nil {
			return fmt.Errorf("kv: pebble: %w", err)
		}
		return s.rebuild(o, "the filters are empty, but pebble holds keys")
	}
	return nil
}

// rebuild makes the next generation's filters, loads every key pebble
// holds into both, then, in one synced pebble batch, deletes the filter
// log (its records belong to the filters it replaces) and records the
// binding of the new generation; last it drops every other generation's
// filters. A crash before that batch leaves the old binding, so the next
// Open rebuilds again (dropping this attempt's filters first); one after
// it leaves filters of other generations that the next Open drops. After
// a rebuild the Bloom filter of keys ever put ("seen") holds the keys
// pebble held, not the ones deleted before.
func (s *Service) rebuild(o Options, why string) error {
	fail := func(err error) error { return fmt.Errorf("kv: rebuild filters (%s): %w", why, err) }
	gen := s.gen + 1
	for _, base := range []string{seenName, liveName} {
		if err := s.fs.Drop(genName(base, gen)); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fail(err)
		}
	}
	// Sized for the keys pebble holds, a quarter more, or the configured
	// capacity if larger: the filters being rebuilt may have run full.
	var n uint64
	for _, err := range s.pebbleKeys(&n) {
		if err != nil {
			return fail(err)
		}
	}
	o.Capacity = max(o.Capacity, n+n/4)
	seen, err := s.fs.CreateBloom(genName(seenName, gen), seenConfig(o))
	if err != nil {
		return fail(err)
	}
	live, err := s.fs.CreateCuckoo(genName(liveName, gen), liveConfig(o))
	if err != nil {
		return fail(err)
	}
	for _, load := range []func(iter.Seq2[[]byte, error]) error{seen.Load, live.Load} {
		n = 0
		if err := load(s.pebbleKeys(&n)); err != nil {
			return fail(err)
		}
	}
	s.gen, s.seen, s.live, s.rebuilt = gen, seen, live, n
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(logKey(1), logEnd(), nil); err != nil {
		return fail(err)
	}
	if err := s.setBinding(b, s.fs.ExternalDurable()); err != nil {
		return fail(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fail(err)
	}
	return s.dropOtherGens()
}

// dropOtherGens drops the filters of generations other than s.gen: the
// ones a rebuild replaced.
func (s *Service) dropOtherGens() error {
	infos, err := s.fs.List()
	if err != nil {
		return fmt.Errorf("kv: filters: %w", err)
	}
	for _, in := range infos {
		for _, base := range []string{seenName, liveName} {
			if isGen(in.Name, base) && in.Name != genName(base, s.gen) {
				if err := s.fs.Drop(in.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("kv: drop filter %q of an older generation: %w", in.Name, err)
				}
			}
		}
	}
	return nil
}

// isGen reports whether name is a generation's name of filter base.
func isGen(name, base string) bool {
	if name == base {
		return true
	}
	n, ok := strings.CutPrefix(name, base+".")
	if !ok {
		return false
	}
	_, err := strconv.ParseUint(n, 10, 64)
	return err == nil
}

// pebbleKeys yields every user key pebble holds (none of the filter
// log's), counting them in *n.
func (s *Service) pebbleKeys(n *uint64) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		it, err := s.db.NewIter(nil)
		if err != nil {
			yield(nil, err)
			return
		}
		stopped := false
		for ok := it.First(); ok; ok = it.Next() {
			if reserved(it.Key()) && !it.SeekGE(logEnd()) {
				break // the filter log ends pebble's keys
			}
			*n++
			if !yield(it.Key(), nil) {
				stopped = true
				break
			}
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil && !stopped {
			yield(nil, err)
		}
	}
}
