package main

import (
	"fmt"

	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// The WAL phase of verify: what recovery checks (wal.Scan: segment
// headers and their store id, every record's CRC-32C, LSNs up by exactly
// 1), then what each record says: it decodes, names a filter and layer the
// catalog holds (or held: see the second catalog read), and fits its
// geometry. The records after each filter's checkpoint become the overlay
// its layer files are read with.

// staleRecord is a WAL record naming a filter or layer the catalog read
// at the start did not hold: a writer may have created it since.
type staleRecord struct {
	rel   string
	off   int64
	lsn   uint64
	id    uint64
	layer int
}

func (v *verifier) phaseWAL() error {
	var storeID uint64
	if v.cat != nil {
		storeID = v.cat.StoreID
	}
	var pos []uint16 // scratch for Bloom bit positions
	res, err := scanWALAll(v.dir, storeID, v.prog, v.fnd, func(rel string, at wal.Position, payload []byte) {
		pos = v.walRecord(rel, at, payload, pos)
	})
	if err != nil {
		return err
	}
	v.res = res
	v.walProblems = v.fnd.count(sevProblem)
	for _, s := range res.Segments {
		if !s.Vanished {
			v.out.WALSegments++
		}
	}
	return nil
}

// walRecord checks one record (each part of a batch record) and, if it is
// after its filter's checkpoint, adds it to the pending set and its
// layer's overlay.
func (v *verifier) walRecord(rel string, at wal.Position, payload []byte, pos []uint16) []uint16 {
	v.out.WALRecords++
	rec, err := decodeWALRecord(payload)
	if err != nil {
		v.fnd.addFinding("decode", problem(rel, at.Offset, "record LSN %d does not decode: %v", at.LSN, err))
		return pos
	}
	if v.cat == nil {
		return pos
	}
	for r := range rec.Ops() { // a batch record's parts, in order
		if v.target != nil && r.FilterID != v.target.ID {
			continue
		}
		f := v.byID[r.FilterID]
		if f == nil || r.Layer >= len(f.Layers) {
			v.stale = append(v.stale, staleRecord{rel, at.Offset, at.LSN, r.FilterID, r.Layer})
			continue
		}
		checkRecord(v.fnd, rel, at.Offset, at.LSN, f, r)
		if at.LSN > f.SyncedLSN { // not in the filter's files yet
			if l := v.pend.add(at.LSN, r); l != nil {
				pos = addToOverlay(l, f.Layers[r.Layer].Header, r, pos)
			}
		}
	}
	return pos
}

// checkRecord checks that a WAL record fits the filter layer it names.
func checkRecord(fnd *findings, rel string, off int64, lsn uint64, f *filterRecord, r walRecord) {
	switch {
	case r.Op == walOpHash && f.Kind != mmapbits.KindBloom:
		fnd.addFinding("record", problem(rel, off, "record LSN %d is a Bloom add (a key hash), but filter %s is a %s filter", lsn, fmtKey(f.Name), f.Kind))
		return
	case r.Op == walOpWords && f.Kind == mmapbits.KindBloom:
		fnd.addFinding("record", problem(rel, off, "record LSN %d carries word after-images, but filter %s is a bloom filter (logged as key hashes)", lsn, fmtKey(f.Name)))
		return
	case r.Op != walOpWords:
		return
	}
	g, err := geometryOf(f.Layers[r.Layer].Header)
	if err != nil {
		return // the layer file's check reports it
	}
	for _, w := range r.Writes {
		if msg := badWordWrite(g, w.Index, w.Value); msg != "" {
			fnd.addFinding("record", problem(rel, off, "record LSN %d, for %s filter %s layer %d, %s", lsn, g.kind, fmtKey(f.Name), r.Layer, msg))
		}
	}
}

// badWordWrite says what is wrong with writing value to word i of a layer
// of geometry g, or "".
func badWordWrite(g geom, i, value uint64) string {
	switch {
	case i >= g.words:
		return fmt.Sprintf("writes word %d, beyond its %d words (%s)", i, g.words, g.sizeDesc())
	case g.kind == mmapbits.KindCuckoo:
		if used := uint(g.b * g.f); used < 64 && value>>used != 0 {
			return fmt.Sprintf("writes %#016x to bucket %d: bits at and above b*f = %d must be zero", value, i, used)
		}
	case g.kind == mmapbits.KindBitmap:
		if i == g.words-1 && g.size%64 != 0 && value>>(g.size%64) != 0 {
			return fmt.Sprintf("writes %#016x to the last word: bits at offsets >= the size %d must be zero", value, g.size)
		}
	}
	return ""
}

// checkWALStart reports records missing between the oldest checkpoint a
// filter's files reflect and the first segment, as Open does: recovery
// needs them. It need not know of any record after them: a catalog older
// than a Load is missing the Load's record once a checkpoint after the
// Load (Close's, say) removed its segment.
func checkWALStart(dir string, fnd *findings, res *wal.ScanResult, cat *catalogSnapshot) {
	if res == nil {
		return
	}
	need, who := cat.CheckpointLSN, "the checkpoint is at"
	for _, f := range cat.Filters {
		if f.SyncedLSN < need {
			need, who = f.SyncedLSN, fmt.Sprintf("the files of filter %s reflect LSN", fmtKey(f.Name))
		}
	}
	var first *wal.SegmentInfo
	for i := range res.Segments {
		if s := &res.Segments[i]; !s.Vanished {
			first = s
			break
		}
	}
	if first != nil && first.FirstLSN > need+1 {
		fnd.addFinding("wal-start", problem(walRel(dir, first.Name), 0, "the WAL starts at LSN %d but %s %d: records %d..%d are missing (catalog.db older than the WAL, put back from a copy, or WAL segments removed)",
			first.FirstLSN, who, need, need+1, first.FirstLSN-1))
	}
}
