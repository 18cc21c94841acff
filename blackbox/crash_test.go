package blackbox_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/filterstore/filterstore/store"
)

// The child side of the crash tests: when BLACKBOX_CHILD is set, TestMain
// runs the child job instead of the tests and exits without closing the
// store, as a killed process would.
func TestMain(m *testing.M) {
	if job := os.Getenv("BLACKBOX_CHILD"); job != "" {
		child(job, os.Getenv("BLACKBOX_DIR"))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(job, dir string) {
	opts := &store.Options{CheckpointEvery: -1}
	if strings.HasSuffix(job, "-interval") {
		opts.Sync = store.SyncInterval
		opts.SyncEvery = time.Hour
	}
	s, err := store.Open(dir, opts)
	if err != nil {
		fmt.Println("ERR", err)
		return
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	switch {
	case strings.HasPrefix(job, "kinds"):
		b, _ := s.CreateBloom("b", store.BloomConfig{Capacity: 1000})
		c, _ := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 1000})
		n, _ := s.CreateCounting("n", store.BloomConfig{Capacity: 1000})
		m, _ := s.CreateBitmap("m", 5000)
		for i := range childKeys(job) {
			k := keyN("ck", i)
			if _, err := b.Add(k); err != nil {
				fmt.Fprintln(out, "ERR", err)
				return
			}
			if err := c.Add(k); err != nil {
				fmt.Fprintln(out, "ERR", err)
				return
			}
			if err := n.Add(k); err != nil {
				fmt.Fprintln(out, "ERR", err)
				return
			}
			if _, err := m.Set(uint64(i)); err != nil {
				fmt.Fprintln(out, "ERR", err)
				return
			}
			if i%3 == 0 {
				if _, err := c.Delete(k); err != nil {
					fmt.Fprintln(out, "ERR", err)
					return
				}
				if _, err := m.Clear(uint64(i)); err != nil {
					fmt.Fprintln(out, "ERR", err)
					return
				}
			}
			fmt.Fprintln(out, "ACK", i)
		}
	case strings.HasPrefix(job, "external"):
		c, _ := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 1000})
		for i := range 300 {
			bt := s.NewBatch()
			bt.CuckooAdd(c, keyN("ex", i))
			rec, err := bt.Encode()
			if err != nil {
				fmt.Fprintln(out, "ERR", err)
				return
			}
			if _, err := s.ApplyExternal(rec); err != nil {
				fmt.Fprintln(out, "ERR", err)
				return
			}
			fmt.Fprintf(out, "REC %x\n", rec)
		}
	}
}

func runChild(t *testing.T, job, dir string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "BLACKBOX_CHILD="+job, "BLACKBOX_DIR="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("ERR")) {
		t.Fatalf("child: %s", out)
	}
	return string(out)
}

// A writer that dies without Close: under SyncAlways and SyncInterval ("a
// process crash loses nothing"), every acknowledged change is there after
// the next Open, read-only first (before any writer recovers) and then as
// a writer; Check and inspect verify are clean.
func TestProcessDeathKeepsAcknowledged(t *testing.T) {
	for _, job := range []string{"kinds-always", "kinds-interval"} {
		t.Run(job, func(t *testing.T) {
			dir := t.TempDir()
			out := runChild(t, job, dir)
			acks := strings.Count(out, "ACK")
			if acks != childKeys(job) {
				t.Fatalf("child acknowledged %d", acks)
			}
			check := func(s *store.Store, mode string) {
				b, _ := s.Bloom("b")
				c, _ := s.Cuckoo("c")
				n, _ := s.Counting("n")
				m, _ := s.Bitmap("m")
				for i := range acks {
					k := keyN("ck", i)
					if !b.Has(k) || !n.Has(k) {
						t.Fatalf("%s: lost %s", mode, k)
					}
					if i%3 != 0 && !c.Has(k) {
						t.Fatalf("%s: cuckoo lost %s", mode, k)
					}
					if m.Get(uint64(i)) != (i%3 != 0) {
						t.Fatalf("%s: bitmap bit %d = %v", mode, i, m.Get(uint64(i)))
					}
				}
				wantC := uint64(acks - (acks+2)/3)
				if c.Items() != wantC || m.Count() != wantC || n.Items() != uint64(acks) {
					t.Errorf("%s: items cuckoo %d bitmap %d counting %d, want %d %d %d", mode, c.Items(), m.Count(), n.Items(), wantC, wantC, acks)
				}
			}
			r := openStore(t, dir, &store.Options{ReadOnly: true})
			check(r, "read-only")
			rep, err := r.Check()
			if err != nil {
				t.Errorf("read-only Check after death: %v (%+v)", err, rep)
			}
			r.Close()
			so, se, code := run(t, "verify", dir)
			if code != 0 {
				t.Errorf("inspect verify after death: %d\n%s%s", code, so, se)
			}
			w := openStore(t, dir, nil)
			check(w, "writer")
			if _, err := w.Check(); err != nil {
				t.Errorf("writer Check after death: %v", err)
			}
			must(t, w.Close())
			w = openStore(t, dir, nil)
			check(w, "after clean close")
			if _, err := w.Check(); err != nil {
				t.Errorf("Check after clean close: %v", err)
			}
			w.Close()
		})
	}
}

// External-log mode after a process death: ExternalDurable never names a
// record the store does not hold; replaying the records above it restores
// every key, and records at or below it change nothing.
func TestExternalAfterProcessDeath(t *testing.T) {
	dir := t.TempDir()
	out := runChild(t, "external-interval", dir)
	var recs [][]byte
	for _, line := range strings.Split(out, "\n") {
		if h, ok := strings.CutPrefix(line, "REC "); ok {
			b := make([]byte, len(h)/2)
			for i := range b {
				v, _ := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
				b[i] = byte(v)
			}
			recs = append(recs, b)
		}
	}
	if len(recs) != 300 {
		t.Fatalf("%d records", len(recs))
	}
	s := openStore(t, dir, &store.Options{Sync: store.SyncInterval})
	defer s.Close()
	d := s.ExternalDurable()
	t.Logf("ExternalDurable after death: %d of 300", d)
	if d > 300 {
		t.Fatalf("ExternalDurable %d beyond the last record", d)
	}
	c, _ := s.Cuckoo("c")
	for i := range int(d) {
		if !c.Has(keyN("ex", i)) {
			t.Fatalf("record %d at or below ExternalDurable %d not held", i+1, d)
		}
	}
	for _, rec := range recs {
		seq, _ := store.ExternalSeq(rec)
		if seq <= d {
			continue
		}
		if _, err := s.ApplyExternal(rec); err != nil {
			t.Fatalf("replay seq %d: %v", seq, err)
		}
	}
	for i := range 300 {
		if !c.Has(keyN("ex", i)) {
			t.Fatalf("after replay, ex-%d missing", i)
		}
	}
	if c.Items() != 300 {
		t.Errorf("items after replay %d, want 300 (records applied twice?)", c.Items())
	}
}

// childKeys is how many rounds of changes the child makes: fewer under
// SyncAlways, where each change waits for an fdatasync.
func childKeys(job string) int {
	if strings.HasSuffix(job, "-always") {
		return 150
	}
	return 500
}
