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

// MemFS is an in-memory FS that can simulate a power loss. It keeps, for
// every file, the bytes a Sync made durable beside the current bytes, and
// for every directory the entries a SyncDir made durable beside the current
// ones. Crash returns the state a power loss could leave (see Crash).
//
// Directories are durable as soon as MkdirAll returns. Paths are cleaned
// with path.Clean after converting OS separators to slashes. A MemFS is safe
// for concurrent use.
type MemFS struct {
	mu      sync.Mutex
	dirs    map[string]bool
	files   map[string]*memNode // current directory entries
	durable map[string]*memNode // directory entries as of the last SyncDir
}

// memNode is one file's contents (an inode: renames move it).
type memNode struct {
	data   []byte // current contents
	synced []byte // contents as of the last Sync
}

var _ FS = (*MemFS)(nil)

// NewMemFS returns an empty MemFS whose root "/" and "." exist.
func NewMemFS() *MemFS {
	return &MemFS{
		dirs:    map[string]bool{"/": true, ".": true},
		files:   map[string]*memNode{},
		durable: map[string]*memNode{},
	}
}

func memClean(name string) string { return path.Clean(filepath.ToSlash(name)) }

func memErr(op, name string, err error) error { return &os.PathError{Op: op, Path: name, Err: err} }

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
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
		n = &memNode{}
		m.files[name] = n
	}
	n.data = nil
	return &memFile{fs: m, node: n, name: name, writable: true}, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) { return m.open("open", name, false) }

// OpenAppend implements FS.
func (m *MemFS) OpenAppend(name string) (File, error) { return m.open("open", name, true) }

func (m *MemFS) open(op, name string, writable bool) (File, error) {
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
	return nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
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
// the values drawn from rng.
//
//   - A directory entry (creation, rename, removal) that SyncDir made
//     durable survives. One that is not yet durable survives or is undone,
//     independently for each name: so an unsynced rename can leave the file
//     under both names, under either, or under none (if it was never
//     durable).
//   - A file appended to since its last Sync keeps its synced contents plus
//     a prefix of random length of the bytes that followed, so the tail may
//     end mid-record. With probability 1/4 up to 8 of the kept unsynced
//     bytes at its end are garbled.
//   - A file truncated or overwritten since its last Sync either keeps its
//     synced contents or becomes the part it shares with its current
//     contents plus a random prefix of the rest, with equal probability.
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

// crash returns the node a power loss could leave of n.
func (n *memNode) crash(rng *rand.Rand) *memNode {
	p := commonPrefix(n.synced, n.data)
	var kept []byte
	switch {
	case p == len(n.synced):
		// Appended since the last Sync: synced prefix plus part of the rest.
		extra := rng.IntN(len(n.data) - p + 1)
		kept = slices.Clone(n.data[:p+extra])
		if extra > 0 && rng.IntN(4) == 0 {
			g := 1 + rng.IntN(min(extra, 8))
			for i := len(kept) - g; i < len(kept); i++ {
				kept[i] ^= byte(1 + rng.IntN(255))
			}
		}
	case rng.IntN(2) == 0:
		kept = slices.Clone(n.synced)
	default:
		extra := rng.IntN(len(n.data) - p + 1)
		kept = slices.Clone(n.data[:p+extra])
	}
	return &memNode{data: kept, synced: slices.Clone(kept)}
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

// ReadFile returns a copy of the current contents of the named file.
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.files[memClean(name)]
	if n == nil {
		return nil, memErr("open", name, os.ErrNotExist)
	}
	return slices.Clone(n.data), nil
}

// WriteFile sets the current and durable contents of the named file,
// creating it durably if needed: a test's way to plant a given disk state.
func (m *MemFS) WriteFile(name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = memClean(name)
	if !m.dirs[path.Dir(name)] {
		return memErr("create", name, os.ErrNotExist)
	}
	n := &memNode{data: slices.Clone(data), synced: slices.Clone(data)}
	m.files[name] = n
	m.durable[name] = n
	return nil
}

// String lists the files with their current and synced sizes, for test
// failure messages.
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
		fmt.Fprintf(&b, "%s: %d bytes, %d synced%s\n", name, len(n.data), len(n.synced), durable)
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
	if f.pos >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[f.pos:])
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
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	f.node.data = append(f.node.data, p...)
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", true); err != nil {
		return err
	}
	// Sharing the array is safe: data is only ever extended past its
	// length (Write) or clipped before it shrinks (Truncate), so bytes
	// visible through synced are never written again.
	f.node.synced = slices.Clip(f.node.data)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return memErr("truncate", f.name, errors.New("negative size"))
	}
	if size <= int64(len(f.node.data)) {
		f.node.data = slices.Clip(f.node.data[:size])
	} else {
		f.node.data = append(f.node.data, make([]byte, size-int64(len(f.node.data)))...)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return 0, err
	}
	return int64(len(f.node.data)), nil
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
