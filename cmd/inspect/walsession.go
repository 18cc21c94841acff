package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/wal"
)

// backupIncompleteName is the marker store.Backup keeps in its copy
// until the copy is whole (store/backup.go backupMarker).
const backupIncompleteName = "BACKUP-INCOMPLETE"

// sessionMarker is the store's SESSION marker (a writer is running, or
// died), read before the WAL is scanned: a live writer records a segment
// there only once the segment exists, so a segment the marker names is
// in the scan's listing unless it was lost.
type sessionMarker struct {
	present bool
	newest  uint64 // the first LSN of the newest segment it records
	known   bool   // newest is recorded (not an empty or torn marker)
	err     error  // it could not be read
}

func readSessionMarker(dir string) sessionMarker {
	b, err := format.ReadSession(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return sessionMarker{}
	}
	if err != nil {
		return sessionMarker{present: true, err: err}
	}
	newest, _, known := format.ParseSession(b)
	return sessionMarker{present: true, newest: newest, known: known}
}

// checkWALEnds reports, as Open does, WAL records lost at either end of
// a scan res made after m was read and the catalog cat before that:
// records cat's oldest checkpoint needs that no segment holds (see
// checkWALStart; reported only if the catalog, read again, still has
// that checkpoint: a writer may have checkpointed meanwhile), and, with
// the marker there, a newest segment it records that is gone, or no
// segment at all while cat names filters. A scan that saw a segment
// vanish (a live writer's checkpoint removing it) shows neither.
func checkWALEnds(dir string, fnd *findings, res *wal.ScanResult, cat *catalogSnapshot, m sessionMarker) {
	if _, err := os.Lstat(filepath.Join(dir, backupIncompleteName)); err == nil {
		// Every Open refuses such a directory (store.Open), whatever its WAL.
		fnd.addFinding("backup-incomplete", problem(backupIncompleteName, -1, "is there: the directory is the copy of a Backup that did not finish, and Open refuses it; remove the directory and run Backup again"))
	}
	if res == nil {
		return
	}
	var last *wal.SegmentInfo
	for i := range res.Segments {
		s := &res.Segments[i]
		if s.Vanished {
			return
		}
		last = s
	}
	start := newFindings(1)
	if checkWALStart(dir, start, res, cat); start.count(sevProblem) > 0 {
		if now, err := readCatalog(dir); err == nil && now.CheckpointLSN == cat.CheckpointLSN && oldestSynced(now) == oldestSynced(cat) {
			for _, f := range start.all() {
				fnd.addFinding("wal-start", f)
			}
		}
	}
	switch {
	case !m.present:
	case m.err != nil:
		// A writer's Open reads the marker first and refuses the store
		// while it cannot.
		fnd.addFinding("session", problem(format.SessionName, -1, "cannot read: %s; a writer's Open refuses the store until the marker reads (a file) or is removed", scrubPath(m.err.Error(), dir)))
	case last == nil:
		if len(cat.Filters) > 0 {
			fnd.addFinding("wal-lost", problem(format.WALName, -1, "holds no segment, but %s is there (the last writer did not close, or one is running): whatever it logged after LSN %d is lost, and Open refuses the store (unless every filter is broken); restore %s/ from where it was moved",
				format.SessionName, oldestSynced(cat), format.WALName))
		}
	case m.known && last.FirstLSN < m.newest:
		fnd.addFinding("wal-lost", problem(walRel(dir, wal.SegmentName(m.newest)), -1, "is missing: %s records that the last writer started this segment, but the newest segment is %s: the segments from it on were deleted or moved, the changes logged in them are lost, and Open refuses the store; put them back",
			format.SessionName, last.Name))
	}
}

// oldestSynced is the oldest checkpoint any filter's files reflect: the
// WAL must hold every record after it.
func oldestSynced(cat *catalogSnapshot) uint64 {
	need := cat.CheckpointLSN
	for _, f := range cat.Filters {
		need = min(need, f.SyncedLSN)
	}
	return need
}
