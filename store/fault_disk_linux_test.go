package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
	"golang.org/x/sys/unix"
)

// smallFS mounts a tmpfs of size bytes for the test, or skips the test
// where mounting is not permitted.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	return smallFSWith(t, "size="+size)
}

// smallFSWith mounts a tmpfs with the mount options opts (size=..., and
// nr_inodes=... for a file system that runs out of inodes), or skips the
// test where mounting is not permitted.
func smallFSWith(t *testing.T, opts string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("none", dir, "tmpfs", 0, opts); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (%v): the Sim-based TestCreateWithoutSpace covers the store's side", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestFullDisk: on a file system too small for a filter, creating it fails
// with ENOSPC and leaves no catalog entry and no file; a filter that fits
// can be written in full (its blocks are allocated at creation, so no page
// fault of the mapping can need space, which would be a SIGBUS); growing a
// layer on the full disk fails the add with ENOSPC.
func TestFullDisk(t *testing.T) {
	dir := filepath.Join(smallFS(t, "2m"), "store")
	s := mustOpen(t, dir, &Options{SegmentSize: 64 << 10, CheckpointBytes: 64 << 10})
	_, err := s.CreateBloom("huge", BloomConfig{Capacity: 4_000_000, NonScaling: true})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("creating a filter larger than the disk: %v, want ENOSPC", err)
	}
	if l, _ := s.List(); len(l) != 0 {
		t.Fatalf("the failed create left %v in the catalog", l)
	}
	if names, _ := os.ReadDir(filepath.Join(dir, format.FiltersName)); len(names) != 0 {
		t.Fatalf("the failed create left files: %v", names)
	}
	m, err := s.CreateBitmap("fits", 8<<20) // 1 MiB of data
	must(t, err)
	for off := uint64(0); off < 8<<20; off += 64 * 512 { // a bit per page
		if _, err := m.Set(off); err != nil {
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFailed) {
				break // the WAL filled the rest of the disk: refused, not a crash
			}
			t.Fatal(err)
		}
	}
	b, err := s.CreateBloom("grows", BloomConfig{Capacity: 20_000})
	if err == nil {
		batch := make([][]byte, 1000)
		for i := 0; err == nil; i++ {
			for j := range batch {
				batch[j] = key(i*len(batch) + j)
			}
			_, err = b.AddMany(batch)
		}
		if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, ErrFailed) {
			t.Fatalf("growing on a full disk: %v, want ENOSPC", err)
		}
	} else if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create on the full disk: %v", err)
	}
	s.Close()
	// Recovery writes (a checkpoint): the operator makes room first.
	must(t, unix.Mount("none", filepath.Dir(dir), "tmpfs", unix.MS_REMOUNT, "size=16m"))
	s = mustOpen(t, dir, nil)
	defer s.Close()
	if _, err := s.Bloom("huge"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after reopening: %v, want ErrNotFound for the filter that did not fit", err)
	}
}

// TestBackupFullDisk: a Backup onto a file system too small for the copy
// fails with ENOSPC and leaves nothing there; the source goes on.
func TestBackupFullDisk(t *testing.T) {
	s := mustOpen(t, t.TempDir(), nil)
	defer s.Close()
	big, err := s.CreateBitmap("big", 16<<20) // 2 MiB of data
	must(t, err)
	_, err = big.Set(12345)
	must(t, err)
	dst := filepath.Join(smallFS(t, "1m"), "dst")
	if err := s.Backup(dst); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Backup onto a full disk: %v, want ENOSPC", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(dst)); len(ents) != 0 {
		t.Fatalf("the failed Backup left %v", ents)
	}
	if _, err := big.Set(54321); err != nil {
		t.Fatalf("the source after a failed Backup: %v", err)
	}
}

// layerFiller is the OS mapper, which, while armed, fills the disk right
// after it made a layer file: the catalog commit that records the layer
// then finds no space.
type layerFiller struct {
	mmapbits.OS
	filler string
	armed  atomic.Bool
	fired  atomic.Bool
}

func (m *layerFiller) Create(path string, h mmapbits.Header) (mmapbits.Region, error) {
	r, err := m.OS.Create(path, h)
	if err == nil && m.armed.Load() {
		m.fired.Store(true)
		f, ferr := os.OpenFile(m.filler, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if ferr == nil {
			buf := make([]byte, 4096)
			for {
				if _, err := f.Write(buf); err != nil {
					break
				}
			}
			f.Close()
		}
	}
	return r, err
}

// TestLayerCommitFullDisk: the catalog commit of a scalable Bloom filter's
// new layer runs out of space. The add fails with ENOSPC and the store
// goes on (doc.go, fault model): once there is room, the filter grows
// into that layer and other filters can be created; nothing acknowledged
// is lost across a reopen. (Before, the add failed the whole store.)
func TestLayerCommitFullDisk(t *testing.T) {
	fsdir := smallFS(t, "16m")
	dir := filepath.Join(fsdir, "store")
	mp := &layerFiller{filler: filepath.Join(fsdir, "filler")}
	opts := Options{SegmentSize: 64 << 10, CheckpointEvery: -1}
	opts.mapper = mp
	s := mustOpen(t, dir, &opts)
	// Long names: a catalog of several pages, whose commit needs space.
	for i := range 40 {
		must(t, second(s.CreateBitmap(fmt.Sprintf("%0150d", i), 64)))
	}
	b, err := s.CreateBloom("b", BloomConfig{Capacity: 20, Expansion: 1})
	must(t, err)
	var addErr error
	n := 0
	for ; n < 40*20; n++ {
		mp.fired.Store(false)
		mp.armed.Store(true)
		_, addErr = b.Add(key(n))
		mp.armed.Store(false)
		if addErr != nil {
			break
		}
		if mp.fired.Load() {
			os.Remove(mp.filler)
		}
	}
	if addErr == nil {
		t.Fatalf("no layer's catalog commit ran out of space in %d adds", n)
	}
	if !errors.Is(addErr, syscall.ENOSPC) || errors.Is(addErr, ErrFailed) {
		t.Fatalf("add %d, whose layer's commit found the disk full: %v, want ENOSPC and a store that goes on", n, addErr)
	}
	layers := mustInfo(t, b).Layers
	must(t, os.Remove(mp.filler))
	for i := n; i < n+40; i++ {
		if _, err := b.Add(key(i)); err != nil {
			t.Fatalf("add %d once there was room: %v", i, err)
		}
	}
	if got := mustInfo(t, b).Layers; got <= layers {
		t.Fatalf("layers: %d before the room was made, %d after 40 more adds", layers, got)
	}
	must(t, second(s.CreateBitmap("after", 64)))
	must(t, s.Close())
	s = mustOpen(t, dir, nil)
	defer s.Close()
	b, err = s.Bloom("b")
	must(t, err)
	for i := range n + 40 {
		if !b.Has(key(i)) {
			t.Fatalf("acknowledged key %d absent after reopening", i)
		}
	}
}
