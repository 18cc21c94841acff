package wal

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/filterstore/filterstore/internal/dirsync"
	"github.com/filterstore/filterstore/internal/regfile"
)

// FS is the file system seam of the log: OSFS in production, MemFS in
// crash tests. Names are slash- or OS-separated paths as the caller built
// them with path/filepath; an implementation need not support anything
// else. Errors for a missing file satisfy errors.Is(err, os.ErrNotExist).
type FS interface {
	// Create creates the named file, or truncates it if it exists, and
	// opens it for reading and appending (writing at the end of its data). Its directory entry is durable
	// only after SyncDir on its directory.
	Create(name string) (File, error)
	// Open opens an existing file for reading only; Write, Truncate and
	// Sync on it may fail.
	Open(name string) (File, error)
	// OpenAppend opens an existing file for reading and appending: every
	// Write goes to the end of the file's data, which is the end of the
	// file as opened.
	OpenAppend(name string) (File, error)
	// Rename atomically renames oldname to newname, replacing newname if it
	// exists. The change is durable only after SyncDir on the directory.
	Rename(oldname, newname string) error
	// Remove removes the named file. The removal is durable only after
	// SyncDir on its directory; until then a crash may bring the file back.
	Remove(name string) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// MkdirAll creates dir and any missing parents, and makes them durable.
	MkdirAll(dir string) error
	// SyncDir makes the creations, renames and removals of entries of dir
	// durable.
	SyncDir(dir string) error
}

// File is an open file of an FS. A File is not required to be safe for
// concurrent use, except that ReadAt may run concurrently with Write.
type File interface {
	// Read reads sequentially from the start of the file.
	io.Reader
	// Write appends to the end of the file's data: the end of the file,
	// unless Allocate (see Allocator) reserved zeros past it, which Write
	// then writes over.
	io.Writer
	// ReadAt reads at an absolute offset, without moving the Read position.
	io.ReaderAt
	// Sync makes the file's contents and size durable (fdatasync): at
	// least the bytes written before it began. The log may Write while a
	// Sync runs (under SyncInterval). After an error from Sync the state
	// of the unsynced data is unknown: on Linux it may be lost for good
	// while it still reads back (see MemFS), so the log never retries a
	// failed Sync.
	Sync() error
	// Truncate changes the size of the file, and makes the end of its
	// data the new size. The new size is durable after Sync.
	Truncate(size int64) error
	// Size returns the current size of the file.
	Size() (int64, error)
	// Close closes the file. It does not sync.
	Close() error
}

// Allocator is implemented by the writable Files of OSFS and MemFS. The
// log reserves the space of its last segment ahead of its writes with it,
// as PostgreSQL zero-fills its WAL segments: an fdatasync after a write
// into written, durable blocks has no file size and no block allocation
// to commit, only the data (BenchmarkFdatasync: on ext4 about 95 µs for
// an 8 KiB write against 155 µs at the end of a growing file or into
// fallocated blocks, which are converted on the first write).
type Allocator interface {
	// Allocate makes the file at least size bytes long, the bytes past
	// its data reading as zeros, without moving the end of its data:
	// later Writes go there, over the zeros. The new size and the zeros
	// are durable after Sync. After an error the file may have grown in
	// part.
	Allocate(size int64) error
}

// OSFS is the FS of the operating system. File.Sync is fdatasync(2) on
// Linux (fs_linux.go) and os.File.Sync elsewhere (fs_other.go, which on
// macOS means F_FULLFSYNC); SyncDir fsyncs the directory.
type OSFS struct{}

var _ FS = OSFS{}

// Create implements FS.
func (OSFS) Create(name string) (File, error) {
	// Not O_APPEND: Write writes at the end of the data (osFile.end),
	// which an Allocate leaves before the end of the file.
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &osFile{File: f}, nil
}

// Open implements FS.
func (OSFS) Open(name string) (File, error) {
	f, err := regfile.Open(name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	return &osFile{File: f}, nil
}

// OpenAppend implements FS.
func (OSFS) OpenAppend(name string) (File, error) {
	f, err := regfile.Open(name, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	o := &osFile{File: f}
	if o.end, err = o.Size(); err != nil {
		f.Close()
		return nil, err
	}
	return o, nil
}

// Rename implements FS.
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// List implements FS.
func (OSFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	slices.Sort(names)
	return names, nil
}

// MkdirAll implements FS. Every directory it creates is made durable: it
// syncs the parent of each level it created, top down, so that after it
// returns a power loss cannot lose any of them.
func (OSFS) MkdirAll(dir string) error {
	dir = filepath.Clean(dir)
	// The levels that do not exist yet, deepest first.
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := syncDirHook(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// dirOpener is implemented by an FS whose SyncDir needs a file
// descriptor (OSFS: fsync(2) on the directory, opened for it). The log
// opens the directory before a new segment's name can reach it and syncs
// that handle after the rename: a process out of descriptors (EMFILE)
// then fails to start a segment before anything changed, which the log
// survives (it postpones the rotation), instead of after the rename,
// when the name in the directory may not be durable and the log must
// fail.
type dirOpener interface {
	openDir(dir string) (dirHandle, error)
}

// dirHandle is an open directory: Sync makes its entries durable.
type dirHandle interface {
	Sync() error
	Close() error
}

func (OSFS) openDir(dir string) (dirHandle, error) { return os.Open(dir) }

// syncDirHook is the directory sync of OSFS, a variable so that tests can
// record which directories are synced.
var syncDirHook = syncDir

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error { return syncDirHook(dir) }

// syncDir fsyncs a directory (dirsync.Sync).
var syncDir = dirsync.Sync

// osFile is a File of OSFS. Writes go to end, the end of the data, with
// pwrite: past it the file may hold zeros that Allocate reserved.
type osFile struct {
	*os.File
	end int64
	// path, once set by renamed, is the file's path since a rename:
	// os.File keeps the name it was opened with, and a segment is
	// created as <name>.tmp.
	path string
}

// pathNamer is implemented by Files whose errors name a path: the log
// tells them the path a rename gave the file, so that their errors name
// the segment, not the temporary file it was created as.
type pathNamer interface{ renamed(path string) }

// noteRenamed tells f, if it names paths in its errors, that it was
// renamed to path.
func noteRenamed(f File, path string) {
	if n, ok := f.(pathNamer); ok {
		n.renamed(path)
	}
}

func (f *osFile) renamed(path string) { f.path = path }

// named returns err naming the file's path now in place of the name it
// was opened with. (The nil case first, on its own: renaming's variable
// escapes to the heap, and every successful write would allocate it.)
func (f *osFile) named(err error) error {
	if err == nil || f.path == "" {
		return err
	}
	return renamePathError(err, f.File.Name(), f.path)
}

// renamePathError returns err, if it is an *os.PathError for the path
// from (as os.File's errors are, unwrapped), as one for the path to; any
// other error as it is.
func renamePathError(err error, from, to string) error {
	pe, ok := err.(*os.PathError)
	if !ok || pe.Path != from {
		return err
	}
	return &os.PathError{Op: pe.Op, Path: to, Err: pe.Err}
}

// Read implements File.
func (f *osFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	return n, f.named(err)
}

// ReadAt implements File.
func (f *osFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	return n, f.named(err)
}

// Close implements File.
func (f *osFile) Close() error { return f.named(f.File.Close()) }

// Write implements File: it writes p at the end of the data.
func (f *osFile) Write(p []byte) (int, error) {
	n, err := f.File.WriteAt(p, f.end)
	f.end += int64(n)
	return n, f.named(err)
}

// Truncate implements File.
func (f *osFile) Truncate(size int64) error {
	if err := f.File.Truncate(size); err != nil {
		return f.named(err)
	}
	f.end = size
	return nil
}

// zeros is what osFile.Allocate writes.
var zeros [256 << 10]byte

// Allocate implements Allocator by writing zeros from the end of the file
// to size: blocks that are written, not merely allocated (fallocate's
// unwritten extents would still be converted, a metadata change, by the
// log's first write into each).
func (f *osFile) Allocate(size int64) error {
	cur, err := f.Size()
	for err == nil && cur < size {
		var n int
		n, err = f.File.WriteAt(zeros[:min(int64(len(zeros)), size-cur)], cur)
		cur += int64(n)
	}
	return f.named(err)
}

// Size implements File.
func (f *osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, f.named(err)
	}
	return fi.Size(), nil
}
