package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/testseed"
	"github.com/filterstore/filterstore/store"
)

// TestVerifyBesideIdleWriterNoStampProblem: verify of a healthy store
// whose writer adds now and then (SyncAlways). When the writer was idle
// from verify's first WAL read to its second, verify judged the scrub
// quiescent and read a layer's stamp again afterwards, raised meanwhile
// by a later add: "newer than the WAL", exit 1, in about one run in ten
// (a review of the check). The stamp is now read before the second WAL
// read, which sees any record whose change could have raised it.
func TestVerifyBesideIdleWriterNoStampProblem(t *testing.T) {
	seed := testseed.Seed(t)
	dir := filepath.Join(t.TempDir(), "live")
	s, err := store.Open(dir, &store.Options{Sync: store.SyncAlways, CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := rand.New(rand.NewPCG(seed, 1))
		for i := 0; !stop.Load(); i++ {
			time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
			if err := c.Add([]byte(fmt.Sprint("k", i))); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	runs := 150
	if testing.Short() {
		runs = 40
	}
	for i := 0; i < runs && !t.Failed(); i++ {
		r := runCLI("verify", dir)
		if strings.Contains(r.stdout+r.stderr, "newer than the WAL") {
			t.Errorf("run %d of verify beside a healthy writer reports a file newer than the WAL:\n%s", i, r)
		}
	}
	stop.Store(true)
	<-done
}
