package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/filterstore/filterstore/bloom"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// This file reads a store's WAL through wal.Scan, the one reader that
// recovery and the store's read-only open use, so inspect cannot disagree
// with them about what is valid. Every scan is Live: a writer may be
// appending, rotating and deleting segments meanwhile.

// walRel is the path of the WAL file name relative to the store directory.
func walRel(dir, name string) string { return relPath(dir, filepath.Join(walDir(dir), name)) }

// scanWALAll reads every segment, going on after problems (KeepGoing),
// adds each problem, torn tail and leftover temporary file to fnd, and
// calls visit for every valid record, in file order. Only an I/O error is
// returned.
func scanWALAll(dir string, storeID uint64, prog *progress, fnd *findings, visit func(rel string, pos wal.Position, payload []byte)) (*wal.ScanResult, error) {
	opts := wal.ScanOptions{StoreID: storeID, Live: true, KeepGoing: true}
	res, err := wal.Scan(walDir(dir), opts, func(pos wal.Position, p []byte) error {
		rel := walRel(dir, pos.Segment)
		prog.setCurrent(rel)
		prog.add(wal.RecordHeaderSize + int64(len(p)))
		visit(rel, pos, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, c := range res.Problems {
		what := ""
		if c.Offset == 0 { // records start after the header
			what = "segment header: "
		}
		fnd.addFinding("wal", problem(walRel(dir, c.Segment), c.Offset, "%s%s", what, c.Reason))
	}
	for _, s := range res.Segments {
		if t := s.Tail; t != nil && !t.Zero { // zeros: space the writer reserved, no record
			fnd.addFinding("tail", note(walRel(dir, s.Name), t.Offset, "torn tail of %d bytes (%s): a writer may be appending; otherwise the next writer Open truncates it",
				s.Size-t.Offset, t.Reason))
		}
	}
	for _, t := range res.Tmp {
		fnd.addFinding("tmp", note(walRel(dir, t), -1, "temporary file: a segment being created or rewritten, or a leftover the next writer Open removes"))
	}
	return res, nil
}

// walSizes lists the WAL segments of the store in dir with their sizes; a
// missing WAL directory has none, an unreadable one gives nil.
func walSizes(dir string) map[string]int64 {
	ents, err := os.ReadDir(walDir(dir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	sizes := map[string]int64{}
	for _, ent := range ents {
		if _, ok := wal.ParseSegmentName(ent.Name()); !ok {
			continue
		}
		info, err := ent.Info()
		if err != nil {
			return nil
		}
		sizes[ent.Name()] = info.Size()
	}
	return sizes
}

// sameWAL reports whether a second scan of the WAL of the store in dir,
// after the scan res, finds exactly what res found: the same segments, each
// with the same records ending at the same offset. Nothing was appended,
// rotated or removed since. File sizes cannot tell: a writer reserves its
// last segment's space ahead of its records and writes into it.
func sameWAL(dir string, res *wal.ScanResult) bool {
	again, err := wal.Scan(walDir(dir), wal.ScanOptions{Live: true, KeepGoing: true}, nil)
	if err != nil || len(again.Segments) != len(res.Segments) || again.Next != res.Next {
		return false
	}
	for i, s := range res.Segments {
		a := again.Segments[i]
		if s.Vanished || s.Skipped || a.Vanished || a.Name != s.Name || a.Records != s.Records ||
			a.Last != s.Last || recordsEnd(a) != recordsEnd(s) {
			return false
		}
	}
	return true
}

// recordsEnd is where the records of a scanned segment end.
func recordsEnd(s wal.SegmentInfo) int64 {
	if s.Tail != nil {
		return s.Tail.Offset
	}
	return s.Size
}

// pendingFilter is what the WAL records after a filter's checkpoint (its
// SyncedLSN) say about it.
type pendingFilter struct {
	records  int
	byOp     map[walOp]int
	writes   int // word writes
	firstLSN uint64
	lastLSN  uint64
	layers   map[int]*pendingLayer
	loadLSN  uint64 // of a load record after the checkpoint (the filter opens incomplete), or 0
}

// pendingLayer is the records after the checkpoint for one layer.
type pendingLayer struct {
	records int
	delta   int64    // change of the layer's item count replay makes
	ov      *overlay // nil unless requested
}

// pendingSet is the WAL records each filter id has after its checkpoint.
type pendingSet struct {
	total int // records after the catalog's checkpoint
	byID  map[uint64]*pendingFilter
	res   *wal.ScanResult
}

func (p *pendingSet) of(id uint64) *pendingFilter {
	if f := p.byID[id]; f != nil {
		return f
	}
	return &pendingFilter{byOp: map[walOp]int{}, layers: map[int]*pendingLayer{}}
}

// add counts record r (a lone record or a batch record's part), at lsn,
// for its filter and layer, and returns that layer's counts: nil for a
// load record, which changes no layer.
func (p *pendingSet) add(lsn uint64, r walRecord) *pendingLayer {
	f := p.byID[r.FilterID]
	if f == nil {
		f = p.of(r.FilterID)
		f.firstLSN = lsn
		p.byID[r.FilterID] = f
	}
	if r.Op == walOpLoad {
		// A Load began, or an external op was skipped, after the
		// checkpoint: the writer's Open makes the filter incomplete, and
		// its replay skips the filter's records before this one (their
		// after-images predate the Load), so they are not pending. The
		// overlays they built stay: verify then leaves the pages they
		// changed out of its checksum check, as before. The record
		// changes no layer.
		f.records, f.writes, f.firstLSN = 0, 0, lsn
		clear(f.byOp)
		for _, l := range f.layers {
			l.records, l.delta = 0, 0
		}
		f.records++
		f.byOp[r.Op]++
		f.lastLSN, f.loadLSN = lsn, lsn
		return nil
	}
	f.records++
	f.byOp[r.Op]++
	f.writes += len(r.Writes)
	f.lastLSN = lsn
	l := f.layers[r.Layer]
	if l == nil {
		l = &pendingLayer{}
		f.layers[r.Layer] = l
	}
	l.records++
	if r.Op == walOpHash {
		l.delta++
	} else {
		l.delta += int64(r.Delta)
	}
	return l
}

// lastLoads returns, by filter id, the LSN of the last load record after
// the filter's checkpoint in the WAL of dir, which cat describes: replay
// skips the filter's records before it. A WAL that cannot be read gives
// what was read (the caller's own scan reports the problem).
func lastLoads(dir string, cat *catalogSnapshot, byID map[uint64]*filterRecord) map[uint64]uint64 {
	loads := map[uint64]uint64{}
	from := cat.CheckpointLSN
	for _, f := range cat.Filters {
		from = min(from, f.SyncedLSN)
	}
	opts := wal.ScanOptions{From: from + 1, StoreID: cat.StoreID, Live: true, KeepGoing: true}
	_, _ = wal.Scan(walDir(dir), opts, func(at wal.Position, payload []byte) error {
		if len(payload) == 0 || walOp(payload[0]) != walOpLoad {
			return nil
		}
		if r, err := decodeWALRecord(payload); err == nil && at.LSN > syncedLSN(cat, byID, r.FilterID) {
			loads[r.FilterID] = at.LSN
		}
		return nil
	})
	return loads
}

// syncedLSN returns the LSN the files of filter id reflect: its
// SyncedLSN; for an id below the catalog's next id that it does not hold
// (dropped: replay skips its records), every LSN; for one at or above it
// (created by a live writer after the catalog was read), the checkpoint.
func syncedLSN(cat *catalogSnapshot, byID map[uint64]*filterRecord, id uint64) uint64 {
	if f := byID[id]; f != nil {
		return f.SyncedLSN
	}
	if id < cat.NextID {
		return math.MaxUint64
	}
	return cat.CheckpointLSN
}

// filtersByID indexes the filters of cat.
func filtersByID(cat *catalogSnapshot) map[uint64]*filterRecord {
	byID := map[uint64]*filterRecord{}
	for i := range cat.Filters {
		byID[cat.Filters[i].ID] = &cat.Filters[i]
	}
	return byID
}

// scanPending reads the WAL records after each filter's checkpoint; the
// first problem ends the scan with an error (a torn tail ends it
// quietly). With overlays, it also builds for every filter of cat the
// words those records change: after-images, and the bits of Bloom adds.
func scanPending(dir string, cat *catalogSnapshot, overlays bool) (*pendingSet, error) {
	p := &pendingSet{byID: map[uint64]*pendingFilter{}}
	byID := filtersByID(cat)
	from := cat.CheckpointLSN // the oldest checkpoint a filter's files reflect
	for _, f := range cat.Filters {
		from = min(from, f.SyncedLSN)
	}
	var pos []uint16
	opts := wal.ScanOptions{From: from + 1, StoreID: cat.StoreID, Live: true}
	res, err := wal.Scan(walDir(dir), opts, func(at wal.Position, payload []byte) error {
		rec, err := decodeWALRecord(payload)
		if err != nil {
			return fmt.Errorf("%s offset %d (LSN %d): %w", walRel(dir, at.Segment), at.Offset, at.LSN, err)
		}
		if at.LSN > cat.CheckpointLSN {
			p.total++
		}
		for r := range rec.Ops() { // a batch record's parts, in order
			if at.LSN <= syncedLSN(cat, byID, r.FilterID) {
				continue // in the filter's files already
			}
			l := p.add(at.LSN, r)
			fr := byID[r.FilterID]
			if overlays && l != nil && fr != nil && r.Layer < len(fr.Layers) {
				pos = addToOverlay(l, fr.Layers[r.Layer].Header, r, pos)
			}
		}
		return nil
	})
	p.res = res
	return p, err
}

// addToOverlay records in l's overlay the words record r changes in a
// layer with header h: after-images, or the bits of a Bloom add. pos is
// scratch space, returned for reuse.
func addToOverlay(l *pendingLayer, h mmapbits.Header, r walRecord, pos []uint16) []uint16 {
	if l.ov == nil {
		l.ov = &overlay{set: map[uint64]uint64{}, or: map[uint64]uint64{}}
	}
	switch {
	case r.Op == walOpHash && h.Kind == mmapbits.KindBloom:
		g := bloom.Geometry{Blocks: h.Size, K: h.K, Salt: h.Salt, Derivation: bloom.Derivation(h.Derivation)}
		if g.Validate() != nil {
			return pos
		}
		var block uint64
		block, pos = g.Locate(r.Hash, pos[:0])
		for _, q := range pos {
			l.ov.or[block*bloom.BlockWords+uint64(q)/64] |= 1 << (q % 64)
		}
	case r.Op == walOpWords:
		for _, w := range r.Writes {
			l.ov.set[w.Index] = w.Value
			delete(l.ov.or, w.Index)
		}
	}
	return pos
}
