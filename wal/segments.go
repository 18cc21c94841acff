package wal

// Segment is a live segment file as the log has written it.
type Segment struct {
	Name     string // base name, in the log's directory
	FirstLSN uint64 // LSN in its name and header
	Size     int64  // bytes written to it so far, header included
}

// Segments returns the live segments, oldest first, with the bytes written
// to each so far. A record appended and not yet written is not counted:
// call Sync first, with no Append running, for a view that holds every
// record appended. A segment's bytes up to Size never change; the segment
// itself goes once TruncateBefore or SetNextLSN deletes it.
func (l *Log) Segments() []Segment {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Segment, len(l.segs))
	for i, s := range l.segs {
		out[i] = Segment{Name: s.name, FirstLSN: s.first, Size: s.size}
	}
	return out
}
