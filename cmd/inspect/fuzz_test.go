package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filterstore/filterstore/internal/crc"
	"github.com/filterstore/filterstore/internal/racedetect"
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/store"
	"github.com/filterstore/filterstore/wal"
)

// FuzzInspect damages one file of a small store (catalog, a layer file or
// a WAL segment) and runs the read-only commands on it. Every command
// must exit 0, 1 or 2, never report a panic, explain a nonzero exit, and
// leave every file of the store as it found it (no byte changed, nothing
// created or removed).
//
// The input picks the file (which, over the files of two stores: one
// copied as a crash leaves it, with WAL records after the checkpoint, and
// one closed cleanly), a mode (overwrite the payload at off, truncate to
// off, append the payload, or xor the payload in at off) and the payload.
// With fuzzFixSums set in the mode, the checksums are then made to match
// (a layer file's header CRC, a WAL segment's header CRC and those of the
// records its length fields frame), so that the damage reaches what reads
// the fields rather than stopping at the checksum.
func FuzzInspect(f *testing.F) {
	snap, err := fuzzSnapshot()
	if err != nil {
		f.Fatal(err)
	}
	// Under the race detector with -short, every third seed (the seeds
	// took 33 s of CI's race stage, at 0.24 s each); every seed runs in
	// the README's tests and as the fuzz stage's baseline.
	seeds := 0
	add := func(which uint8, off uint32, mode uint8, payload []byte) {
		if seeds++; racedetect.Enabled && testing.Short() && seeds%3 != 1 {
			return
		}
		f.Add(which, off, mode, payload)
	}
	pick := func(store, rel string) uint8 {
		for i, p := range snap.picks {
			if p.store == store && p.file.rel == rel {
				return uint8(i)
			}
		}
		f.Fatalf("no file %s/%s in the fuzz store", store, rel)
		return 0
	}
	// Each file untouched (an empty overwrite).
	for i := range snap.picks {
		add(uint8(i), uint32(0), uint8(fuzzOverwrite), []byte{})
	}
	for _, st := range []string{"crash", "clean"} {
		cat := pick(st, "catalog.db")
		add(cat, uint32(0), uint8(fuzzTruncate), []byte{})
		add(cat, uint32(4096), uint8(fuzzTruncate), []byte{})
		add(cat, uint32(8192+17), uint8(fuzzTruncate), []byte{})
		add(cat, uint32(16), uint8(fuzzXor), []byte{0x01})
		add(cat, uint32(4096+16), uint8(fuzzXor), []byte{0xff, 0xff})
		for _, p := range snap.picks {
			if p.store != st {
				continue
			}
			i := pick(st, p.file.rel)
			switch {
			case fuzzFewerSeeds(p):
			case strings.HasSuffix(p.file.rel, ".flt"):
				add(i, uint32(50), uint8(fuzzTruncate), []byte{})   // truncated header
				add(i, uint32(4096), uint8(fuzzTruncate), []byte{}) // header page only
				add(i, uint32(12), uint8(fuzzXor), []byte{0x01})    // kind
				add(i, uint32(36), uint8(fuzzXor), []byte{0x40})    // in the header page
				add(i, uint32(16), uint8(fuzzOverwrite), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
				add(i, uint32(4096+8), uint8(fuzzXor), []byte{0x80}) // a data word
				add(i, uint32(0), uint8(fuzzAppend), []byte("garbage after the data"))
			case strings.HasPrefix(p.file.rel, "wal/"):
				add(i, uint32(0), uint8(fuzzOverwrite), make([]byte, 64)) // zeroed segment header
				add(i, uint32(3), uint8(fuzzXor), []byte{0x40})
				add(i, uint32(0), uint8(fuzzAppend), []byte("\x00\x01\x02garbage appended to the WAL\xff\xff\xff\xff"))
				add(i, uint32(100), uint8(fuzzXor), []byte{0x04})
				add(i, uint32(120), uint8(fuzzTruncate), []byte{})
			}
		}
	}
	fix := uint8(fuzzFixSums)
	for _, st := range []string{"crash", "clean"} {
		for _, p := range snap.picks {
			if p.store != st {
				continue
			}
			i := pick(st, p.file.rel)
			switch {
			case fuzzFewerSeeds(p):
			case strings.HasSuffix(p.file.rel, ".flt"):
				// Header fields with their CRC made to match.
				add(i, uint32(12), fuzzOverwrite|fix, []byte{9, 0, 0, 0})                                           // kind
				add(i, uint32(16), fuzzOverwrite|fix, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})                   // data pages
				add(i, uint32(16), fuzzOverwrite|fix, []byte{0, 0, 0, 0, 0, 0, 0, 0})                               // data pages
				add(i, uint32(32), fuzzOverwrite|fix, []byte{7, 0, 0, 0})                                           // layer
				add(i, uint32(36), fuzzOverwrite|fix, []byte{0, 0, 0, 0})                                           // k
				add(i, uint32(48), fuzzOverwrite|fix, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})       // size
				add(i, uint32(56), fuzzOverwrite|fix, []byte{0, 0, 0, 0, 0xff, 0, 0, 0})                            // bucket size, fingerprint bits
				add(i, uint32(64), fuzzOverwrite|fix, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f}) // capacity, error rate NaN
				add(i, uint32(8), fuzzOverwrite|fix, []byte{1, 0, 0, 0})                                            // format version 1
				add(i, uint32(8), fuzzOverwrite|fix, []byte{2, 0, 0, 0})                                            // format version 2
			case strings.HasPrefix(p.file.rel, "wal/"):
				add(i, uint32(12), fuzzOverwrite|fix, []byte{0, 0, 0, 0, 0, 0, 0, 0})                            // first LSN 0
				add(i, uint32(12), fuzzXor|fix, []byte{0x01})                                                    // first LSN
				add(i, uint32(20), fuzzXor|fix, []byte{0x01})                                                    // store id
				add(i, uint32(8), fuzzOverwrite|fix, []byte{1, 0, 0, 0})                                         // version 1
				add(i, uint32(32+8), fuzzXor|fix, []byte{0x01})                                                  // first record's LSN
				add(i, uint32(32+16), fuzzXor|fix, []byte{0x01})                                                 // first record's payload
				add(i, uint32(32+20), fuzzOverwrite|fix, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // in the first payload
				add(i, uint32(32), fuzzOverwrite|fix, []byte{3, 0, 0, 0})                                        // first record's length
			}
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, off uint32, mode uint8, payload []byte) {
		if len(payload) > 1<<16 {
			payload = payload[:1<<16]
		}
		p := snap.picks[int(which)%len(snap.picks)]
		data := fuzzDamage(p.file.data, off, mode, payload)
		if mode&fuzzFixSums != 0 {
			fuzzFixChecksums(p.file.rel, data)
		}
		dir := filepath.Join(t.TempDir(), "store")
		want := map[string][]byte{}
		for _, d := range p.dirs {
			if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, ff := range p.files {
			b := ff.data
			if ff.rel == p.file.rel {
				b = data
			}
			want[ff.rel] = b
			if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(ff.rel)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		untouched := bytes.Equal(data, p.file.data)
		what := fmt.Sprintf("%s store, %s %s", p.store, p.file.rel, fuzzDescribe(p.file.data, data, mode, payload))

		cmds := [][]string{{"ls", dir}}
		for _, fl := range fuzzFilters {
			cmds = append(cmds, []string{"info", dir, fl.name}, []string{"check", dir, fl.name, fl.key})
		}
		cmds = append(cmds, []string{"verify", dir}, []string{"wal", dir}, []string{"wal", "--dump", dir})
		if strings.HasSuffix(p.file.rel, ".flt") {
			cmds = append(cmds, []string{"file", filepath.Join(dir, filepath.FromSlash(p.file.rel))})
		}
		for _, fl := range fuzzFilters {
			cmds = append(cmds, []string{"stats", dir, fl.name})
		}
		results := make([]result, len(cmds))
		for i, args := range cmds {
			results[i] = fuzzRun(t, what, args)
			fuzzCheck(t, what, args, results[i], untouched)
		}
		fuzzConsistent(t, what, cmds, results)
		fuzzSameFiles(t, what, dir, want, p.dirs)
	})
}

// fuzzFewerSeeds says whether p is a layer file of the clean store other
// than the first: the header seeds go to every layer file of the crash
// store and to one of the clean store's, which keeps the seed corpus small
// enough for the baseline run to take a few seconds of CI's 10.
func fuzzFewerSeeds(p fuzzPick) bool {
	return p.store == "clean" && strings.HasSuffix(p.file.rel, ".flt") && p.file.rel != "filters/1-0.flt"
}

// The damage modes; the mode byte is taken modulo fuzzModes.
const (
	fuzzOverwrite = iota // write payload at off (extending the file if it ends before)
	fuzzTruncate         // cut the file to off bytes (off modulo len+1); payload unused
	fuzzAppend           // append payload
	fuzzXor              // xor payload into the file at off, wrapping around
	fuzzModes

	fuzzFixSums = 0x10 // a flag in the mode byte: fix the checksums after the damage
)

// fuzzFixChecksums recomputes, in place, the CRC-32Cs of b, the contents
// of the store file rel: a layer file's header CRC (at the offset its
// version's layout gives), or a WAL segment's header CRC and, from the
// first record on, the CRC of each record its length field frames, up to
// a zero length or one that runs past the end. The catalog and other
// files are left as they are.
func fuzzFixChecksums(rel string, b []byte) {
	switch {
	case strings.HasSuffix(rel, ".flt"):
		if len(b) < mmapbits.HeaderSize {
			return
		}
		var version int // the same offset in every format version
		for _, f := range mmapbits.HeaderFields(mmapbits.FormatVersion) {
			if f.Name == "Version" {
				version = f.Offset
			}
		}
		fields := mmapbits.HeaderFields(binary.LittleEndian.Uint32(b[version:]))
		if fields == nil {
			return
		}
		at := fields[len(fields)-1].Offset // the CRC, of every byte before it
		binary.LittleEndian.PutUint32(b[at:], crc.Checksum(b[:at]))
	case strings.HasPrefix(rel, "wal/"):
		if len(b) < 12 {
			return
		}
		size := wal.SegmentHeaderSize
		if binary.LittleEndian.Uint32(b[8:]) == 1 {
			size = wal.SegmentHeaderSizeV1
		}
		if len(b) < size {
			return
		}
		binary.LittleEndian.PutUint32(b[size-4:], crc.Checksum(b[:size-4]))
		for pos := size; pos+wal.RecordHeaderSize <= len(b); {
			n := int(binary.LittleEndian.Uint32(b[pos:]))
			end := pos + wal.RecordHeaderSize + n
			if n == 0 || n > wal.MaxRecordSize || end > len(b) {
				return
			}
			c := crc.Update(0, b[pos:pos+4])
			binary.LittleEndian.PutUint32(b[pos+4:], crc.Update(c, b[pos+8:end]))
			pos = end
		}
	}
}

// fuzzSpan bounds the offsets the fuzzer aims at: the whole of the
// catalog and the layer files, the first 32 KiB of a WAL segment (its
// records; the rest is zeroes the writer reserved).
const fuzzSpan = 32 << 10

// fuzzOff maps off onto 0..min(size, fuzzSpan)+extra.
func fuzzOff(size int, off uint32, extra int) int {
	return int(off % uint32(min(size, fuzzSpan)+extra+1))
}

// fuzzDamage returns a damaged copy of b. Offsets are taken modulo the
// file's length, at most fuzzSpan, plus one (plus 4096 for an overwrite,
// which may extend the file; past fuzzSpan that is past the end of the
// file), so that most inputs hit the file.
func fuzzDamage(b []byte, off uint32, mode uint8, payload []byte) []byte {
	out := append([]byte(nil), b...)
	switch mode % fuzzModes {
	case fuzzOverwrite:
		o := fuzzOff(len(b), off, 4096)
		if len(b) > fuzzSpan && o > fuzzSpan {
			o = len(b) + o - fuzzSpan - 1 // past the end of a long file
		}
		if end := o + len(payload); end > len(out) {
			out = append(out, make([]byte, end-len(out))...)
		}
		copy(out[o:], payload)
	case fuzzTruncate:
		out = out[:fuzzOff(len(b), off, 0)]
	case fuzzAppend:
		out = append(out, payload...)
	case fuzzXor:
		if len(out) == 0 {
			break
		}
		o := fuzzOff(len(b), off, -1)
		for i, c := range payload {
			out[(o+i)%len(out)] ^= c
		}
	}
	return out
}

// fuzzDescribe says what fuzzDamage did, for failure messages.
func fuzzDescribe(before, after []byte, mode uint8, payload []byte) string {
	show := payload
	if len(show) > 32 {
		show = show[:32]
	}
	first := -1
	for i := 0; i < min(len(before), len(after)); i++ {
		if before[i] != after[i] {
			first = i
			break
		}
	}
	names := []string{"overwritten", "truncated", "appended to", "xored"}
	return fmt.Sprintf("(%d bytes) %s: now %d bytes, first changed byte at %d; payload %d bytes %x",
		len(before), names[mode%fuzzModes], len(after), first, len(payload), show)
}

// fuzzTimeout bounds one command: far above what any takes on these small
// stores (milliseconds), so that a hang fails with the input kept rather
// than the fuzzer's worker being killed.
const fuzzTimeout = 20 * time.Second

// fuzzRun runs one command in-process, failing on a hang.
func fuzzRun(t *testing.T, what string, args []string) result {
	t.Helper()
	done := make(chan result, 1)
	go func() { done <- runCLI(args...) }()
	select {
	case r := <-done:
		return r
	case <-time.After(fuzzTimeout):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%s: inspect %s did not return in %v; goroutines:\n%s", what, strings.Join(args, " "), fuzzTimeout, buf)
		return result{}
	}
}

// fuzzCheck checks one command's result.
func fuzzCheck(t *testing.T, what string, args []string, r result, untouched bool) {
	t.Helper()
	cmd := strings.Join(args, " ")
	if r.code < 0 || r.code > 2 {
		t.Errorf("%s: inspect %s: exit %d:\n%s", what, cmd, r.code, r)
	}
	// reportPanic's two lines: "inspect CMD: internal error: ..." and
	// "inspect CMD: a mapped file changed (truncated?) while it was being
	// read: ..." (nothing truncates a file under these commands, so that
	// one is a bug too).
	//
	// With INSPECT_FUZZ_STRICT set, a panic that guard turned into a
	// corrupt-data error ("reading it crashed the reader": bbolt's
	// reading the catalog, or the store's read-only open) fails too.
	for _, line := range strings.Split(r.stderr, "\n") {
		if !strings.HasPrefix(line, "inspect") {
			continue
		}
		if strings.Contains(line, ": internal error: ") || strings.Contains(line, ": a mapped file changed (truncated?) while it was being read: ") ||
			(os.Getenv("INSPECT_FUZZ_STRICT") != "" && strings.Contains(line, ": reading it crashed the reader: ")) {
			t.Errorf("%s: inspect %s panicked:\n%s\nstack (INSPECT_TRACEBACK=1, run again):\n%s", what, cmd, r, fuzzTraceback(args))
			break
		}
	}
	// An error exit explains itself in one line on stderr, as
	// TestRandomCorruption also requires (wal --dump aside: it may warn
	// about each record it cannot decode).
	if r.code != 0 && strings.TrimSpace(r.stderr) == "" {
		t.Errorf("%s: inspect %s: exit %d with nothing on stderr:\n%s", what, cmd, r.code, r)
	} else if r.code != 0 && args[1] != "--dump" && strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("%s: inspect %s: exit %d should print one line on stderr:\n%s", what, cmd, r.code, r)
	}
	if args[0] == "verify" && r.code == 1 && !strings.Contains(r.stdout, "\nproblem  ") && !strings.HasPrefix(r.stdout, "problem  ") {
		t.Errorf("%s: inspect %s: exit 1 but no problem listed on stdout:\n%s", what, cmd, r)
	}
	if args[0] == "verify" && r.code == 0 && !strings.Contains(r.stdout, ": 0 problems, ") {
		t.Errorf("%s: inspect %s: exit 0 but the summary counts problems:\n%s", what, cmd, r)
	}
	if untouched && r.code != 0 {
		t.Errorf("%s: the store is intact, but inspect %s exits %d:\n%s", what, cmd, r.code, r)
	}
}

// fuzzConsistent checks that verify, the full scrub, finds the corruption
// any other command reports: when verify exits 0, none exits 1.
func fuzzConsistent(t *testing.T, what string, cmds [][]string, results []result) {
	t.Helper()
	for i, args := range cmds {
		if args[0] != "verify" || results[i].code != 0 {
			continue
		}
		for j, other := range cmds {
			if results[j].code == 1 {
				t.Errorf("%s: inspect %s exits 0, but inspect %s exits 1:\n%s\n--- verify's:\n%s",
					what, strings.Join(args, " "), strings.Join(other, " "), results[j], results[i])
			}
		}
	}
}

// fuzzTraceback runs args again with INSPECT_TRACEBACK set and returns
// stderr: the panic with its stack.
func fuzzTraceback(args []string) string {
	os.Setenv("INSPECT_TRACEBACK", "1")
	defer os.Unsetenv("INSPECT_TRACEBACK")
	return runCLI(args...).stderr
}

// fuzzSameFiles fails unless dir holds exactly the files of want, with
// their contents, and the directories of dirs.
func fuzzSameFiles(t *testing.T, what, dir string, want map[string][]byte, dirs []string) {
	t.Helper()
	seen := map[string]bool{}
	wantDir := map[string]bool{".": true}
	for _, d := range dirs {
		wantDir[d] = true
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if !wantDir[rel] {
				t.Errorf("%s: the commands created the directory %s", what, rel)
			}
			return nil
		}
		w, ok := want[rel]
		if !ok {
			t.Errorf("%s: the commands created %s (%v)", what, rel, d.Type())
			return nil
		}
		seen[rel] = true
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Equal(b, w) {
			t.Errorf("%s: the commands changed %s (%d bytes, was %d)", what, rel, len(b), len(w))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range want {
		if !seen[rel] {
			t.Errorf("%s: the commands removed %s", what, rel)
		}
	}
}

// fuzzFilters are the fuzz store's filters, each with a key to check.
var fuzzFilters = []struct{ name, key string }{
	{"plain", "p-042"},
	{"users", "user-001"},
	{"seen", "seen-100"},
	{"hits", "hit-042"},
	{"flags", "21"},
}

type fuzzFile struct {
	rel  string // slash-separated, relative to the store directory
	data []byte
}

// fuzzPick is one file the fuzzer may damage, with its store's files.
type fuzzPick struct {
	store string // "crash" or "clean"
	file  fuzzFile
	files []fuzzFile
	dirs  []string
}

type fuzzSnap struct {
	picks []fuzzPick
}

var (
	fuzzSnapOnce sync.Once
	fuzzSnapVal  *fuzzSnap
	fuzzSnapErr  error
)

// fuzzSnapshot builds the two fuzz stores once per process and returns
// their files, read into memory.
func fuzzSnapshot() (*fuzzSnap, error) {
	fuzzSnapOnce.Do(func() {
		tmp, err := os.MkdirTemp("", "inspect-fuzz-")
		if err != nil {
			fuzzSnapErr = err
			return
		}
		defer os.RemoveAll(tmp)
		snap := &fuzzSnap{}
		for _, crash := range []bool{true, false} {
			name := "clean"
			if crash {
				name = "crash"
			}
			files, dirs, err := buildFuzzStore(filepath.Join(tmp, name), crash)
			if err != nil {
				fuzzSnapErr = fmt.Errorf("%s store: %w", name, err)
				return
			}
			for _, f := range files {
				snap.picks = append(snap.picks, fuzzPick{store: name, file: f, files: files, dirs: dirs})
			}
		}
		fuzzSnapVal = snap
	})
	return fuzzSnapVal, fuzzSnapErr
}

// buildFuzzStore builds a store of every kind of filter (a non-scaling
// Bloom, a scalable one grown to two layers, a cuckoo, a counting filter
// and a bitmap) in dir and returns its files and directories. crash: the
// files are read while the writer is open and idle after logging changes
// past its last checkpoint (single ops, a batch, a drop), as a crash
// leaves them; otherwise after Close.
func buildFuzzStore(dir string, crash bool) ([]fuzzFile, []string, error) {
	s, err := store.Open(dir, &store.Options{CheckpointEvery: -1})
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	plain, err := s.CreateBloom("plain", store.BloomConfig{Capacity: 400, ErrorRate: 0.01, NonScaling: true})
	if err != nil {
		return nil, nil, err
	}
	for i := 0; i < 300; i++ {
		if _, err := plain.Add([]byte(fmt.Sprintf("p-%03d", i))); err != nil {
			return nil, nil, err
		}
	}
	users, err := s.CreateBloom("users", store.BloomConfig{Capacity: 200, ErrorRate: 0.01})
	if err != nil {
		return nil, nil, err
	}
	for i := 0; i < 300; i++ { // grows a second layer
		if _, err := users.Add([]byte(fmt.Sprintf("user-%03d", i))); err != nil {
			return nil, nil, err
		}
	}
	seen, err := s.CreateCuckoo("seen", store.CuckooConfig{Capacity: 300, Expansion: 2})
	if err != nil {
		return nil, nil, err
	}
	for i := 0; i < 250; i++ {
		if err := seen.Add([]byte(fmt.Sprintf("seen-%03d", i))); err != nil {
			return nil, nil, err
		}
	}
	for i := 0; i < 20; i++ {
		if _, err := seen.Delete([]byte(fmt.Sprintf("seen-%03d", i))); err != nil {
			return nil, nil, err
		}
	}
	hits, err := s.CreateCounting("hits", store.BloomConfig{Capacity: 200, ErrorRate: 0.01})
	if err != nil {
		return nil, nil, err
	}
	for i := 0; i < 150; i++ {
		if err := hits.Add([]byte(fmt.Sprintf("hit-%03d", i%100))); err != nil {
			return nil, nil, err
		}
	}
	for i := 0; i < 10; i++ {
		if _, err := hits.Delete([]byte(fmt.Sprintf("hit-%03d", i))); err != nil {
			return nil, nil, err
		}
	}
	flags, err := s.CreateBitmap("flags", 4096)
	if err != nil {
		return nil, nil, err
	}
	for off := uint64(0); off < 700; off += 7 {
		if _, err := flags.Set(off); err != nil {
			return nil, nil, err
		}
	}
	if _, err := flags.Clear(14); err != nil {
		return nil, nil, err
	}
	gone, err := s.CreateBitmap("gone", 64)
	if err != nil {
		return nil, nil, err
	}
	if _, err := gone.Set(3); err != nil {
		return nil, nil, err
	}
	if err := s.Checkpoint(); err != nil {
		return nil, nil, err
	}
	// Logged after the checkpoint.
	for i := 0; i < 5; i++ {
		if _, err := users.Add([]byte(fmt.Sprintf("late-%d", i))); err != nil {
			return nil, nil, err
		}
	}
	for i := 0; i < 3; i++ {
		if err := seen.Add([]byte(fmt.Sprintf("late-%d", i))); err != nil {
			return nil, nil, err
		}
	}
	if _, err := flags.Set(4095); err != nil {
		return nil, nil, err
	}
	if _, err := gone.Set(5); err != nil {
		return nil, nil, err
	}
	bt := s.NewBatch()
	bt.BloomAdd(plain, []byte("batch-p"))
	bt.CuckooAdd(seen, []byte("batch-s"))
	bt.CountingAdd(hits, []byte("batch-h"))
	bt.BitmapSet(flags, 1000)
	if _, err := bt.Commit(); err != nil {
		return nil, nil, err
	}
	if err := s.Drop("gone"); err != nil {
		return nil, nil, err
	}
	if !crash {
		if err := s.Close(); err != nil {
			return nil, nil, err
		}
	}
	return readFuzzStore(dir)
}

// readFuzzStore reads every file of dir but LOCK (as copyDir skips it),
// sorted by path, and lists its subdirectories.
func readFuzzStore(dir string) ([]fuzzFile, []string, error) {
	var files []fuzzFile
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." {
				dirs = append(dirs, rel)
			}
			return nil
		}
		if rel == "LOCK" {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, fuzzFile{rel: rel, data: b})
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	return files, dirs, err
}

// TestFuzzStore pins the fuzz store's shape: the files FuzzInspect damages,
// each of which every command reads cleanly while untouched.
func TestFuzzStore(t *testing.T) {
	snap, err := fuzzSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range snap.picks {
		t.Logf("%3d  %s/%s  %d bytes", i, p.store, p.file.rel, len(p.file.data))
	}
	var flt, segs int
	for _, p := range snap.picks {
		if strings.HasSuffix(p.file.rel, ".flt") {
			flt++
		}
		if strings.HasPrefix(p.file.rel, "wal/") {
			segs++
		}
	}
	// Per store: 6 layer files (plain, users x2, seen, hits, flags), and
	// the dropped filter's file in the crash copy.
	if flt < 12 || segs < 2 {
		t.Errorf("%d layer files, %d WAL segments in the fuzz stores", flt, segs)
	}
}
