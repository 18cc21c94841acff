package kv

import (
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
// already, which pebble's own commit pipeline shares, and groups of its
// puts (one external record and one pebble batch per group, the next
// group starting when the last one's commit returned, or as soon as its
// record was encoded) ran no faster on the 2-vCPU VM (kvbench, 3 rounds
// each: 0.66-0.84x and 0.71-0.76x of pebble alone, against 0.69-0.96x
// for one put at a time in a 5-round run).

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
	if s.groupStart != nil {
		s.groupStart()
	}
	s.groups.Add(1)
	s.commitGroup(group)
	g.mu.Lock()
	if len(g.pending) > 0 {
		g.pending[0].done <- groupMsg{lead: true}
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	return (<-p.done).err
}

// commitGroup makes the puts of group durable, filters first, and sends
// each its result. The next group waits until both writes are done: it
// could commit its filter changes while this one writes pebble, but on
// the 2-vCPU VM that made groups smaller (5.0 puts against 8.2), the
// filter syncs more frequent (0.200 a put against 0.121) and the puts no
// faster (kvbench, batch mode, 0.51x of pebble alone either way). If
// the group's filter Batch fails (an op it cannot apply, such as a full
// filter that may not grow), nothing of it was logged, and each put of a
// larger group commits alone to learn its own error.
func (s *Service) commitGroup(group []*groupPut) {
	finish := func(err error) {
		for _, p := range group {
			p.done <- groupMsg{err: err}
		}
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
				finish(fmt.Errorf("kv: put: filters: %w", err))
				return
			}
			for _, p := range group {
				p.done <- groupMsg{err: s.inOrder(s.writeFilters, s.writePebble, p.c)}
			}
			return
		}
	}
	if err := s.between(); err != nil {
		finish(err)
		return
	}
	pb := s.db.NewBatch()
	defer pb.Close()
	for _, p := range group {
		if err := pb.Set(p.c.key, p.c.value, nil); err != nil {
			finish(fmt.Errorf("kv: put: pebble: %w", err))
			return
		}
	}
	if err := pb.Commit(pebble.Sync); err != nil {
		finish(fmt.Errorf("kv: put: pebble: %w", err))
		return
	}
	finish(nil)
}
