package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/wal"
)

// TestNewerThanWALStaysBroken: a writer dies, and its WAL loses its last
// records (WAL writes the disk lost), while the filter files hold the
// changes those records made. The cuckoo, counting and bitmap filters
// open broken ("maybe") and stay broken: for a read-only Open, for the
// writer's Open, and for every writer's Open after it. Before, the writer
// after the first found the WAL empty past the catalog's checkpoint
// (which the first one's Close had moved on), let the filters through
// "ok" and replayed the records past their own older checkpoint, putting
// older after-images over the newer words: keys read absent with Check
// clean; and a read-only Open overlaid those after-images the same way,
// with the filters "needs recovery" (an adversarial review: 4 bitmap
// bits, 49 counting and 48 cuckoo keys absent).
func TestNewerThanWALStaysBroken(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	c, err := s.CreateCuckoo("c", CuckooConfig{Capacity: 10_000})
	must(t, err)
	n, err := s.CreateCounting("n", BloomConfig{Capacity: 10_000})
	must(t, err)
	m, err := s.CreateBitmap("m", 100_000)
	must(t, err)
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 10_000})
	must(t, err)
	const before, after = 200, 400 // keys before the checkpoint, and after it
	for i := range before + after {
		if i == before {
			must(t, s.Checkpoint())
		}
		must(t, c.Add(key(i)))
		must(t, n.Add(key(i)))
		must(t, second(m.Set(uint64(7*i))))
		must(t, second(b.Add(key(i))))
	}
	s.abandonForTest()

	// Cut the WAL in the middle of the records after the checkpoint.
	walDir := filepath.Join(dir, format.WALName)
	var cut []wal.Position
	_, err = wal.Scan(walDir, wal.ScanOptions{}, func(pos wal.Position, _ []byte) error {
		cut = append(cut, pos)
		return nil
	})
	must(t, err)
	at := cut[len(cut)-after*2] // half of the tail's 4 records a key
	must(t, os.Truncate(filepath.Join(walDir, at.Segment), at.Offset))

	broken := func(s *Store, when string) {
		t.Helper()
		for _, in := range mustList(t, s) {
			switch in.Name {
			case "c", "n", "m":
				if in.State != "broken" {
					t.Errorf("%s: filter %s is %s (%s), want broken: its file is newer than the WAL", when, in.Name, in.State, in.Reason)
				}
			case "b":
				// Bloom records only set bits again: nothing is lost.
				if in.State != "ok" {
					t.Errorf("%s: Bloom filter is %s (%s), want ok", when, in.State, in.Reason)
				}
			}
		}
		// Every key was acknowledged (the WAL lost records the disk had
		// acknowledged): broken ("maybe") or not, none reads absent.
		c, _ := s.Cuckoo("c")
		n, _ := s.Counting("n")
		m, _ := s.Bitmap("m")
		b, _ := s.Bloom("b")
		lost := 0
		for i := range before + after {
			if !c.Has(key(i)) || !n.Has(key(i)) || !m.Get(uint64(7*i)) || !b.Has(key(i)) {
				lost++
			}
		}
		if lost > 0 {
			t.Errorf("%s: %d acknowledged keys read absent", when, lost)
		}
	}
	r, err := Open(dir, &Options{ReadOnly: true})
	must(t, err)
	broken(r, "read-only Open")
	must(t, r.Close())
	for i := range 3 {
		s, err := Open(dir, nil)
		must(t, err)
		broken(s, []string{"the first writer Open", "the second writer Open", "the third writer Open"}[i])
		rep, err := s.Check()
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("writer Open %d: Check: %v (%d problems), want the broken filters reported", i+1, err, len(rep.Problems))
		}
		must(t, s.Close())
	}
}
