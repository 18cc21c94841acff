package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/filterstore/filterstore/store"
)

// TestOlderCatalogDuringLoad: a copy of a store taken in the middle of a
// Load (a crash image), with its catalog replaced by one copied before
// the Load (which says the filter is complete): the Load's WAL record,
// after the older catalog's checkpoint, makes every command treat the
// filter as the writer's Open will — incomplete: ls and info say so
// (info --json counts the record under "load"), check answers maybe,
// verify notes it, and wal --dump shows the record (with no layer).
func TestOlderCatalogDuringLoad(t *testing.T) {
	live := filepath.Join(t.TempDir(), "live")
	s, err := store.Open(live, &store.Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.CreateCuckoo("bulk", store.CuckooConfig{Capacity: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := c.Add(fmt.Append(nil, "a", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	older, err := os.ReadFile(filepath.Join(live, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "crashed")
	copied := make(chan error, 1)
	err = c.Load(store.Keys(func(yield func([]byte) bool) {
		for i := range 500 {
			if i == 250 {
				copied <- copyDir(live, dir)
			}
			if !yield(fmt.Append(nil, "k", i)) {
				return
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-copied; err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "catalog.db"), older, 0o644); err != nil {
		t.Fatal(err)
	}

	if r := mustRun(t, 0, "ls", dir); !strings.Contains(r.stdout, "incomplete") {
		t.Errorf("ls does not say incomplete:\n%s", r)
	}
	if r := mustRun(t, 0, "info", dir, "bulk"); !strings.Contains(r.stdout, "incomplete") {
		t.Errorf("info does not say incomplete:\n%s", r)
	}
	if r := mustRun(t, 0, "check", dir, "bulk", "never-added"); !strings.Contains(r.stdout, "never-added  maybe") || !strings.Contains(r.stderr, "incomplete") {
		t.Errorf("check:\n%s", r)
	}
	if r := mustRun(t, 0, "verify", dir); !strings.Contains(r.stdout, "note     catalog.db: filter bulk opens incomplete: a WAL load record after its checkpoint (LSN") {
		t.Errorf("verify does not note the load record:\n%s", r)
	}
	if r := mustRun(t, 0, "wal", dir, "--dump"); !strings.Contains(r.stdout, "filter=bulk id=1 op=load pending") {
		t.Errorf("wal --dump does not show the load record:\n%s", r)
	}
	r := mustRun(t, 0, "wal", dir, "--dump", "--json")
	found := false
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var d map[string]any
		decode(t, line, &d)
		if d["op"] != "load" {
			continue
		}
		found = true
		if _, ok := d["layer"]; ok || d["filter"] != "bulk" || d["pending"] != true {
			t.Errorf("wal --dump --json line of the load record: %s (want filter bulk, pending, no layer)", line)
		}
	}
	if !found {
		t.Errorf("wal --dump --json has no load record:\n%s", r.stdout)
	}
	var info struct {
		Pending struct {
			ByOp map[string]int `json:"by_op"`
		} `json:"pending"`
	}
	r = mustRun(t, 0, "info", dir, "bulk", "--json")
	decode(t, r.stdout, &info)
	if info.Pending.ByOp["load"] != 1 {
		t.Errorf("info --json pending by_op = %v, want load 1:\n%s", info.Pending.ByOp, r.stdout)
	}
	// The writer's Open agrees.
	s2, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	c2, err := s2.Cuckoo("bulk")
	if err != nil {
		t.Fatal(err)
	}
	if in, _ := c2.Info(); in.State != "incomplete" {
		t.Fatalf("the writer's Open: state %q, want incomplete", in.State)
	}
}

// TestPendingSkipsPreLoadRecords: with a catalog put back from before
// three adds and a Load into a cuckoo filter (the WAL still holding them:
// a crash image), the writer's Open replays the load record and skips the
// adds' records before it; inspect counts the same: wal and info show one
// pending record (the load record), and wal --dump marks no words record
// pending. They were all counted pending.
func TestPendingSkipsPreLoadRecords(t *testing.T) {
	live := filepath.Join(t.TempDir(), "live")
	s, err := store.Open(live, &store.Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.CreateCuckoo("c", store.CuckooConfig{Capacity: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	older, err := os.ReadFile(filepath.Join(live, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c.Add(fmt.Append(nil, "a", i)); err != nil {
			t.Fatal(err)
		}
	}
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = fmt.Append(nil, "k", i)
	}
	if err := c.Load(store.Keys(slices.Values(keys))); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "crashed")
	if err := copyDir(live, dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "catalog.db"), older, 0o644); err != nil {
		t.Fatal(err)
	}

	var out struct {
		Pending int `json:"after_checkpoint"`
	}
	r := mustRun(t, 0, "wal", dir, "--json")
	decode(t, r.stdout, &out)
	if out.Pending != 1 {
		t.Errorf("wal --json: %d records after the checkpoint, want 1 (the load record; replay skips the adds before it):\n%s", out.Pending, r.stdout)
	}
	r = mustRun(t, 0, "wal", dir, "--dump")
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.Contains(line, "op=words") && strings.Contains(line, "pending") {
			t.Errorf("wal --dump marks a record before the load record pending: %s", line)
		}
	}
	var info struct {
		PendingRecords int    `json:"pending_wal_records"`
		State          string `json:"state"`
	}
	r = mustRun(t, 0, "info", dir, "c", "--json")
	decode(t, r.stdout, &info)
	if info.PendingRecords != 1 || info.State != "incomplete" {
		t.Errorf("info --json: %d pending records, state %q; want 1, incomplete:\n%s", info.PendingRecords, info.State, r.stdout)
	}
}
