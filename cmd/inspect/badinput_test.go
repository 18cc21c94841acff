package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/format"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// Bad input: every case must end with the right exit status and one clear
// line on stderr naming the file (and offset, where one applies), with
// no panic and no stack trace.

func TestBadInput(t *testing.T) {
	type tc struct {
		name  string
		setup func(t *testing.T, dir string) []string // returns the args
		code  int
		want  []string // substrings of stderr
	}
	flip := func(t *testing.T, path string, off int64) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x40
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	putWord := func(t *testing.T, path string, word uint64, v uint64) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, v), int64(mmapbits.HeaderSize+8*word)); err != nil {
			t.Fatal(err)
		}
	}
	readWord := func(t *testing.T, path string, word uint64) uint64 {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint64(b[mmapbits.HeaderSize+8*word:])
	}
	truncate := func(t *testing.T, dir string) string {
		p := layerFile(t, dir, "users", 1)
		if err := os.Truncate(p, 6000); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := func(t *testing.T, dir string, n int) string {
		p := layerFile(t, dir, "seen", 0)
		b := make([]byte, n)
		rand.New(rand.NewSource(1)).Read(b)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipWAL := func(t *testing.T, dir string) {
		// In the middle of the records, not of the space the writer
		// reserved past them.
		res, err := wal.Scan(walDir(dir), wal.ScanOptions{}, nil)
		if err != nil || len(res.Segments) != 1 {
			t.Fatalf("scan: %v, %d segments", err, len(res.Segments))
		}
		flip(t, walSegment(t, dir), recordsEnd(res.Segments[0])/2)
	}
	cases := []tc{
		// Missing directory, not a store.
		{"missing dir ls", func(t *testing.T, dir string) []string { return []string{"ls", dir + "-nope"} }, 2, []string{"-nope: no such directory"}},
		{"missing dir verify", func(t *testing.T, dir string) []string { return []string{"verify", dir + "-nope"} }, 2, []string{"no such directory"}},
		{"missing dir check", func(t *testing.T, dir string) []string { return []string{"check", dir + "-nope", "users", "k"} }, 2, []string{"no such directory"}},
		{"not a store ls", func(t *testing.T, dir string) []string { return []string{"ls", t.TempDir()} }, 2, []string{"is not a store directory"}},
		{"not a store wal", func(t *testing.T, dir string) []string { return []string{"wal", t.TempDir()} }, 2, []string{"is not a store directory"}},
		{"not a store stats", func(t *testing.T, dir string) []string { return []string{"stats", t.TempDir(), "x"} }, 2, []string{"is not a store directory"}},
		{"a file, not a dir", func(t *testing.T, dir string) []string { return []string{"ls", layerFile(t, dir, "users", 0)} }, 2, []string{"is not a directory"}},
		{"missing file", func(t *testing.T, dir string) []string { return []string{"file", dir + "/nope.flt"} }, 2, []string{"nope.flt: no such file"}},

		// Truncated filter file.
		{"truncated file", func(t *testing.T, dir string) []string { return []string{"file", truncate(t, dir)} }, 1, []string{"1-1.flt", "offset 16", "file is 6000 bytes"}},
		{"truncated verify", func(t *testing.T, dir string) []string { truncate(t, dir); return []string{"verify", dir} }, 1, []string{"filters/1-1.flt offset 16"}},
		{"truncated ls", func(t *testing.T, dir string) []string { truncate(t, dir); return []string{"ls", dir} }, 1, []string{"1-1.flt", "offset 16"}},
		{"truncated check", func(t *testing.T, dir string) []string { truncate(t, dir); return []string{"check", dir, "users", "k"} }, 1, []string{"1-1.flt", "offset 16"}},
		{"truncated info", func(t *testing.T, dir string) []string { truncate(t, dir); return []string{"info", dir, "users"} }, 1, []string{"1-1.flt", "offset 16"}},
		{"truncated stats", func(t *testing.T, dir string) []string { truncate(t, dir); return []string{"stats", dir, "users"} }, 1, []string{"1-1.flt", "offset 16"}},

		// Garbage filter files.
		{"garbage file", func(t *testing.T, dir string) []string { return []string{"file", garbage(t, dir, 8192)} }, 2, []string{"2-0.flt: not a filter file", "magic"}},
		{"garbage verify", func(t *testing.T, dir string) []string { garbage(t, dir, 8192); return []string{"verify", dir} }, 1, []string{"filters/2-0.flt offset 0", "bad magic"}},
		{"stamp past the WAL verify", func(t *testing.T, dir string) []string {
			// What a plain copy of a live store leaves, WAL first: a file
			// that holds changes the WAL does not.
			p := layerFile(t, dir, "seen", 0)
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, 1<<40), mmapbits.StampOffset); err != nil {
				t.Fatal(err)
			}
			return []string{"verify", dir}
		}, 1, []string{"offset 2056", "newer than the WAL", "LSN 1099511627776"}},
		{"garbage stats", func(t *testing.T, dir string) []string { garbage(t, dir, 8192); return []string{"stats", dir, "seen"} }, 1, []string{"inspect stats: filters/2-0.flt: ", "bad magic"}},
		{"short file", func(t *testing.T, dir string) []string { return []string{"file", garbage(t, dir, 100)} }, 2, []string{"2-0.flt: not a filter file"}},

		// Files that are not filter files at all: exit 2, one line.
		{"empty file", func(t *testing.T, dir string) []string { return []string{"file", writeFile(t, "empty.flt", nil)} }, 2,
			[]string{"empty.flt: not a filter file: the file is empty"}},
		{"text file", func(t *testing.T, dir string) []string {
			return []string{"file", writeFile(t, "notes.txt", []byte("hello, world\nsecond line\n"))}
		}, 2, []string{"notes.txt: not a filter file: it is a text file (it starts with \"hello, world\")"}},
		{"truncated header", func(t *testing.T, dir string) []string {
			b, err := os.ReadFile(layerFile(t, dir, "users", 0))
			if err != nil {
				t.Fatal(err)
			}
			return []string{"file", writeFile(t, "cut.flt", b[:50])}
		}, 2, []string{"cut.flt: not a filter file: truncated: its header page has 50 of 4096 bytes"}},
		{"bbolt file", func(t *testing.T, dir string) []string { return []string{"file", filepath.Join(dir, "catalog.db")} }, 2,
			[]string{"catalog.db: not a filter file: it is a bbolt database"}},
		// Not files at all: not a filter file either (exit 2), not a
		// corrupt one (before, exit 1 and "corrupt data").
		{"directory as file", func(t *testing.T, dir string) []string { return []string{"file", dir} }, 2,
			[]string{"not a filter file: it is a directory"}},
		{"FIFO as file", func(t *testing.T, dir string) []string {
			p := filepath.Join(t.TempDir(), "fifo.flt")
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			return []string{"file", p}
		}, 2, []string{"fifo.flt: not a filter file: it is a FIFO"}},
		{"header CRC", func(t *testing.T, dir string) []string {
			p := layerFile(t, dir, "hits", 0)
			flip(t, p, 36)
			return []string{"file", p}
		}, 1, []string{"3-0.flt", "checksum mismatch", fmt.Sprintf("at offset %d", crcOffset())}},
		{"reserved header byte", func(t *testing.T, dir string) []string {
			flip(t, layerFile(t, dir, "hits", 0), 1000)
			return []string{"verify", dir}
		}, 1, []string{"filters/3-0.flt offset 1000", "reserved header byte"}},
		{"word beyond geometry", func(t *testing.T, dir string) []string {
			putWord(t, layerFile(t, dir, "seen", 0), 200, 1)
			return []string{"verify", dir}
		}, 1, []string{"filters/2-0.flt offset 5696", "beyond the geometry"}},
		{"word beyond geometry file", func(t *testing.T, dir string) []string {
			p := layerFile(t, dir, "seen", 0)
			putWord(t, p, 200, 1)
			return []string{"file", p}
		}, 1, []string{"2-0.flt offset 5696"}},
		{"bitmap tail bits", func(t *testing.T, dir string) []string {
			p := layerFile(t, dir, "flags", 0)
			putWord(t, p, 156, readWord(t, p, 156)|1<<21) // bit 10005 of 10000
			return []string{"verify", dir}
		}, 1, []string{"filters/4-0.flt offset 5344", "bits at offsets >= the size 10000"}},
		{"bitmap count", func(t *testing.T, dir string) []string {
			p := layerFile(t, dir, "flags", 0)
			putWord(t, p, 78, readWord(t, p, 78)|1<<8) // bit 5000, never set
			return []string{"verify", dir}
		}, 1, []string{"filters/4-0.flt", "101 bits set, but the count is 100"}},
		{"cuckoo count", func(t *testing.T, dir string) []string {
			p := layerFile(t, dir, "seen", 0)
			pending := pendingWords(t, dir, "seen")
			for w := uint64(0); ; w++ {
				if v := readWord(t, p, w); v != 0 && !pending[w] {
					putWord(t, p, w, 0) // lose a bucket's fingerprints
					break
				}
			}
			return []string{"verify", dir, "seen"}
		}, 1, []string{"filters/2-0.flt", "slots in use, but it holds 233 items"}},
		{"header differs from catalog", func(t *testing.T, dir string) []string {
			// A valid file of another filter in place of this one.
			b, err := os.ReadFile(layerFile(t, dir, "users", 0))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(layerFile(t, dir, "hits", 0), b, 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"verify", dir, "hits"}
		}, 1, []string{"filters/3-0.flt offset 12", "header field kind: file has 1 (bloom), catalog expects 2 (counting)"}},
		{"missing layer file", func(t *testing.T, dir string) []string {
			os.Remove(layerFile(t, dir, "users", 1))
			return []string{"verify", dir}
		}, 1, []string{"filters/1-1.flt", "does not exist"}},

		// A WAL segment with a flipped byte.
		{"wal flipped byte verify", func(t *testing.T, dir string) []string { flipWAL(t, dir); return []string{"verify", dir} }, 1,
			[]string{"wal/0", ".log offset ", "followed by a valid record"}},
		{"wal flipped byte wal", func(t *testing.T, dir string) []string { flipWAL(t, dir); return []string{"wal", dir} }, 1,
			[]string{"wal/0", ".log offset ", "followed by a valid record"}},
		{"wal flipped header", func(t *testing.T, dir string) []string {
			flip(t, walSegment(t, dir), 3)
			return []string{"verify", dir}
		}, 1,
			[]string{"wal/0", ".log offset 0", "segment header: bad magic"}},

		{"wal of another store", func(t *testing.T, dir string) []string {
			seg := walSegment(t, dir)
			b, _ := os.ReadFile(seg)
			first, _ := wal.ParseSegmentName(filepath.Base(seg))
			copy(b, wal.AppendSegmentHeader(nil, first, 0x5a5a))
			os.WriteFile(seg, b, 0o644)
			return []string{"verify", dir}
		}, 1,
			[]string{"wal/0", ".log offset 0", "segment header: segment belongs to store 0x5a5a"}},

		// A damaged catalog.
		{"garbage catalog ls", func(t *testing.T, dir string) []string {
			os.WriteFile(filepath.Join(dir, "catalog.db"), make([]byte, 8192), 0o644)
			return []string{"ls", dir}
		}, 1, []string{"catalog.db"}},
		{"garbage catalog verify", func(t *testing.T, dir string) []string {
			os.WriteFile(filepath.Join(dir, "catalog.db"), make([]byte, 8192), 0o644)
			return []string{"verify", dir}
		}, 1, []string{"catalog.db"}},

		// Unknown names, flags, commands, and other usage errors.
		{"unknown filter info", func(t *testing.T, dir string) []string { return []string{"info", dir, "nope"} }, 2, []string{"no filter named nope", "flags, hits, seen, users"}},
		{"unknown filter check", func(t *testing.T, dir string) []string { return []string{"check", dir, "nope", "k"} }, 2, []string{"no filter named nope"}},
		{"unknown filter stats", func(t *testing.T, dir string) []string { return []string{"stats", dir, "nope"} }, 2, []string{"no filter named nope"}},
		{"unknown filter verify", func(t *testing.T, dir string) []string { return []string{"verify", dir, "nope"} }, 2, []string{"no filter named nope"}},
		{"unknown flag", func(t *testing.T, dir string) []string { return []string{"ls", "--bogus", dir} }, 2, []string{"flag provided but not defined: -bogus", "inspect ls -h"}},
		{"unknown flag after args", func(t *testing.T, dir string) []string { return []string{"verify", dir, "-x"} }, 2, []string{"flag provided but not defined: -x"}},
		{"unknown command", func(t *testing.T, dir string) []string { return []string{"frobnicate"} }, 2, []string{`unknown command "frobnicate"`}},
		{"no command", func(t *testing.T, dir string) []string { return nil }, 2, []string{"missing command"}},
		{"too many args", func(t *testing.T, dir string) []string { return []string{"ls", dir, dir} }, 2, []string{"usage: inspect ls DIR"}},
		{"too few args", func(t *testing.T, dir string) []string { return []string{"info", dir} }, 2, []string{"usage: inspect info DIR NAME"}},
		{"no keys", func(t *testing.T, dir string) []string { return []string{"check", dir, "users"} }, 2, []string{"no keys"}},
		{"bad bitmap offset", func(t *testing.T, dir string) []string { return []string{"check", dir, "flags", "x1"} }, 2, []string{"decimal bit offsets"}},
		{"bad hex key", func(t *testing.T, dir string) []string { return []string{"check", "--hex", dir, "users", "zz"} }, 2, []string{"is not hex"}},
		{"missing keys file", func(t *testing.T, dir string) []string {
			return []string{"check", "--keys", dir + "/nope.txt", dir, "users"}
		}, 2, []string{"nope.txt"}},
		{"help unknown", func(t *testing.T, dir string) []string { return []string{"help", "nope"} }, 2, []string{`unknown command "nope"`}},
		{"version with args", func(t *testing.T, dir string) []string { return []string{"version", "x"} }, 2, []string{"usage: inspect version (see"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := testStore(t)
			args := c.setup(t, dir)
			r := mustRun(t, c.code, args...)
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr should contain %q:\n%s", w, r)
				}
			}
			if strings.Contains(r.stderr, os.TempDir()) && c.code == 1 && (args[0] == "verify" || args[0] == "stats") {
				t.Errorf("%s should name files relative to DIR:\n%s", args[0], r)
			}
		})
	}
}

// TestHelp: every command's -h exits 0 with its usage on stdout, the same
// as help CMD; -h, --help and help print the overview on stdout.
func TestHelp(t *testing.T) {
	for _, c := range commands() {
		r := mustRun(t, 0, c.name, "-h")
		if !strings.Contains(r.stdout, "Usage: inspect "+c.name) || !strings.Contains(r.stdout, "-json") || r.stderr != "" {
			t.Errorf("%s -h:\n%s", c.name, r)
		}
		h := mustRun(t, 0, "help", c.name)
		if h.stdout != r.stdout {
			t.Errorf("help %s differs from %s -h", c.name, c.name)
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"help", "help"}} {
		r := mustRun(t, 0, args...)
		if !strings.Contains(r.stdout, "Commands:") || !strings.Contains(r.stdout, "version") || r.stderr != "" {
			t.Errorf("%s:\n%s", args[0], r)
		}
	}
}

// TestVersion: version prints the Go version and the format ranges, taken
// from the packages' constants.
func TestVersion(t *testing.T) {
	r := mustRun(t, 0, "version")
	for _, want := range []string{"module         github.com/filterstore/filterstore", runtime.Version(),
		fmt.Sprintf("filter header  format versions 1..%d", mmapbits.FormatVersion),
		fmt.Sprintf("WAL segment    format versions 1..%d", wal.SegmentVersion), "catalog        format versions 1..3",
		"catalog value  format versions 1..6 (writes 6)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("version: no %q in:\n%s", want, r)
		}
	}
	var v versionOut
	decode(t, mustRun(t, 0, "version", "--json").stdout, &v)
	if v.Go != runtime.Version() || v.Header.Newest != mmapbits.FormatVersion || v.Segment.Newest != wal.SegmentVersion || v.Meta != (formatRange{1, format.MetaVersion}) || v.Version == "" {
		t.Errorf("version --json: %+v", v)
	}
	mustRun(t, 2, "version", "extra")
}

// pendingWords returns the words of a filter's layer 0 that WAL records
// after the checkpoint write.
func pendingWords(t *testing.T, dir, name string) map[uint64]bool {
	t.Helper()
	cat, err := readCatalogGuarded(dir)
	if err != nil {
		t.Fatal(err)
	}
	var id uint64
	for _, f := range cat.Filters {
		if f.Name == name {
			id = f.ID
		}
	}
	out := map[uint64]bool{}
	_, err = wal.Scan(walDir(dir), wal.ScanOptions{From: cat.CheckpointLSN + 1, Live: true}, func(_ wal.Position, p []byte) error {
		r, err := decodeWALRecord(p)
		if err == nil && r.FilterID == id {
			for _, w := range r.Writes {
				out[w.Index] = true
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRandomCorruption flips random bytes in random files of the store
// (catalog, filter files, WAL) and runs every command: each must exit
// 0, 1 or 2 with at most one line on stderr, never panic. The seed is
// printed; -corrupt.seed replays one.
func TestRandomCorruption(t *testing.T) {
	seed := *corruptSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -corrupt.seed=%d)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	iters := 40
	if testing.Short() {
		iters = 8
	}
	for it := 0; it < iters; it++ {
		dir := testStore(t)
		var files []string
		filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() && info.Size() > 0 {
				files = append(files, p)
			}
			return nil
		})
		var what []string
		for n := 1 + rng.Intn(3); n > 0; n-- {
			p := files[rng.Intn(len(files))]
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			off := rng.Intn(len(b))
			if rng.Intn(4) == 0 {
				off = rng.Intn(min(len(b), 128)) // headers are where decoders live
			}
			b[off] ^= byte(1 + rng.Intn(255))
			if rng.Intn(8) == 0 {
				b = b[:rng.Intn(len(b))]
			}
			os.WriteFile(p, b, 0o644)
			what = append(what, fmt.Sprintf("%s@%d", relPath(dir, p), off))
		}
		for _, args := range [][]string{
			{"ls", dir}, {"info", dir, "users"}, {"info", dir, "seen"}, {"check", dir, "seen", "seen-100"},
			{"check", dir, "users", "user-001"}, {"verify", dir}, {"wal", dir}, {"wal", "--dump", dir},
			{"stats", dir, "hits"}, {"stats", dir, "flags"}, {"file", layerFile2(dir, "filters/1-1.flt")},
		} {
			r := runCLI(args...)
			if r.code < 0 || r.code > 2 {
				t.Errorf("seed %d iteration %d (%v): inspect %s: exit %d", seed, it, what, strings.Join(args, " "), r.code)
			}
			for _, bad := range []string{"panic", "goroutine ", "internal error", ".go:"} {
				if strings.Contains(r.stderr, bad) {
					t.Errorf("seed %d iteration %d (%v): inspect %s: stderr shows %q:\n%s", seed, it, what, strings.Join(args, " "), bad, r)
				}
			}
			if r.code != 0 && args[1] != "--dump" && strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("seed %d iteration %d (%v): inspect %s: want one line on stderr:\n%s", seed, it, what, strings.Join(args, " "), r)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// crcOffset is where the header CRC of the format version written lies.
func crcOffset() int {
	fields := mmapbits.HeaderFields(mmapbits.FormatVersion)
	return fields[len(fields)-1].Offset
}

var corruptSeed = flag.Int64("corrupt.seed", 0, "seed of TestRandomCorruption (0: time)")

func layerFile2(dir, rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }

// writeFile writes b to a new file named name and returns its path.
func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
