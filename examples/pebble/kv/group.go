package kv

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// Write groups (ModeBatch puts). A put's two durable writes, the filters'
// and then pebble's, are each shared with the puts that commit at the
// same time, as a storage engine's write group shares one log write
// (RocksDB's write thread): the first put to arrive leads, takes every
// put queued behind it, commits their filter changes as one filterstore
// Batch (one WAL record, one durability wait) and then their keys as one
// pebble batch (pebble.Sync), and hands the lead to the first put that
// queued meanwhile. Without it each put waits in two queues one after the
// other, the filter store's group commit and pebble's, and the puts that
// share a sync in one queue are split again in the next: both logs sync
// smaller groups (issue #12's kvbench measured 4.3 puts per filter sync
// and 4.4 per pebble sync, against 7.6 per sync for pebble alone).
//
// The order of the two writes is a single put's: every filter change of
// the group is durable before any of its keys reaches pebble. A put's key
// lock is held while it waits in the group, so no two puts of a group
// touch one key. Deletes do not join groups: theirs is the other order.
//
// ModeExternal's puts do not form groups: its put is one pebble commit
// already, which pebble's own commit pipeline shares (groups of them were
// tried and ran no faster: the example's README).

// errGroupPanicked is what the puts of a group whose commit panicked get.
var errGroupPanicked = errors.New("kv: put: the write group's commit panicked")

// putGroup queues the puts of ModeBatch for their write group.
type putGroup struct {
	mu      sync.Mutex
	pending []*groupPut
	leading bool // a put is committing a group
}

// groupPut is one put waiting in a group.
type groupPut struct {
	c    *change
	done chan groupMsg // the put's result, or the lead; buffered (1)
}

// groupMsg tells a waiting put its result, or that it leads the next group.
type groupMsg struct {
	err  error
	lead bool
}

// commitGrouped commits the put c of ModeBatch in a write group and
// returns its result. Called with c's key lock held.
func (s *Service) commitGrouped(c *change) error {
	g := &s.group
	p := &groupPut{c: c, done: make(chan groupMsg, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, p)
	if g.leading {
		g.mu.Unlock()
		m := <-p.done
		if !m.lead {
			return m.err
		}
		g.mu.Lock()
	}
	// Leading: p is among the pending puts, which form the group.
	g.leading = true
	group := g.pending
	g.pending = nil
	g.mu.Unlock()
	s.leadGroup(group)
	return (<-p.done).err
}

// leadGroup commits group, sends each put its result and hands the lead
// to the first put queued meanwhile. If the commit panics (a bug), every
// put of the group is told so and the lead is handed on while the panic
// goes on (the deferred call runs either way): no put waits forever.
func (s *Service) leadGroup(group []*groupPut) {
	var errs []error // nil until commitGroup returns
	defer func() {
		for i, p := range group {
			err := errGroupPanicked
			if errs != nil {
				err = errs[i]
			}
			p.done <- groupMsg{err: err}
		}
		g := &s.group
		g.mu.Lock()
		if len(g.pending) > 0 {
			g.pending[0].done <- groupMsg{lead: true}
		} else {
			g.leading = false
		}
		g.mu.Unlock()
	}()
	if s.groupStart != nil {
		s.groupStart()
	}
	s.groups.Add(1)
	errs = s.commitGroup(group)
}

// commitGroup makes the puts of group durable, filters first, and
// returns each put's result. The next group waits until both writes are
// done (overlapping the two groups' writes made the groups smaller and
// the puts no faster: the example's README). If the group's filter Batch
// fails (an op it cannot apply, such as a full filter that may not grow),
// nothing of it was logged, and each put of a larger group commits alone
// to learn its own error.
func (s *Service) commitGroup(group []*groupPut) []error {
	errs := make([]error, len(group))
	all := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	bt := s.fs.NewBatch()
	ops := 0
	for _, p := range group {
		if p.c.addSeen {
			bt.BloomAddHash(s.seen, p.c.hash)
			ops++
		}
		if p.c.addLive {
			bt.CuckooAddHash(s.live, p.c.hash)
			ops++
		}
	}
	if ops > 0 {
		if _, err := bt.Commit(); err != nil {
			if len(group) == 1 {
				return all(fmt.Errorf("kv: put: filters: %w", err))
			}
			for i, p := range group {
				errs[i] = s.inOrder(s.writeFilters, s.writePebble, p.c)
			}
			return errs
		}
	}
	if err := s.between(); err != nil {
		return all(err)
	}
	pb := s.db.NewBatch()
	defer pb.Close()
	for _, p := range group {
		if err := pb.Set(p.c.key, p.c.value, nil); err != nil {
			return all(fmt.Errorf("kv: put: pebble: %w", err))
		}
	}
	if err := pb.Commit(pebble.Sync); err != nil {
		return all(fmt.Errorf("kv: put: pebble: %w", err))
	}
	return all(nil)
}
