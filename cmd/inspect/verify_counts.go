package main

import (
	"fmt"
	"math"

	"github.com/filterstore/filterstore/mmapbits"
)

// The item-count and open phases of verify.

// phaseCounts compares each layer's data with its item count, when no
// writer changed the store meanwhile and the WAL is whole (a damaged WAL
// hides changes: counts cannot agree then).
func (v *verifier) phaseCounts() error {
	if v.cat == nil {
		return nil
	}
	v.out.CountsCheck = v.quiescent && v.walProblems == 0
	for ji, j := range v.jobs {
		loadLSN := v.pend.of(j.f.ID).loadLSN
		switch {
		case j.i != 0:
		case j.f.Incomplete:
			v.fnd.addFinding("incomplete", note("catalog.db", -1, "filter %s is incomplete (a bulk Load was interrupted, or is running now): its lookups answer maybe; Drop and re-create it",
				fmtKey(j.f.Name)))
		case loadLSN != 0:
			// The catalog says complete: a Load began and the process
			// died before the catalog marked it (or is starting one
			// now), or catalog.db is older than the WAL. Either way the
			// writer's Open makes the filter incomplete.
			v.fnd.addFinding("incomplete", note("catalog.db", -1, "filter %s opens incomplete: a WAL load record after its checkpoint (LSN %d) says a Load of it began, or an external op on it was skipped, though the catalog says it is complete (a writer died, or is starting a Load, before marking it in the catalog; or catalog.db is older than the WAL, put back from a copy); its lookups will answer maybe: Drop and re-create it",
				fmtKey(j.f.Name), loadLSN))
		}
		if v.out.CountsCheck && v.scans[ji] != nil {
			v.checkStampPastWAL(j, v.stamps[ji])
		}
		s := v.scans[ji]
		if !v.out.CountsCheck || j.f.Incomplete || loadLSN != 0 || s == nil {
			continue
		}
		var delta int64
		if pl := v.pend.of(j.f.ID).layers[j.i]; pl != nil {
			delta = pl.delta
		}
		checkCounts(v.fnd, j, s, delta)
	}
	if v.walProblems > 0 {
		v.fnd.addFinding("changed", note("", -1, "the WAL has problems: item counts were not cross-checked against the data"))
	} else if !v.quiescent {
		v.fnd.addFinding("changed", note("", -1, "the store changed while it was being verified (a writer is active): item counts were not cross-checked against the data"))
	}
	return nil
}

// checkStampPastWAL reports a layer file whose stamp st (read before the
// second WAL read) is past the WAL's end while the WAL holds records past
// the catalog's checkpoint, as the store's writer Open does (it opens the
// filter broken: store/recover.go, breakNewerThanWAL): the file holds
// changes the WAL does not, a plain copy of a live store taken WAL first
// (or WAL writes the disk lost), and replaying the WAL would put newer
// words back to older values. Only when no writer changed the WAL during
// the scrub (quiescent): a live writer raises the stamps of the files it
// writes as their records become durable.
func (v *verifier) checkStampPastWAL(j layerJob, st uint64) {
	if v.res == nil || len(v.res.Segments) == 0 || v.res.Next == 0 || v.res.Next-1 <= v.cat.CheckpointLSN {
		return
	}
	if end := v.res.Next - 1; st > end {
		v.fnd.addFinding("stamp", problem(j.rel, mmapbits.StampOffset, "the file is newer than the WAL: its stamp says it holds changes through LSN %d, and the WAL ends at LSN %d (a copy of the store taken while its writer ran, the WAL copied before the filter files; or WAL writes the disk lost): a writer's Open makes filter %s broken",
			st, end, fmtKey(j.f.Name)))
	}
}

// checkCounts compares a layer's data with its item count: the catalog's
// at the checkpoint plus the WAL's changes after it.
func checkCounts(fnd *findings, j layerJob, s *layerScan, delta int64) {
	exp := int64(j.l.Items) + delta
	src := fmt.Sprintf("%d at the checkpoint %+d from the WAL", j.l.Items, delta)
	if exp < 0 {
		fnd.addFinding("count", problem(j.rel, -1, "item count is negative: %s", src))
		return
	}
	n := int64(s.set)
	switch s.g.kind {
	case mmapbits.KindBloom:
		if n < exp {
			fnd.addFinding("count", problem(j.rel, -1, "%d bits set, fewer than its %d items (%s): every counted add sets at least one bit", n, exp, src))
		} else if s.estItems > staleBloomBound(exp, s.estItems) {
			// A note, not a problem: nothing is lost, and a power loss
			// can take the WAL records of adds whose bits reached the
			// file (SyncInterval), which undercounts the same way.
			fnd.addFinding("count", note(j.rel, -1,
				"%d bits set, which about %.0f items set (estimated from the set bits per block), not its %d (%s): the count is stale (a catalog.db copied before the last Load and put back, or adds whose WAL records a power loss took after their bits reached the file), so the layer takes more items than its capacity, and a higher false-positive rate than the configured one, before the filter grows",
				n, s.estItems, exp, src))
		}
	case mmapbits.KindCuckoo:
		if n != exp {
			fnd.addFinding("count", problem(j.rel, -1, "%d slots in use, but it holds %d items (%s)", n, exp, src))
		}
	case mmapbits.KindBitmap:
		if n != exp {
			fnd.addFinding("count", problem(j.rel, -1, "%d bits set, but the count is %d (%s)", n, exp, src))
		}
	case mmapbits.KindCounting:
		if s.saturated == 0 && int64(s.sum) != exp*int64(s.g.k) {
			fnd.addFinding("count", problem(j.rel, -1, "counters sum to %d, but %d items x k=%d is %d (%s; no counter is saturated, so they must agree)",
				s.sum, exp, s.g.k, exp*int64(s.g.k), src))
		}
	}
}

// phaseOpen opens the store read-only, as a process would, and reports a
// failure, or a filter (the target, if any) that opens broken: whatever
// the store rejects that the phases before did not find. It runs only
// when they found no problem.
func (v *verifier) phaseOpen() error {
	if v.cat == nil || v.fnd.count(sevProblem) > 0 {
		return nil
	}
	s, err := openStore(v.dir)
	if err != nil {
		v.fnd.addFinding("open", problem("", -1, "a read-only open of the store fails: %s", scrubPath(err.Error(), v.dir)))
		return nil
	}
	defer s.Close()
	infos, _ := s.List() // fails only once closed
	for _, in := range infos {
		if in.State == stateBroken && (v.target == nil || in.Name == v.target.Name) {
			v.fnd.addFinding("open", problem("", -1, "%s", scrubPath(in.Reason, v.dir)))
		}
	}
	return nil
}

// staleBloomBound is the most items a Bloom layer's set bits may suggest
// (est, estimated from the set bits per block) for a layer whose count is
// exp before verify calls the count stale: half as many again, plus
// eight standard deviations of a count of est and a floor for small
// layers. A layer counts exactly the adds that set a bit, so a correct
// count sits within a few percent of the estimate; a catalog put back
// from before a Load undercounts by the Load's keys (its WAL gap, or the
// Load's record, is reported too, unless the WAL was removed).
func staleBloomBound(exp int64, est float64) float64 {
	return 1.5*float64(exp) + 8*math.Sqrt(est) + 64
}
