package wal

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

var quiet = slog.New(slog.DiscardHandler)

const testDir = "/db/wal"

// payloadFor is the payload the tests append as record lsn of generation
// gen: its length varies, its contents are checkable.
func payloadFor(gen, lsn uint64) []byte {
	n := int((lsn*2654435761 + gen) % 97)
	p := make([]byte, 16+n)
	binary.LittleEndian.PutUint64(p, gen)
	binary.LittleEndian.PutUint64(p[8:], lsn)
	for i := 16; i < len(p); i++ {
		p[i] = byte(lsn + uint64(i))
	}
	return p
}

func mustOpen(t testing.TB, fs FS, o Options) *Log {
	t.Helper()
	o.FS = fs
	if o.Logger == nil {
		o.Logger = quiet
	}
	l, err := Open(testDir, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

type rec struct {
	lsn     uint64
	payload []byte
}

func replayAll(t testing.TB, l *Log, from uint64) []rec {
	t.Helper()
	var out []rec
	err := l.Replay(from, func(lsn uint64, p []byte) error {
		out = append(out, rec{lsn, slices.Clone(p)})
		return nil
	})
	if err != nil {
		t.Fatalf("Replay(%d): %v", from, err)
	}
	return out
}

// segFiles lists the segment files of testDir in fs.
func segFiles(t testing.TB, fs FS) []string {
	t.Helper()
	names, err := fs.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if _, ok := ParseSegmentName(n); ok {
			out = append(out, filepath.Join(testDir, n))
		}
	}
	return out
}

// hookFS wraps an FS and calls hook before every operation; an error from
// the hook fails the operation. It injects failures, latency and crashes.
type hookFS struct {
	FS
	mu   sync.Mutex
	hook func(op, name string) error
}

func (h *hookFS) call(op, name string) error {
	h.mu.Lock()
	f := h.hook
	h.mu.Unlock()
	if f == nil {
		return nil
	}
	return f(op, name)
}

func (h *hookFS) setHook(f func(op, name string) error) {
	h.mu.Lock()
	h.hook = f
	h.mu.Unlock()
}

func (h *hookFS) Create(name string) (File, error) {
	if err := h.call("create", name); err != nil {
		return nil, err
	}
	f, err := h.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, fs: h, name: name}, nil
}

func (h *hookFS) OpenAppend(name string) (File, error) {
	if err := h.call("openappend", name); err != nil {
		return nil, err
	}
	f, err := h.FS.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, fs: h, name: name}, nil
}

func (h *hookFS) Rename(o, n string) error {
	if err := h.call("rename", n); err != nil {
		return err
	}
	return h.FS.Rename(o, n)
}

func (h *hookFS) Remove(name string) error {
	if err := h.call("remove", name); err != nil {
		return err
	}
	return h.FS.Remove(name)
}

func (h *hookFS) SyncDir(dir string) error {
	if err := h.call("syncdir", dir); err != nil {
		return err
	}
	return h.FS.SyncDir(dir)
}

type hookFile struct {
	File
	fs   *hookFS
	name string
}

func (f *hookFile) Write(p []byte) (int, error) {
	if err := f.fs.call("write", f.name); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *hookFile) Sync() error {
	if err := f.fs.call("sync", f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *hookFile) Truncate(size int64) error {
	if err := f.fs.call("truncate", f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// slowSync makes every file Sync take d, like a disk.
func slowSync(d time.Duration) func(op, name string) error {
	return func(op, name string) error {
		if op == "sync" {
			time.Sleep(d)
		}
		return nil
	}
}

var _ io.Writer = (*hookFile)(nil)

func describe(fs *MemFS) string { return fmt.Sprint("files:\n", fs) }

// snapshot returns the name and current contents of every file in testDir.
func snapshot(t testing.TB, fs *MemFS) map[string]string {
	t.Helper()
	names, err := fs.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		b, err := fs.ReadFile(filepath.Join(testDir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}
