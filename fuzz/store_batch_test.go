package fuzz

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/filterstore/filterstore/store"
)

// FuzzStoreOps' op 17: a store.Batch of up to maxBatchOps ops over the
// Bloom filter, the counting filter, the bitmap and (at most once per
// batch, so that the layer its add lands in can be read from the layers'
// item counts) the cuckoo filter, committed at once and checked against
// the models: each answer as the single op's, ops on one filter seeing
// the ones before them, and on a failure nothing changed (bar the empty
// layers planning may have grown) and the error naming the first op that
// cannot apply.

const maxBatchOps = 8

// batchOpKind is one op of a fuzzed batch.
type batchOpKind uint8

const (
	fbBloomAdd batchOpKind = iota
	fbCountingAdd
	fbCountingDelete
	fbBitmapSet
	fbBitmapClear
	fbCuckooAdd
	fbCuckooDelete
	numBatchOpKinds
)

type fuzzBatchOp struct {
	kind batchOpKind
	k    key
	off  uint64
}

// modelSnapshot is a copy of the models a batch changes, other than the
// cuckoo model (changed only after a batch commits).
type modelSnapshot struct {
	bloom     []refBloom
	countCtr  []uint8
	countN    uint64
	countKeys map[uint64]int
	misused   bool
	bits      []bool
	bitsN     uint64
}

func (w *storeWorld) snapshot() modelSnapshot {
	s := modelSnapshot{countCtr: slices.Clone(w.count.ctr), countN: w.count.items,
		countKeys: maps.Clone(w.countKeys), misused: w.misused,
		bits: slices.Clone(w.bits.bits), bitsN: w.bits.count}
	for _, r := range w.bloomRefs {
		c := *r
		c.words = slices.Clone(r.words)
		c.pos = nil
		s.bloom = append(s.bloom, c)
	}
	return s
}

func (w *storeWorld) restore(s modelSnapshot) {
	w.bloomRefs = w.bloomRefs[:0]
	for _, r := range s.bloom {
		c := r
		c.words = slices.Clone(r.words)
		w.bloomRefs = append(w.bloomRefs, &c)
	}
	copy(w.count.ctr, s.countCtr)
	w.count.items = s.countN
	w.countKeys = maps.Clone(s.countKeys)
	w.misused = s.misused
	copy(w.bits.bits, s.bits)
	w.bits.count = s.bitsN
}

// readBatch reads a batch's ops from the input.
func (w *storeWorld) readBatch(in *input, ks *keySpace) []fuzzBatchOp {
	var ops []fuzzBatchOp
	cuckooOp := false
	for range 1 + in.intn(maxBatchOps) {
		op := fuzzBatchOp{kind: batchOpKind(in.intn(int(numBatchOpKinds)))}
		if op.kind >= fbCuckooAdd {
			if cuckooOp {
				op.kind = fbBloomAdd
			}
			cuckooOp = true
		}
		switch op.kind {
		case fbBitmapSet, fbBitmapClear:
			op.off = uint64(in.u16()) % uint64(len(w.bits.bits)+70)
		default:
			op.k = ks.pick(in)
		}
		ops = append(ops, op)
	}
	return ops
}

// simulate applies ops to the models in order and returns the expected
// answers, the index of the first op the models say cannot apply (len(ops)
// if none) and its error. A cuckoo add is expected to apply (the models
// cannot tell when the filter is full); a cuckoo op changes no model.
func (w *storeWorld) simulate(ops []fuzzBatchOp) (want []bool, failAt int, wantErr error) {
	for i, op := range ops {
		var ok bool
		var err error
		switch op.kind {
		case fbBloomAdd:
			ok, err = w.bloomAdd(op.k.h)
		case fbCountingAdd:
			if w.countCfg.NonScaling && w.count.items >= w.countCfg.Capacity {
				err = store.ErrFull
				break
			}
			w.count.add(op.k.h)
			w.countKeys[op.k.h]++
			ok = true
		case fbCountingDelete:
			if ok = w.count.del(op.k.h); ok {
				if w.countKeys[op.k.h] == 0 {
					w.misused = true
				} else {
					w.countKeys[op.k.h]--
				}
			}
		case fbBitmapSet, fbBitmapClear:
			if op.off >= uint64(len(w.bits.bits)) {
				err = store.ErrInvalid
				break
			}
			ok = w.bits.set(op.off, op.kind == fbBitmapSet)
		case fbCuckooAdd:
			ok = true
		case fbCuckooDelete:
			switch m := w.cuckooMatches(op.k.h); {
			case len(m) > 1:
				err = store.ErrAmbiguous
			default:
				ok = len(m) == 1
			}
		}
		if err != nil {
			return want, i, err
		}
		want = append(want, ok)
	}
	return want, len(ops), nil
}

// cuckooMatches returns the model's layers that hold h's fingerprint.
func (w *storeWorld) cuckooMatches(h uint64) []int {
	var matches []int
	for i, l := range w.cuckoo.layers {
		if l.count(h) > 0 {
			matches = append(matches, i)
		}
	}
	return matches
}

// batchErrAt reports whether err names batch op i as the one that failed.
func batchErrAt(err error, i int) bool {
	return err != nil && strings.Contains(err.Error(), fmt.Sprintf("batch op %d ", i))
}

// batch runs op 17: a batch read from the input, committed and checked.
func (w *storeWorld) batch(ops int, in *input, ks *keySpace) {
	w.t.Helper()
	bops := w.readBatch(in, ks)
	snap := w.snapshot()
	cuckooBefore := w.cuckooLayerItems()
	want, failAt, wantErr := w.simulate(bops)

	bt := w.s.NewBatch()
	for _, op := range bops {
		switch op.kind {
		case fbBloomAdd:
			if op.k.b != nil {
				bt.BloomAdd(w.b, op.k.b)
			} else {
				bt.BloomAddHash(w.b, op.k.h)
			}
		case fbCountingAdd:
			bt.CountingAddHash(w.n, op.k.h)
		case fbCountingDelete:
			bt.CountingDeleteHash(w.n, op.k.h)
		case fbBitmapSet:
			bt.BitmapSet(w.m, op.off)
		case fbBitmapClear:
			bt.BitmapClear(w.m, op.off)
		case fbCuckooAdd:
			if op.k.b != nil {
				bt.CuckooAdd(w.c, op.k.b)
			} else {
				bt.CuckooAddHash(w.c, op.k.h)
			}
		case fbCuckooDelete:
			bt.CuckooDeleteHash(w.c, op.k.h)
		}
	}
	got, err := bt.Commit()

	// A cuckoo add before the predicted failure may fail first, when the
	// filter is full.
	cuckooAt := slices.IndexFunc(bops, func(op fuzzBatchOp) bool { return op.kind == fbCuckooAdd })
	if err != nil && errors.Is(err, store.ErrFull) && cuckooAt >= 0 && cuckooAt < failAt && batchErrAt(err, cuckooAt) {
		failAt, wantErr = cuckooAt, store.ErrFull
	}
	if wantErr != nil {
		if got != nil || !errors.Is(err, wantErr) || !batchErrAt(err, failAt) {
			w.fatalf("op %d: batch %+v = %v, %v; want op %d to fail with %v", ops, bops, got, err, failAt, wantErr)
		}
		// Nothing changed, bar the empty layers planning the ops before
		// the failing one grew: replay those on the models to count them.
		w.restore(snap)
		w.simulate(bops[:failAt])
		grown := len(w.bloomRefs)
		w.restore(snap)
		for len(w.bloomRefs) < grown {
			w.growBloom()
		}
		w.growCuckoo(ops, w.info("cuckoo", w.c), 0, false)
		after := w.cuckooLayerItems()
		if !slices.Equal(after[:len(cuckooBefore)], cuckooBefore) || slices.ContainsFunc(after[len(cuckooBefore):], func(n uint64) bool { return n != 0 }) {
			w.fatalf("op %d: failed batch %+v changed the cuckoo layers' items %v -> %v", ops, bops, cuckooBefore, after)
		}
	} else if err != nil || !slices.Equal(got, want) {
		w.fatalf("op %d: batch %+v = %v, %v; models %v", ops, bops, got, err, want)
	} else if cuckooAt >= 0 {
		w.growCuckoo(ops, w.info("cuckoo", w.c), 0, false)
		after := w.cuckooLayerItems()
		landed := -1
		for i := range after {
			var was uint64
			if i < len(cuckooBefore) {
				was = cuckooBefore[i]
			}
			switch {
			case after[i] == was:
			case after[i] == was+1 && landed < 0:
				landed = i
			default:
				w.fatalf("op %d: batch cuckoo add: layer items %v -> %v", ops, cuckooBefore, after)
			}
		}
		if landed < 0 || (len(after) > len(cuckooBefore) && landed != len(after)-1) {
			w.fatalf("op %d: batch cuckoo add: layer items %v -> %v", ops, cuckooBefore, after)
		}
		w.cuckoo.addAt(landed, bops[cuckooAt].k.h)
	} else if at := slices.IndexFunc(bops, func(op fuzzBatchOp) bool { return op.kind == fbCuckooDelete }); at >= 0 && got[at] {
		m := w.cuckooMatches(bops[at].k.h)
		w.cuckoo.deleteAt(m[0], bops[at].k.h)
		cuckooBefore[m[0]]--
		if after := w.cuckooLayerItems(); !slices.Equal(after, cuckooBefore) {
			w.fatalf("op %d: batch cuckoo delete (layer %d): layer items %v, want %v", ops, m[0], after, cuckooBefore)
		}
	}
	for _, op := range bops {
		if op.kind != fbBitmapSet && op.kind != fbBitmapClear {
			w.checkKey(ops, op.k)
		}
	}
}
