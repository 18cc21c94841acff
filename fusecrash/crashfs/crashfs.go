// Package crashfs is a FUSE file system that models a disk with a
// volatile write cache, for power-loss tests of filterstore through the
// real kernel paths: write(2), mmap MAP_SHARED dirty-page writeback,
// msync, fsync, fdatasync, rename, directory fsync.
//
// # Model
//
// Every file has a current image (what reads return) and a durable image
// (what a power loss leaves). Every directory has current entries and
// durable entries. The rules, the strictest POSIX allows:
//
//   - write (write(2), and the kernel's writeback of dirty mapped pages,
//     which reaches FUSE as WRITE requests), truncate (SETATTR size),
//     fallocate (mode 0 extends the size with zeros; KEEP_SIZE is a
//     no-op; other modes are EOPNOTSUPP) change the current image only.
//   - fsync and fdatasync of a file (FSYNC, whatever its datasync flag)
//     copy its current image, data and size, to its durable image. They
//     do NOT make the file's name durable: a new file whose directory was
//     not fsynced after its creation is gone after a power loss, however
//     often the file was fsynced (ext4 keeps such a name in practice
//     because its journal commits it with the fsync; POSIX does not
//     promise it, and this model does not keep it).
//   - create, mkdir, unlink, rmdir, rename change the current entries of
//     their directories; fsync of a directory (FSYNCDIR) makes its
//     current entries durable (which names exist and which inode each
//     names). A rename between two directories is two changes, one per
//     directory, each durable with its own directory's fsync.
//   - A power loss (Crash) keeps, for every directory reachable from the
//     root through durable entries, its durable entries, and for every
//     file so reached its durable image. In Torn mode it keeps in
//     addition a random part of what was not synced, as SQLite's crash
//     VFS does: each directory keeps a random prefix of the entry changes
//     made since its last fsync (a rename within a directory is one
//     change: it happens whole or not at all); each file gets either its
//     durable or its current size, and each 4 KiB page of it that the two
//     images disagree on comes from one image or the other, at random
//     (pages past an image's end read as zeros).
//
// A dead file system (SetDead: the power is off) refuses every change,
// file writes, syncs and directory changes alike, with EIO, so that the
// kernel's writeback after the cut lands nowhere and no sync succeeds
// after it.
//
// Not modeled: a page torn into sectors; a sync that reports success
// without writing (lying disks); metadata other than size (modes, times)
// being lost; hard links and symlinks (refused); file locks, which the
// kernel keeps locally (the mount does not ask for lock forwarding).
package crashfs

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// PageSize is the granularity of a torn power loss.
const PageSize = 4096

type dirChange struct {
	name  string
	n     *node // nil: removed
	name2 string
	n2    *node // a rename: the second entry changed with the first
	two   bool
}

type node struct {
	ino  uint64
	dir  bool
	mode uint32
	// files
	cur, dur []byte
	// directories
	ents, dents map[string]*node
	log         []dirChange
	mtime       time.Time
	name        string // the last name it was given (for FailSyncSuffix)
}

// Stats counts requests the file system served.
type Stats struct {
	Writes, WriteBytes, CacheWrites, InjectedEIO, Fsyncs, Fdatasyncs, FsyncDirs, Fallocates, Truncates, Renames, Creates, Unlinks, Refused int64
}

// FS is the model file system; its methods are safe for concurrent use.
type FS struct {
	fuse.RawFileSystem
	mu     sync.Mutex
	nodes  map[uint64]*node
	next   uint64
	dead   atomic.Bool
	deadAt atomic.Int64 // CLOCK_MONOTONIC ns of the cut
	stats  Stats
	// CutAfter, if positive, kills the power (SetDead) at that change
	// request (writes, syncs, directory changes counted together); the
	// request that reaches it is refused. DeadCh is closed then.
	cutAfter int64
	changes  int64
	deadCh   chan struct{}
	deadOnce sync.Once
	// OnSync, if set, is called (with the lock held) at each file fsync
	// with the inode and the number of writes the file received so far.
	OnSync func(ino uint64, writes int64)
	// failSyncAt, if positive, fails that file sync (FSYNC) request from
	// now with EIO, once, as a disk error would: the file's data since
	// its last sync is lost (its durable content comes back, at its
	// current size, zeros past the durable end), while the kernel's page
	// cache still holds it, as Linux leaves pages whose writeback failed.
	failSyncAt, syncs int64
	failSuffix        string
	writes            map[uint64]int64
}

// New returns an empty file system.
func New() *FS {
	fs := &FS{RawFileSystem: fuse.NewDefaultRawFileSystem(), nodes: map[uint64]*node{}, next: 2, deadCh: make(chan struct{}), writes: map[uint64]int64{}}
	root := &node{ino: fuse.FUSE_ROOT_ID, dir: true, mode: syscall.S_IFDIR | 0o755, ents: map[string]*node{}, dents: map[string]*node{}, mtime: time.Now()}
	fs.nodes[root.ino] = root
	return fs
}

// SetCutAfter arms the power cut at the n-th change request from now
// (0 disarms).
func (fs *FS) SetCutAfter(n int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.changes = 0
	fs.cutAfter = n
}

// SetFailSyncAt arms one failed file sync at the n-th FSYNC request from
// now (0 disarms).
// Only syncs of files whose last name ends in suffix count ("" for all).
func (fs *FS) SetFailSyncAt(n int64, suffix string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.syncs = 0
	fs.failSyncAt = n
	fs.failSuffix = suffix
}

// Changes is the number of change requests since SetCutAfter.
func (fs *FS) Changes() int64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.changes
}

// SetDead cuts the power: every later change fails with EIO.
func (fs *FS) SetDead() {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	fs.deadAt.CompareAndSwap(0, ts.Nano())
	fs.dead.Store(true)
	fs.deadOnce.Do(func() { close(fs.deadCh) })
}

// DeadAt is the CLOCK_MONOTONIC time of the cut in ns, 0 before.
func (fs *FS) DeadAt() int64 { return fs.deadAt.Load() }

// Dead is closed once the power is cut.
func (fs *FS) Dead() <-chan struct{} { return fs.deadCh }

// Stats returns the request counts.
func (fs *FS) Stats() Stats {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.stats
}

// change counts a change request and reports whether it may go on
// (called with fs.mu held).
func (fs *FS) change() bool {
	if fs.dead.Load() {
		fs.stats.Refused++
		return false
	}
	fs.changes++
	if fs.cutAfter > 0 && fs.changes >= fs.cutAfter {
		fs.SetDead()
		fs.stats.Refused++
		return false
	}
	return true
}

func (fs *FS) String() string { return "crashfs" }

func (fs *FS) attr(n *node, a *fuse.Attr) {
	a.Ino = n.ino
	a.Mode = n.mode
	a.Blksize = PageSize
	if n.dir {
		a.Nlink = 2
		a.Size = 4096
	} else {
		a.Nlink = 1
		a.Size = uint64(len(n.cur))
	}
	a.Blocks = (a.Size + 511) / 512
	t := n.mtime
	a.Mtime, a.Mtimensec = uint64(t.Unix()), uint32(t.Nanosecond())
	a.Ctime, a.Ctimensec = a.Mtime, a.Mtimensec
	a.Atime, a.Atimensec = a.Mtime, a.Mtimensec
}

const timeout = time.Second

func (fs *FS) entry(n *node, out *fuse.EntryOut) {
	out.NodeId = n.ino
	out.Generation = 1
	out.SetEntryTimeout(timeout)
	out.SetAttrTimeout(timeout)
	fs.attr(n, &out.Attr)
}

func (fs *FS) get(id uint64) *node { return fs.nodes[id] }

func (fs *FS) Lookup(_ <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d := fs.get(h.NodeId)
	if d == nil || !d.dir {
		return fuse.ENOTDIR
	}
	n := d.ents[name]
	if n == nil {
		return fuse.ENOENT
	}
	fs.entry(n, out)
	return fuse.OK
}

func (fs *FS) Forget(nodeid, nlookup uint64) {}

func (fs *FS) GetAttr(_ <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.get(in.NodeId)
	if n == nil {
		return fuse.ENOENT
	}
	out.SetTimeout(timeout)
	fs.attr(n, &out.Attr)
	return fuse.OK
}

func resize(b []byte, size int) []byte {
	if size <= len(b) {
		return b[:size:size]
	}
	nb := make([]byte, size, size+size/4)
	copy(nb, b)
	return nb
}

func (fs *FS) SetAttr(_ <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.get(in.NodeId)
	if n == nil {
		return fuse.ENOENT
	}
	if in.Valid&fuse.FATTR_SIZE != 0 {
		if n.dir {
			return fuse.Status(syscall.EISDIR)
		}
		if !fs.change() {
			return fuse.EIO
		}
		fs.stats.Truncates++
		n.cur = resize(n.cur, int(in.Size))
		n.mtime = time.Now()
	}
	if in.Valid&fuse.FATTR_MODE != 0 {
		n.mode = n.mode&syscall.S_IFMT | in.Mode&^uint32(syscall.S_IFMT)
	}
	out.SetTimeout(timeout)
	fs.attr(n, &out.Attr)
	return fuse.OK
}

// newNode makes a node named name in directory id (fs.mu held).
func (fs *FS) newNode(id uint64, name string, dir bool, mode uint32, excl bool) (*node, fuse.Status) {
	d := fs.get(id)
	if d == nil || !d.dir {
		return nil, fuse.ENOTDIR
	}
	if old := d.ents[name]; old != nil {
		if excl || old.dir || dir {
			return nil, fuse.Status(syscall.EEXIST)
		}
		return old, fuse.OK
	}
	if !fs.change() {
		return nil, fuse.EIO
	}
	n := &node{ino: fs.next, dir: dir, mtime: time.Now(), name: name}
	fs.next++
	if dir {
		n.mode = syscall.S_IFDIR | mode&0o7777
		n.ents, n.dents = map[string]*node{}, map[string]*node{}
	} else {
		n.mode = syscall.S_IFREG | mode&0o7777
	}
	fs.nodes[n.ino] = n
	d.ents[name] = n
	d.log = append(d.log, dirChange{name: name, n: n})
	d.mtime = time.Now()
	return n, fuse.OK
}

func (fs *FS) Mkdir(_ <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, st := fs.newNode(in.NodeId, name, true, in.Mode, true)
	if !st.Ok() {
		return st
	}
	fs.entry(n, out)
	return fuse.OK
}

func (fs *FS) Mknod(_ <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if in.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fuse.EPERM
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, st := fs.newNode(in.NodeId, name, false, in.Mode, true)
	if !st.Ok() {
		return st
	}
	fs.stats.Creates++
	fs.entry(n, out)
	return fuse.OK
}

func (fs *FS) Create(_ <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, st := fs.newNode(in.NodeId, name, false, in.Mode, in.Flags&syscall.O_EXCL != 0)
	if !st.Ok() {
		return st
	}
	fs.stats.Creates++
	if in.Flags&syscall.O_TRUNC != 0 && len(n.cur) > 0 {
		if !fs.change() {
			return fuse.EIO
		}
		n.cur = n.cur[:0:0]
	}
	fs.entry(n, &out.EntryOut)
	out.OpenOut.Fh = n.ino
	out.OpenOut.OpenFlags = fuse.FOPEN_KEEP_CACHE
	return fuse.OK
}

func (fs *FS) remove(id uint64, name string, dir bool) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d := fs.get(id)
	if d == nil || !d.dir {
		return fuse.ENOTDIR
	}
	n := d.ents[name]
	switch {
	case n == nil:
		return fuse.ENOENT
	case dir && !n.dir:
		return fuse.ENOTDIR
	case !dir && n.dir:
		return fuse.Status(syscall.EISDIR)
	case dir && len(n.ents) > 0:
		return fuse.Status(syscall.ENOTEMPTY)
	}
	if !fs.change() {
		return fuse.EIO
	}
	fs.stats.Unlinks++
	delete(d.ents, name)
	d.log = append(d.log, dirChange{name: name})
	d.mtime = time.Now()
	return fuse.OK
}

func (fs *FS) Unlink(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return fs.remove(h.NodeId, name, false)
}

func (fs *FS) Rmdir(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return fs.remove(h.NodeId, name, true)
}

const (
	renameNoReplace = 1
	renameExchange  = 2
)

func (fs *FS) Rename(_ <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	from, to := fs.get(in.NodeId), fs.get(in.Newdir)
	if from == nil || to == nil || !from.dir || !to.dir {
		return fuse.ENOTDIR
	}
	if in.Flags&^uint32(renameNoReplace) != 0 {
		return fuse.EINVAL // RENAME_EXCHANGE, RENAME_WHITEOUT: not modeled
	}
	n := from.ents[oldName]
	if n == nil {
		return fuse.ENOENT
	}
	old := to.ents[newName]
	if old == n {
		return fuse.OK
	}
	if old != nil {
		switch {
		case in.Flags&renameNoReplace != 0:
			return fuse.Status(syscall.EEXIST)
		case old.dir && !n.dir:
			return fuse.Status(syscall.EISDIR)
		case !old.dir && n.dir:
			return fuse.ENOTDIR
		case old.dir && len(old.ents) > 0:
			return fuse.Status(syscall.ENOTEMPTY)
		}
	}
	if !fs.change() {
		return fuse.EIO
	}
	fs.stats.Renames++
	delete(from.ents, oldName)
	to.ents[newName] = n
	n.name = newName
	if from == to {
		from.log = append(from.log, dirChange{name: oldName, name2: newName, n2: n, two: true})
	} else {
		from.log = append(from.log, dirChange{name: oldName})
		to.log = append(to.log, dirChange{name: newName, n: n})
	}
	from.mtime, to.mtime = time.Now(), time.Now()
	return fuse.OK
}

func (fs *FS) Link(<-chan struct{}, *fuse.LinkIn, string, *fuse.EntryOut) fuse.Status {
	return fuse.EPERM
}

func (fs *FS) Access(<-chan struct{}, *fuse.AccessIn) fuse.Status { return fuse.OK }

func (fs *FS) Open(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.get(in.NodeId)
	if n == nil {
		return fuse.ENOENT
	}
	if n.dir {
		return fuse.Status(syscall.EISDIR)
	}
	if in.Flags&syscall.O_TRUNC != 0 && len(n.cur) > 0 {
		if !fs.change() {
			return fuse.EIO
		}
		n.cur = n.cur[:0:0]
	}
	out.Fh = n.ino
	// Never FOPEN_DIRECT_IO: it breaks shared writable mappings. Keep the
	// cache: every change goes through this kernel.
	out.OpenFlags = fuse.FOPEN_KEEP_CACHE
	return fuse.OK
}

func (fs *FS) Read(_ <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.get(in.NodeId)
	if n == nil {
		return nil, fuse.ENOENT
	}
	off := int(in.Offset)
	if off >= len(n.cur) {
		return fuse.ReadResultData(nil), fuse.OK
	}
	c := copy(buf[:min(len(buf), int(in.Size))], n.cur[off:])
	return fuse.ReadResultData(buf[:c]), fuse.OK
}

func (fs *FS) Write(_ <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.get(in.NodeId)
	if n == nil {
		return 0, fuse.ENOENT
	}
	if !fs.change() {
		return 0, fuse.EIO
	}
	fs.stats.Writes++
	if in.WriteFlags&1 != 0 { // FUSE_WRITE_CACHE: page cache writeback (mmap)
		fs.stats.CacheWrites++
	}
	fs.stats.WriteBytes += int64(len(data))
	fs.writes[n.ino]++
	end := int(in.Offset) + len(data)
	if end > len(n.cur) {
		n.cur = resize(n.cur, end)
	}
	copy(n.cur[in.Offset:], data)
	n.mtime = time.Now()
	return uint32(len(data)), fuse.OK
}

func (fs *FS) Flush(<-chan struct{}, *fuse.FlushIn) fuse.Status { return fuse.OK }
func (fs *FS) Release(<-chan struct{}, *fuse.ReleaseIn)         {}

func (fs *FS) Fsync(_ <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.get(in.NodeId)
	if n == nil {
		return fuse.ENOENT
	}
	if !fs.change() {
		return fuse.EIO
	}
	if strings.HasSuffix(n.name, fs.failSuffix) {
		fs.syncs++
	}
	if fs.failSyncAt > 0 && fs.syncs == fs.failSyncAt && strings.HasSuffix(n.name, fs.failSuffix) {
		fs.stats.InjectedEIO++
		lost := make([]byte, len(n.cur))
		copy(lost, n.dur)
		n.cur = lost
		return fuse.EIO
	}
	if in.FsyncFlags&1 != 0 {
		fs.stats.Fdatasyncs++
	} else {
		fs.stats.Fsyncs++
	}
	if fs.OnSync != nil {
		fs.OnSync(n.ino, fs.writes[n.ino])
	}
	n.dur = bytes.Clone(n.cur)
	if n.dur == nil {
		n.dur = []byte{}
	}
	return fuse.OK
}

func (fs *FS) Fallocate(_ <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	const keepSize = 1
	if in.Mode&^uint32(keepSize) != 0 {
		return fuse.Status(syscall.EOPNOTSUPP)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.get(in.NodeId)
	if n == nil {
		return fuse.ENOENT
	}
	if !fs.change() {
		return fuse.EIO
	}
	fs.stats.Fallocates++
	if end := int(in.Offset + in.Length); in.Mode&keepSize == 0 && end > len(n.cur) {
		n.cur = resize(n.cur, end)
		n.mtime = time.Now()
	}
	return fuse.OK
}

type dirHandle struct{ ents []fuse.DirEntry }

var (
	dirMu      sync.Mutex
	dirHandles        = map[uint64]*dirHandle{}
	nextDirFh  uint64 = 1
)

func (fs *FS) OpenDir(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	fs.mu.Lock()
	d := fs.get(in.NodeId)
	if d == nil || !d.dir {
		fs.mu.Unlock()
		return fuse.ENOTDIR
	}
	h := &dirHandle{ents: []fuse.DirEntry{{Name: ".", Ino: d.ino, Mode: syscall.S_IFDIR}, {Name: "..", Ino: 1, Mode: syscall.S_IFDIR}}}
	names := mapsKeys(d.ents)
	slices.Sort(names)
	for _, name := range names {
		n := d.ents[name]
		h.ents = append(h.ents, fuse.DirEntry{Name: name, Ino: n.ino, Mode: n.mode})
	}
	fs.mu.Unlock()
	dirMu.Lock()
	out.Fh = nextDirFh
	nextDirFh++
	dirHandles[out.Fh] = h
	dirMu.Unlock()
	return fuse.OK
}

func mapsKeys(m map[string]*node) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func (fs *FS) ReadDir(_ <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	dirMu.Lock()
	h := dirHandles[in.Fh]
	dirMu.Unlock()
	if h == nil {
		return fuse.EBADF
	}
	for i := int(in.Offset); i < len(h.ents); i++ {
		e := h.ents[i]
		e.Off = uint64(i + 1)
		if !out.AddDirEntry(e) {
			break
		}
	}
	return fuse.OK
}

func (fs *FS) ReadDirPlus(<-chan struct{}, *fuse.ReadIn, *fuse.DirEntryList) fuse.Status {
	return fuse.ENOSYS
}

func (fs *FS) ReleaseDir(in *fuse.ReleaseIn) {
	dirMu.Lock()
	delete(dirHandles, in.Fh)
	dirMu.Unlock()
}

func (fs *FS) FsyncDir(_ <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d := fs.get(in.NodeId)
	if d == nil || !d.dir {
		return fuse.ENOTDIR
	}
	if !fs.change() {
		return fuse.EIO
	}
	fs.stats.FsyncDirs++
	d.dents = maps(d.ents)
	d.log = nil
	return fuse.OK
}

func maps(m map[string]*node) map[string]*node {
	c := make(map[string]*node, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (fs *FS) StatFs(_ <-chan struct{}, _ *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	out.Bsize, out.Frsize, out.NameLen = PageSize, PageSize, 255
	out.Blocks, out.Bfree, out.Bavail = 1<<24, 1<<23, 1<<23
	out.Files, out.Ffree = 1<<20, 1<<19
	return fuse.OK
}

// Mode is how a power loss treats what was not synced.
type Mode int

const (
	// Strict keeps only what was synced.
	Strict Mode = iota
	// Torn keeps, besides, a random part of what was not (see the
	// package doc).
	Torn
)

func (m Mode) String() string {
	if m == Torn {
		return "torn"
	}
	return "strict"
}

// CrashReport says what a power loss did.
type CrashReport struct {
	Files, Dirs                int
	LostEntries, KeptUnsynced  int // directory changes lost / kept (torn) of those not synced
	LostPages, KeptUnsyncedPgs int // file pages that differed: lost / kept (torn)
	SizeChanged                int // files whose size went back
}

func (r CrashReport) String() string {
	return fmt.Sprintf("%d files, %d dirs; dir changes lost %d kept %d; pages lost %d kept %d; sizes reverted %d",
		r.Files, r.Dirs, r.LostEntries, r.KeptUnsynced, r.LostPages, r.KeptUnsyncedPgs, r.SizeChanged)
}

// Crash returns the file system a power loss leaves of fs, which must
// be unmounted; rng draws what a Torn loss keeps.
func (fs *FS) Crash(mode Mode, rng *rand.Rand) (*FS, CrashReport) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var rep CrashReport
	nfs := New()
	nfs.next = fs.next
	done := map[*node]*node{}
	var visit func(n *node) *node
	visit = func(n *node) *node {
		if c := done[n]; c != nil {
			return c
		}
		c := &node{ino: n.ino, dir: n.dir, mode: n.mode, mtime: n.mtime, name: n.name}
		done[n] = c
		nfs.nodes[c.ino] = c
		if n.dir {
			rep.Dirs++
			ents := maps(n.dents)
			keep := 0
			if mode == Torn && len(n.log) > 0 {
				keep = rng.IntN(len(n.log) + 1)
			}
			for _, ch := range n.log[:keep] {
				if ch.two {
					delete(ents, ch.name)
					ents[ch.name2] = ch.n2
					continue
				}
				if ch.n == nil {
					delete(ents, ch.name)
				} else {
					ents[ch.name] = ch.n
				}
			}
			rep.KeptUnsynced += keep
			rep.LostEntries += len(n.log) - keep
			c.ents, c.dents = map[string]*node{}, map[string]*node{}
			for name, e := range ents {
				ce := visit(e)
				c.ents[name], c.dents[name] = ce, ce
			}
			return c
		}
		rep.Files++
		dur := n.dur
		if mode == Strict {
			c.cur = bytes.Clone(dur)
		} else {
			size := len(dur)
			if rng.IntN(2) == 0 {
				size = len(n.cur)
			}
			img := make([]byte, size)
			for off := 0; off < size; off += PageSize {
				end := min(off+PageSize, size)
				d, u := page(dur, off, end), page(n.cur, off, end)
				if bytes.Equal(d, u) {
					copy(img[off:], d)
				} else if rng.IntN(2) == 0 {
					copy(img[off:], u)
					rep.KeptUnsyncedPgs++
				} else {
					copy(img[off:], d)
					rep.LostPages++
				}
			}
			c.cur = img
		}
		if len(c.cur) != len(n.cur) {
			rep.SizeChanged++
		}
		if mode == Strict {
			for off := 0; off < max(len(n.cur), len(dur)); off += PageSize {
				end := off + PageSize
				if !bytes.Equal(page(dur, off, end), page(n.cur, off, end)) {
					rep.LostPages++
				}
			}
		}
		c.dur = bytes.Clone(c.cur)
		return c
	}
	root := visit(fs.nodes[fuse.FUSE_ROOT_ID])
	nfs.nodes[fuse.FUSE_ROOT_ID] = root
	return nfs, rep
}

// page is b[off:end] padded with zeros to end-off bytes.
func page(b []byte, off, end int) []byte {
	p := make([]byte, end-off)
	if off < len(b) {
		copy(p, b[off:min(end, len(b))])
	}
	return p
}

// Durable returns the durable image of the file at path (slash
// separated, relative to the root), as a power loss would leave it, and
// whether its name is durable.
func (fs *FS) Durable(path string) ([]byte, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[fuse.FUSE_ROOT_ID]
	for _, part := range strings.Split(path, "/") {
		if n == nil || !n.dir {
			return nil, false
		}
		n = n.dents[part]
	}
	if n == nil || n.dir {
		return nil, false
	}
	return bytes.Clone(n.dur), true
}

// Mount serves fs at dir (which must exist) until Unmount.
func (fs *FS) Mount(dir string) (*fuse.Server, error) {
	srv, err := fuse.NewServer(fs, dir, &fuse.MountOptions{
		FsName: "crashfs", Name: "crashfs",
		DirectMount: true, DirectMountStrict: true,
		DisableXAttrs: true, DisableReadDirPlus: true,
		MaxWrite: 1 << 20,
	})
	if err != nil {
		return nil, err
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, err
	}
	return srv, nil
}
