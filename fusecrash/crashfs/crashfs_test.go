package crashfs

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The model without a mount: what strict and torn losses keep.
func TestModel(t *testing.T) {
	fs := New()
	var co fuse.CreateOut
	if st := fs.Create(nil, &fuse.CreateIn{InHeader: fuse.InHeader{NodeId: 1}, Mode: 0o644}, "f", &co); !st.Ok() {
		t.Fatal(st)
	}
	ino := co.NodeId
	write := func(off int, b byte, n int) {
		if _, st := fs.Write(nil, &fuse.WriteIn{InHeader: fuse.InHeader{NodeId: ino}, Offset: uint64(off)}, bytes.Repeat([]byte{b}, n)); !st.Ok() {
			t.Fatal(st)
		}
	}
	write(0, 'a', 3*PageSize)
	fs.Fsync(nil, &fuse.FsyncIn{InHeader: fuse.InHeader{NodeId: ino}})
	write(PageSize, 'b', PageSize)    // unsynced change of page 1
	write(3*PageSize, 'c', PageSize)  // unsynced growth
	if _, ok := fs.Durable("f"); ok { // the name was never made durable
		t.Fatal("name durable without a directory fsync")
	}
	fs.FsyncDir(nil, &fuse.FsyncIn{InHeader: fuse.InHeader{NodeId: 1}})
	fs.Rename(nil, &fuse.RenameIn{InHeader: fuse.InHeader{NodeId: 1}, Newdir: 1}, "f", "g") // unsynced

	s, _ := fs.Crash(Strict, nil)
	got, ok := s.Durable("f")
	if !ok || !bytes.Equal(got, bytes.Repeat([]byte{'a'}, 3*PageSize)) {
		t.Fatalf("strict: %v %d bytes", ok, len(got))
	}
	if _, ok := s.Durable("g"); ok {
		t.Fatal("strict kept an unsynced rename")
	}
	seen := map[string]bool{}
	for seed := range uint64(64) {
		tn, _ := fs.Crash(Torn, rand.New(rand.NewPCG(seed, 0)))
		f, okf := tn.Durable("f")
		g, okg := tn.Durable("g")
		if okf == okg {
			t.Fatalf("torn: the rename is not atomic: f %v g %v", okf, okg)
		}
		if okg {
			f = g
			seen["renamed"] = true
		}
		if len(f) == 4*PageSize {
			seen["grown"] = true
		}
		if f[PageSize] == 'b' {
			seen["page kept"] = true
		} else if f[PageSize] == 'a' {
			seen["page lost"] = true
		}
	}
	if len(seen) != 4 {
		t.Fatalf("torn losses over 64 seeds kept only %v", seen)
	}
	fs.SetDead()
	if _, st := fs.Write(nil, &fuse.WriteIn{InHeader: fuse.InHeader{NodeId: ino}}, []byte{1}); st != fuse.EIO {
		t.Fatalf("dead: write %v", st)
	}
	if st := fs.Fsync(nil, &fuse.FsyncIn{InHeader: fuse.InHeader{NodeId: ino}}); st != fuse.EIO {
		t.Fatalf("dead: fsync %v", st)
	}
}
