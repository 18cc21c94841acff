package wal

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// MemFS is an in-memory FS that can simulate a power loss, the death of the
// process using it, and failing operations. It keeps, for every file, the
// bytes a Sync made durable beside the current bytes, and for every
// directory the entries a SyncDir made durable beside the current ones.
// Crash returns the state a power loss could leave, Kill the state a
// process crash leaves, and SetInjector makes operations fail.
//
// A failed Sync behaves as fsync does on Linux (PostgreSQL's "fsyncgate"):
// the kernel marks the pages it could not write back clean, so every byte
// written to the file since its last successful Sync is lost. A lost byte
// still reads back (the page cache keeps it, also across Kill), but no
// later Sync makes it durable, because the kernel no longer knows it needs
// writing: the durable contents hold zeros there, and Crash never keeps
// it, until a write into its page (of memPage bytes) dirties the page
// again: then the lost bytes of that page are dirty again too, and reach
// the disk with the page, as the kernel writes back whole pages (before,
// they stayed lost while a later write beside them in the same page did
// not, a state Linux cannot leave: a WAL record zeroed and the next one
// intact after a power loss, which the log reads as corruption). Lost
// bytes are tracked byte by byte. Bytes written after the failure are
// dirty as usual. A failed Sync does not change the
// durable size: a later successful Sync records the size as of then.
//
// Allocate (memFile implements Allocator) reserves zero bytes past a
// file's data without storing them: reads see them, Write writes over
// them, Truncate drops them. The file's size with the reservation is
// durable after a successful Sync; Crash keeps it, or a later unsynced
// one, with the zeros past whatever data it keeps.
//
// Directories are durable as soon as MkdirAll returns. Paths are cleaned
// with path.Clean after converting OS separators to slashes. A MemFS is safe
// for concurrent use.
type MemFS struct {
	mu      sync.Mutex
	dirs    map[string]bool
	files   map[string]*memNode // current directory entries
	durable map[string]*memNode // directory entries as of the last SyncDir
	inject  func(op Op, name string) error
}

// memPage is the unit in which Crash writes back pages out of order.
const memPage = 4096

// memNode is one file's contents (an inode: renames move it).
type memNode struct {
	path   string // the name it was last created or renamed as
	data   []byte // current contents: what reads see
	synced []byte // durable contents: as of the last successful Sync, with lost bytes zeroed
	dirty  spans  // bytes of data written since the last Sync, failed or not
	lost   spans  // bytes of data a failed Sync dropped: readable, never durable

	// end is the size of the file: len(data), or more after Allocate,
	// the bytes past data reading as zeros. syncedEnd is the size as of
	// the last successful Sync.
	end, syncedEnd int64
}

// size returns the size of the file.
func (n *memNode) size() int64 { return max(n.end, int64(len(n.data))) }

// readAt copies the file's bytes from off into p: its data, then zeros
// up to its size.
func (n *memNode) readAt(p []byte, off int64) int {
	size := n.size()
	if off >= size {
		return 0
	}
	p = p[:min(int64(len(p)), size-off)]
	c := 0
	if off < int64(len(n.data)) {
		c = copy(p, n.data[off:])
	}
	clear(p[c:])
	return len(p)
}

var _ FS = (*MemFS)(nil)

// Op names a file system operation for fault injection.
type Op int

// The operations of a MemFS that SetInjector can fail. Open covers both
// Open and OpenAppend.
const (
	OpCreate Op = iota + 1
	OpOpen
	OpWrite
	OpSync
	OpTruncate
	OpRename
	OpRemove
	OpList
	OpMkdirAll
	OpSyncDir
	OpAllocate
)

var opNames = [...]string{
	OpCreate:   "create",
	OpOpen:     "open",
	OpWrite:    "write",
	OpSync:     "sync",
	OpTruncate: "truncate",
	OpRename:   "rename",
	OpRemove:   "remove",
	OpList:     "list",
	OpMkdirAll: "mkdirall",
	OpSyncDir:  "syncdir",
	OpAllocate: "allocate",
}

// String returns the operation's name in lower case, e.g. "sync".
func (o Op) String() string {
	if o >= OpCreate && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// NewMemFS returns an empty MemFS whose root "/" and "." exist.
func NewMemFS() *MemFS {
	return &MemFS{
		dirs:    map[string]bool{"/": true, ".": true},
		files:   map[string]*memNode{},
		durable: map[string]*memNode{},
	}
}

// SetInjector makes every later operation call fn first (nil removes it); a
// non-nil error from fn makes the operation fail with that error (wrapped in
// *os.PathError) instead of running. name is the path the operation was
// given as the caller spelled it: the file's for file operations, the old
// name for Rename, the directory for List, MkdirAll and SyncDir. fn runs
// with no lock held, so it may use m (take a Crash or Kill image, say); it
// must be safe for concurrent use if m is used concurrently. ReadFile,
// WriteFile, and reads, Size and Close on files are not injected.
//
// An injected Write error writes nothing. An injected Sync error loses the
// bytes written since the file's last successful Sync (see MemFS).
func (m *MemFS) SetInjector(fn func(op Op, name string) error) {
	m.mu.Lock()
	m.inject = fn
	m.mu.Unlock()
}

// injected calls the injector, if any, for op on the cleaned name and
// returns its error as a *os.PathError.
func (m *MemFS) injected(op Op, name string) error {
	m.mu.Lock()
	fn := m.inject
	m.mu.Unlock()
	if fn == nil {
		return nil
	}
	name = memClean(name)
	if err := fn(op, name); err != nil {
		return memErr(op.String(), name, err)
	}
	return nil
}

func memClean(name string) string { return path.Clean(filepath.ToSlash(name)) }

func memErr(op, name string, err error) error { return &os.PathError{Op: op, Path: name, Err: err} }

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	if err := m.injected(OpCreate, name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	name = memClean(name)
	if !m.dirs[path.Dir(name)] {
		return nil, memErr("create", name, os.ErrNotExist)
	}
	if m.dirs[name] {
		return nil, memErr("create", name, errors.New("is a directory"))
	}
	n := m.files[name]
	if n == nil {
		n = &memNode{path: name}
		m.files[name] = n
	}
	n.truncate(0)
	return &memFile{fs: m, node: n, name: name, writable: true}, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) { return m.open("open", name, false) }

// OpenAppend implements FS.
func (m *MemFS) OpenAppend(name string) (File, error) { return m.open("open", name, true) }

func (m *MemFS) open(op, name string, writable bool) (File, error) {
	if err := m.injected(OpOpen, name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	name = memClean(name)
	n := m.files[name]
	if n == nil {
		return nil, memErr(op, name, os.ErrNotExist)
	}
	return &memFile{fs: m, node: n, name: name, writable: writable}, nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	if err := m.injected(OpRename, oldname); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	oldname, newname = memClean(oldname), memClean(newname)
	n := m.files[oldname]
	if n == nil {
		return memErr("rename", oldname, os.ErrNotExist)
	}
	if !m.dirs[path.Dir(newname)] {
		return memErr("rename", newname, os.ErrNotExist)
	}
	delete(m.files, oldname)
	m.files[newname] = n
	n.path = newname
	return nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	if err := m.injected(OpRemove, name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	name = memClean(name)
	if m.files[name] == nil {
		return memErr("remove", name, os.ErrNotExist)
	}
	delete(m.files, name)
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	if err := m.injected(OpList, dir); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = memClean(dir)
	if !m.dirs[dir] {
		return nil, memErr("readdir", dir, os.ErrNotExist)
	}
	var names []string
	for name := range m.files {
		if path.Dir(name) == dir {
			names = append(names, path.Base(name))
		}
	}
	for d := range m.dirs {
		if d != dir && path.Dir(d) == dir {
			names = append(names, path.Base(d))
		}
	}
	slices.Sort(names)
	return names, nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string) error {
	if err := m.injected(OpMkdirAll, dir); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := memClean(dir); !m.dirs[d]; d = path.Dir(d) {
		if m.files[d] != nil {
			return memErr("mkdir", d, errors.New("not a directory"))
		}
		m.dirs[d] = true
	}
	return nil
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(dir string) error {
	if err := m.injected(OpSyncDir, dir); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = memClean(dir)
	if !m.dirs[dir] {
		return memErr("sync", dir, os.ErrNotExist)
	}
	for name := range m.durable {
		if path.Dir(name) == dir && m.files[name] == nil {
			delete(m.durable, name)
		}
	}
	for name, n := range m.files {
		if path.Dir(name) == dir {
			m.durable[name] = n
		}
	}
	return nil
}

// Crash returns a new MemFS holding a state that a power loss at this
// instant could leave on disk; m itself is unchanged and open files keep
// writing to m. The result is a deterministic function of m's state and
// the values drawn from rng. It has no injector.
//
//   - A directory entry (creation, rename, removal) that SyncDir made
//     durable survives. One that is not yet durable survives or is undone,
//     independently for each name: so an unsynced rename can leave the file
//     under both names, under either, or under none (if it was never
//     durable).
//   - A file written since its last Sync over zeros that Allocate reserved
//     and a Sync made durable may, half of the time, keep each 4 KiB page
//     of the new bytes or not, independently (out-of-order writeback),
//     and none past the durable size; otherwise the next rule applies.
//   - A file appended to since its last Sync keeps its synced contents plus
//     a prefix of random length of the bytes that followed, so the tail may
//     end mid-record. With probability 1/4 up to 8 of the kept unsynced
//     bytes at its end are garbled.
//   - A file truncated or overwritten since its last Sync either keeps its
//     synced contents or becomes the part it shares with its current
//     contents plus a random prefix of the rest, with equal probability.
//   - A byte a failed Sync lost (see MemFS) is never kept: where the rules
//     above draw on the current contents, it is a zero (and a successful
//     Sync after the failure put a zero there in the synced contents).
//   - Files reachable under two names after the crash share one outcome.
func (m *MemFS) Crash(rng *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.files)+len(m.durable))
	for name := range m.files {
		names = append(names, name)
	}
	for name := range m.durable {
		if m.files[name] == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names) // map order must not reach rng

	out := NewMemFS()
	for d := range m.dirs {
		out.dirs[d] = true
	}
	crashed := map[*memNode]*memNode{}
	for _, name := range names {
		cur, dur := m.files[name], m.durable[name]
		n := cur
		if cur != dur && rng.IntN(2) == 0 {
			n = dur
		}
		if n == nil {
			continue
		}
		c := crashed[n]
		if c == nil {
			c = n.crash(rng)
			crashed[n] = c
		}
		out.files[name] = c
		out.durable[name] = c
	}
	return out
}

// Kill returns the state the files are in after the process using m dies
// while the operating system keeps running: every file's current contents
// and every directory entry survive (the page cache keeps them); what is
// durable and what a failed sync lost carries over, so a Crash of the
// result loses what a Crash of m would. Files open on m are not connected
// to the result (writes through them after Kill never reach it). m itself
// is unchanged. The result has no injector.
func (m *MemFS) Kill() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := NewMemFS()
	for d := range m.dirs {
		out.dirs[d] = true
	}
	clones := map[*memNode]*memNode{}
	clone := func(n *memNode) *memNode {
		c := clones[n]
		if c == nil {
			c = &memNode{
				path:   n.path,
				data:   slices.Clone(n.data),
				synced: slices.Clone(n.synced),
				dirty:  slices.Clone(n.dirty),
				lost:   slices.Clone(n.lost),

				end:       n.end,
				syncedEnd: n.syncedEnd,
			}
			clones[n] = c
		}
		return c
	}
	for name, n := range m.files {
		out.files[name] = clone(n)
	}
	for name, n := range m.durable {
		out.durable[name] = clone(n)
	}
	return out
}

// crash returns the node a power loss could leave of n.
func (n *memNode) crash(rng *rand.Rand) *memNode {
	cur := n.durableView()
	p := commonPrefix(n.synced, cur)
	var kept []byte
	switch {
	case p == len(n.synced) && n.syncedEnd > int64(p) && rng.IntN(2) == 0:
		// Written over reserved zeros whose size is durable (Allocate,
		// then Sync): the dirty pages reach the disk in any order, each
		// whole or not at all, so a page of the old zeros can sit
		// before a page of new data; nothing past the durable size.
		kept = slices.Clone(cur[:min(int64(len(cur)), n.syncedEnd)])
		for at := p / memPage * memPage; at < len(kept); at += memPage {
			if rng.IntN(2) == 0 {
				clear(kept[max(at, p):min(at+memPage, len(kept))]) // the page as synced
			}
		}
	case p == len(n.synced):
		// Appended since the last Sync: synced prefix plus part of the rest.
		extra := rng.IntN(len(cur) - p + 1)
		kept = slices.Clone(cur[:p+extra])
		if extra > 0 && rng.IntN(4) == 0 {
			g := 1 + rng.IntN(min(extra, 8))
			for i := len(kept) - g; i < len(kept); i++ {
				kept[i] ^= byte(1 + rng.IntN(255))
			}
		}
	case rng.IntN(2) == 0:
		kept = slices.Clone(n.synced)
	default:
		extra := rng.IntN(len(cur) - p + 1)
		kept = slices.Clone(cur[:p+extra])
	}
	// The size Allocate reserved: the durable one, or the current one if
	// it is not durable yet; zeros past the data kept.
	end := n.syncedEnd
	if n.end != n.syncedEnd && rng.IntN(2) == 0 {
		end = n.end
	}
	end = max(end, int64(len(kept)))
	return &memNode{path: n.path, data: kept, synced: slices.Clone(kept), end: end, syncedEnd: end}
}

// durableView returns the current contents as they could reach the disk:
// with the lost bytes zeroed. It shares data when nothing is lost.
func (n *memNode) durableView() []byte {
	if len(n.lost) == 0 {
		return n.data
	}
	b := slices.Clone(n.data)
	for _, s := range n.lost {
		clear(b[s.lo:s.hi])
	}
	return b
}

// write appends p to the data (over reserved zeros, if any).
func (n *memNode) write(p []byte) {
	off := int64(len(n.data))
	n.data = append(n.data, p...)
	end := int64(len(n.data))
	if off == end {
		return
	}
	n.dirty = n.dirty.add(off, end)
	// The write dirties every page it touches, as the kernel's does, and
	// with it the bytes a failed Sync lost there, still in the page
	// cache: they reach the disk with the page or not at all.
	lo, hi := off/memPage*memPage, (end+memPage-1)/memPage*memPage
	for _, s := range n.lost {
		if s.hi > lo && s.lo < hi {
			n.dirty = n.dirty.add(max(s.lo, lo), min(s.hi, hi))
		}
	}
	n.lost = n.lost.remove(lo, hi)
}

// truncate changes the size of the contents to size, dropping any
// reservation.
func (n *memNode) truncate(size int64) {
	n.end = 0
	old := int64(len(n.data))
	if size <= old {
		// Clip, so that a later append cannot write into an array that
		// synced may share.
		n.data = slices.Clip(n.data[:size])
		n.dirty = n.dirty.remove(size, old)
		n.lost = n.lost.remove(size, old)
		return
	}
	n.data = append(n.data, make([]byte, size-old)...)
	n.dirty = n.dirty.add(old, size)
}

// sync records the outcome of a Sync: on success the contents (less the
// lost bytes) become durable; on failure the dirty bytes become lost.
func (n *memNode) sync(ok bool) {
	if ok {
		// Sharing the array when nothing is lost is safe: data is only
		// ever extended past its length (write) or clipped before it
		// shrinks (truncate), so bytes visible through synced are never
		// written again.
		n.synced = slices.Clip(n.durableView())
		n.syncedEnd = n.size()
	} else {
		n.lost = n.lost.union(n.dirty)
	}
	n.dirty = nil
}

// span is the byte range [lo, hi) of a file.
type span struct{ lo, hi int64 }

// spans is a set of bytes: sorted, disjoint, non-adjacent, non-empty spans.
type spans []span

// add returns s with [lo, hi) added.
func (s spans) add(lo, hi int64) spans {
	if lo >= hi {
		return s
	}
	var out spans
	i := 0
	for ; i < len(s) && s[i].hi < lo; i++ {
		out = append(out, s[i])
	}
	for ; i < len(s) && s[i].lo <= hi; i++ {
		lo, hi = min(lo, s[i].lo), max(hi, s[i].hi)
	}
	out = append(out, span{lo, hi})
	return append(out, s[i:]...)
}

// remove returns s without [lo, hi).
func (s spans) remove(lo, hi int64) spans {
	if lo >= hi {
		return s
	}
	var out spans
	for _, x := range s {
		if x.hi <= lo || x.lo >= hi {
			out = append(out, x)
			continue
		}
		if x.lo < lo {
			out = append(out, span{x.lo, lo})
		}
		if x.hi > hi {
			out = append(out, span{hi, x.hi})
		}
	}
	return out
}

// union returns the bytes in s or t.
func (s spans) union(t spans) spans {
	for _, x := range t {
		s = s.add(x.lo, x.hi)
	}
	return s
}

// size returns the number of bytes in s.
func (s spans) size() int64 {
	var n int64
	for _, x := range s {
		n += x.hi - x.lo
	}
	return n
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// ReadFile returns a copy of the current contents of the named file,
// with the zeros Allocate reserved past its data.
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.files[memClean(name)]
	if n == nil {
		return nil, memErr("open", name, os.ErrNotExist)
	}
	b := make([]byte, n.size())
	n.readAt(b, 0)
	return b, nil
}

// WriteFile sets the current and durable contents of the named file,
// creating it durably if needed: a test's way to plant a given disk state.
// It is not subject to the injector, nor is ReadFile.
func (m *MemFS) WriteFile(name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = memClean(name)
	if !m.dirs[path.Dir(name)] {
		return memErr("create", name, os.ErrNotExist)
	}
	n := &memNode{path: name, data: slices.Clone(data), synced: slices.Clone(data)}
	m.files[name] = n
	m.durable[name] = n
	return nil
}

// String lists the files with their current, synced and lost sizes, for
// test failure messages.
func (m *MemFS) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.files))
	for name := range m.files {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		n := m.files[name]
		durable := ""
		if m.durable[name] != n {
			durable = " (entry not durable)"
		}
		lost := ""
		if k := n.lost.size(); k > 0 {
			lost = fmt.Sprintf(", %d lost", k)
		}
		reserved := ""
		if k := n.size() - int64(len(n.data)); k > 0 {
			reserved = fmt.Sprintf(" (+%d reserved)", k)
		}
		fmt.Fprintf(&b, "%s: %d bytes%s, %d synced%s%s\n", name, len(n.data), reserved, len(n.synced), lost, durable)
	}
	return b.String()
}

type memFile struct {
	fs       *MemFS
	node     *memNode
	name     string
	writable bool
	pos      int64 // Read position
	closed   bool
}

var errMemClosed = errors.New("file already closed")
var errMemReadOnly = errors.New("file opened read-only")

func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return memErr(op, f.name, errMemClosed)
	}
	if write && !f.writable {
		return memErr(op, f.name, errMemReadOnly)
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	n := f.node.readAt(p, f.pos)
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	f.pos += int64(n)
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, memErr("read", f.name, errors.New("negative offset"))
	}
	n := f.node.readAt(p, off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// injected calls the injector for op on the file's current name.
func (f *memFile) injected(op Op) error {
	f.fs.mu.Lock()
	name := f.node.path
	f.fs.mu.Unlock()
	return f.fs.injected(op, name)
}

func (f *memFile) Write(p []byte) (int, error) {
	if err := f.injected(OpWrite); err != nil {
		return 0, err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	f.node.write(p)
	return len(p), nil
}

func (f *memFile) Sync() error {
	injErr := f.injected(OpSync)
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", true); err != nil {
		return err
	}
	f.node.sync(injErr == nil)
	return injErr
}

func (f *memFile) Truncate(size int64) error {
	if err := f.injected(OpTruncate); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return memErr("truncate", f.name, errors.New("negative size"))
	}
	f.node.truncate(size)
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return 0, err
	}
	return f.node.size(), nil
}

// Allocate implements Allocator.
func (f *memFile) Allocate(size int64) error {
	if err := f.injected(OpAllocate); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("allocate", true); err != nil {
		return err
	}
	if size < 0 {
		return memErr("allocate", f.name, errors.New("negative size"))
	}
	f.node.end = max(f.node.size(), size)
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close", false); err != nil {
		return err
	}
	f.closed = true
	return nil
}
