package main

import (
	"testing"
)

// TestCheckReadsNoFilter: check answers from the catalog, the header pages,
// the WAL tail and the pages its lookups touch. It never scans a layer's
// data (scanLayer) nor calls the store's Fill, which reads every data
// word; info and stats, which do, move the same counters.
func TestCheckReadsNoFilter(t *testing.T) {
	dir := testStore(t)
	words, infos := dataWordsScanned.Load(), wholeFilterReads.Load()
	for _, args := range [][]string{
		{"check", dir, "users", "user-001", "nobody"},
		{"check", dir, "seen", "seen-100", "nobody"},
		{"check", dir, "hits", "hit-001", "nobody"},
		{"check", dir, "flags", "7", "8"},
		{"check", "--json", dir, "users", "late-0"},
	} {
		mustRun(t, 0, args...)
	}
	if w, i := dataWordsScanned.Load()-words, wholeFilterReads.Load()-infos; w != 0 || i != 0 {
		t.Errorf("check scanned %d data words and called Fill %d times; want none", w, i)
	}
	mustRun(t, 0, "info", dir, "users")
	mustRun(t, 0, "stats", dir, "users")
	if dataWordsScanned.Load() == words || wholeFilterReads.Load() == infos {
		t.Errorf("info and stats moved neither counter: the seam counts nothing")
	}
}
