package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
	"github.com/filterstore/filterstore/wal"
)

// TestConcurrentWriter runs inspect against a store that another goroutine
// is writing at the same time, with small WAL segments and frequent
// checkpoints so that segments rotate and are deleted, layers are added,
// and filters are created and dropped under inspect's feet. Every run must
// succeed (or fail cleanly: one line on stderr, no panic); verify must
// find no problem, torn tails included; and check must never answer "no"
// for a key whose add was acknowledged before it started.
func TestConcurrentWriter(t *testing.T) {
	for _, mode := range []store.SyncMode{store.SyncAlways, store.SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) { testConcurrentWriter(t, mode) })
	}
}

func testConcurrentWriter(t *testing.T, mode store.SyncMode) {
	dir := filepath.Join(t.TempDir(), "live")
	s, err := store.Open(dir, &store.Options{Sync: mode, SyncEvery: 2 * time.Millisecond,
		SegmentSize: 64 << 10, CheckpointBytes: 64 << 10, CheckpointEvery: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	users, err := s.CreateBloom("users", store.BloomConfig{Capacity: 2000, ErrorRate: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	seen, err := s.CreateCuckoo("seen", store.CuckooConfig{Capacity: 1000, Expansion: 2})
	if err != nil {
		t.Fatal(err)
	}
	hits, err := s.CreateCounting("hits", store.BloomConfig{Capacity: 20000})
	if err != nil {
		t.Fatal(err)
	}
	flags, err := s.CreateBitmap("flags", 1<<20)
	if err != nil {
		t.Fatal(err)
	}

	var acked atomic.Int64 // users keys 0..acked-1 were acknowledged
	var seenAcked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		fail := func(err error) { werr = err }
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			batch := make([][]byte, 20)
			for j := range batch {
				batch[j] = []byte(fmt.Sprintf("user-%d", i*20+j))
			}
			if _, err := users.AddMany(batch); err != nil {
				fail(err)
				return
			}
			acked.Store(int64(i*20 + 20))
			if err := seen.Add([]byte(fmt.Sprintf("seen-%d", i))); err != nil {
				fail(err)
				return
			}
			seenAcked.Store(int64(i + 1))
			if i%5 == 4 {
				// Delete an earlier non-acknowledged-for-checking key.
				seen.Add([]byte(fmt.Sprintf("tmp-%d", i)))
				seen.Delete([]byte(fmt.Sprintf("tmp-%d", i)))
			}
			if err := hits.Add([]byte(fmt.Sprintf("hit-%d", i%50))); err != nil {
				fail(err)
				return
			}
			if i%3 == 0 {
				hits.Delete([]byte(fmt.Sprintf("hit-%d", (i+25)%50)))
			}
			if _, err := flags.Set(uint64(i * 37 % (1 << 20))); err != nil {
				fail(err)
				return
			}
			if i%7 == 0 {
				flags.Clear(uint64((i / 2) * 37 % (1 << 20)))
			}
			if i%10 == 0 { // create and drop a filter: records of dropped ids
				name := fmt.Sprintf("scratch-%d", i)
				if b, err := s.CreateBloom(name, store.BloomConfig{Capacity: 50}); err == nil {
					b.Add([]byte("x"))
					s.Drop(name)
				}
			}
		}
	}()

	deadline := time.Now().Add(1500 * time.Millisecond)
	if testing.Short() {
		deadline = time.Now().Add(300 * time.Millisecond)
	}
	runs := map[string]int{}
	for iter := 0; time.Now().Before(deadline); iter++ {
		n, m := acked.Load(), seenAcked.Load()
		cmds := [][]string{
			{"ls", dir},
			{"verify", dir},
			{"wal", dir},
			{"info", dir, "seen"},
			{"stats", dir, "hits"},
			{"verify", dir, "users"},
			{"ls", "--json", dir},
		}
		if n > 0 {
			cmds = append(cmds, []string{"check", dir, "users", fmt.Sprintf("user-%d", n-1), fmt.Sprintf("user-%d", n/2), "user-0"})
		}
		if m > 0 {
			cmds = append(cmds, []string{"check", dir, "seen", fmt.Sprintf("seen-%d", m-1), "seen-0"})
		}
		for _, args := range cmds {
			r := runCLI(args...)
			checkClean(t, args, r)
			if r.code != 0 {
				t.Errorf("inspect %s (iteration %d) with a live writer:\n%s", strings.Join(args, " "), iter, r)
				continue
			}
			runs[args[0]]++
			if args[0] == "verify" && strings.Contains(r.stdout, "item counts cross-checked") {
				runs["verify (quiet, counts checked)"]++
			}
			if args[0] == "verify" && strings.Contains(r.stdout, "torn tail") {
				runs["verify (torn tail seen)"]++
			}
			if args[0] == "check" && strings.Contains(r.stdout, " no ") {
				t.Errorf("inspect %s: an acknowledged key answered no:\n%s", strings.Join(args, " "), r)
			}
			if args[0] == "verify" && (strings.Contains(r.stdout, "\nproblem ") || strings.HasPrefix(r.stdout, "problem ")) {
				t.Errorf("inspect %s reported problems with a live writer:\n%s", strings.Join(args, " "), r)
			}
		}
		if t.Failed() {
			break
		}
	}
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	t.Logf("runs with a live writer: %v; %d users keys written", runs, acked.Load())

	// Quiet now (Close checkpoints and stops the background work): verify
	// cross-checks item counts and finds nothing.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 0, "verify", dir)
	if !strings.Contains(r.stdout, "item counts cross-checked; ") || !strings.Contains(r.stdout, " data pages matched their checksums: 0 problems, 0 notes") {
		t.Errorf("verify after the writer stopped:\n%s", r)
	}
}

// TestTornTailBeingWritten appends valid records to the last WAL segment a
// few bytes at a time, as a writer caught mid-write leaves it, while
// verify, wal, ls and check run: a torn tail is a note, never a problem.
func TestTornTailBeingWritten(t *testing.T) {
	dir := testStore(t)
	cat, err := readCatalogGuarded(dir)
	if err != nil {
		t.Fatal(err)
	}
	var users *filterRecord
	for i := range cat.Filters {
		if cat.Filters[i].Name == "users" {
			users = &cat.Filters[i]
		}
	}
	var last, before uint64 // the last LSN, and how many records the log holds
	res, err := wal.Scan(walDir(dir), wal.ScanOptions{Live: true}, func(p wal.Position, _ []byte) error { last = p.LSN; before++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	var tail []byte
	for i := uint64(1); i <= 200; i++ {
		payload := appendWALRecord(nil, walRecord{Op: walOpHash, FilterID: users.ID, Layer: 1, Hash: i * 0x9e3779b97f4a7c15})
		tail = wal.AppendRecord(tail, last+i, payload)
	}
	seg := walSegment(t, dir)
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// As the log writes: after its last record, into the space it
	// reserved past it (if the writer left any).
	end := recordsEnd(res.Segments[len(res.Segments)-1])
	done := make(chan struct{})
	go func() {
		defer close(done)
		for off := 0; off < len(tail); off += 7 {
			f.WriteAt(tail[off:min(off+7, len(tail))], end+int64(off))
			time.Sleep(100 * time.Microsecond)
		}
	}()
	torn := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		for _, args := range [][]string{{"verify", dir}, {"wal", dir}, {"ls", dir}, {"check", dir, "users", "user-000"}} {
			r := mustRun(t, 0, args...)
			if strings.Contains(r.stdout, "torn tail") {
				torn++
			}
			if args[0] == "check" && !strings.Contains(r.stdout, "maybe") {
				t.Errorf("check:\n%s", r)
			}
		}
	}
	t.Logf("%d runs caught the tail torn", torn)
	r := mustRun(t, 0, "wal", dir)
	if !strings.Contains(r.stdout, fmt.Sprintf("%d records in 1 segment", before+200)) {
		t.Errorf("after the tail was written:\n%s", r)
	}
}
