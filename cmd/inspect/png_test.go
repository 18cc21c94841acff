package main

import (
	"bytes"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/store"
)

var updatePNG = flag.Bool("update-png", false, "rewrite testdata/png/*.png from a store built by the test")

// pngStore builds, in dir, a store of one filter of each kind filled with
// deterministic keys, large enough for heat maps of many pages: the store
// the committed images in testdata/png show.
func pngStore(t *testing.T, dir string) {
	t.Helper()
	s, err := store.Open(dir, &store.Options{Sync: store.SyncInterval, CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	keys := func(prefix string, n int) iter.Seq2[[]byte, error] {
		return store.Keys(func(yield func([]byte) bool) {
			for i := 0; i < n; i++ {
				if !yield([]byte(fmt.Sprintf("%s-%06d", prefix, i))) {
					return
				}
			}
		})
	}
	b, err := s.CreateBloom("users", store.BloomConfig{Capacity: 100_000, ErrorRate: 0.01})
	must(t, err)
	must(t, b.Load(keys("user", 140_000))) // grows a second layer
	c, err := s.CreateCuckoo("sessions", store.CuckooConfig{Capacity: 100_000})
	must(t, err)
	must(t, c.Load(keys("session", 80_000)))
	n, err := s.CreateCounting("hits", store.BloomConfig{Capacity: 50_000, ErrorRate: 0.01})
	must(t, err)
	must(t, n.Load(keys("hit", 40_000)))
	m, err := s.CreateBitmap("flags", 2_000_000)
	must(t, err)
	// Page p has every (p+1)-th bit set: a fill of 1/(p+1), a gradient
	// across the heat map.
	const pageBits = 4096 * 8
	for off := uint64(0); off < 2_000_000; off += 1 + off/pageBits {
		_, err := m.Set(off)
		must(t, err)
	}
	must(t, s.Checkpoint())
	for i := 0; i < 10; i++ { // pending records, applied in the images
		_, err := b.Add([]byte(fmt.Sprint("late-", i)))
		must(t, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestStatsPNG: stats --png writes, for each kind, a decodable image of the
// size its layout computes, that is not blank: its title, drawn with the
// built-in font, has ink, its heat map has the colours of the fill. With
// -update-png the images are copied to testdata/png for the README.
func TestStatsPNG(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 3 MiB store")
	}
	dir := filepath.Join(t.TempDir(), "pngdemo")
	pngStore(t, dir)
	for kind, name := range map[string]string{"bloom": "users", "cuckoo": "sessions", "counting": "hits", "bitmap": "flags"} {
		p := filepath.Join(t.TempDir(), kind+".png")
		r := mustRun(t, 0, "stats", dir, name, "--png", p)
		if plain := mustRun(t, 0, "stats", dir, name); r.stdout != plain.stdout {
			t.Errorf("%s: --png changed the text output", name)
		}
		raw, err := os.ReadFile(p)
		must(t, err)
		img, err := png.Decode(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		st, err := collectStats(dir, name, true, nil)
		must(t, err)
		if got, want := img.Bounds().Size(), pngSize(st.pngInfo(dir), st.out.Layers); got != want {
			t.Errorf("%s: image is %v, its layout %v", kind, got, want)
		}
		checkNotBlank(t, kind, img)
		if *updatePNG {
			must(t, os.MkdirAll(filepath.Join("testdata", "png"), 0o755))
			must(t, os.WriteFile(filepath.Join("testdata", "png", kind+".png"), raw, 0o644))
		}
	}
	r := mustRun(t, 2, "stats", dir, "users", "--png", filepath.Join(t.TempDir(), "no", "such", "dir.png"))
	if !bytes.Contains([]byte(r.stderr), []byte("--png")) {
		t.Errorf("unwritable --png:\n%s", r)
	}
}

// checkNotBlank fails unless the title band has text and the image holds
// more than a few colours.
func checkNotBlank(t *testing.T, kind string, img image.Image) {
	t.Helper()
	ink := 0
	for y := pngMargin; y < pngMargin+2*glyphH; y++ {
		for x := pngMargin; x < pngWidth/2; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) == pngText {
				ink++
			}
		}
	}
	colours := map[color.Color]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			colours[color.RGBAModel.Convert(img.At(x, y))] = true
		}
	}
	if ink < 100 || len(colours) < 8 {
		t.Errorf("%s: the image looks blank: %d title pixels, %d colours", kind, ink, len(colours))
	}
}

// TestCommittedPNGs: the images the README links decode and are not
// blank.
func TestCommittedPNGs(t *testing.T) {
	for _, kind := range []string{"bloom", "cuckoo", "counting", "bitmap"} {
		f, err := os.Open(filepath.Join("testdata", "png", kind+".png"))
		must(t, err)
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if img.Bounds().Dx() != pngWidth {
			t.Errorf("%s: %d pixels wide, want %d", kind, img.Bounds().Dx(), pngWidth)
		}
		checkNotBlank(t, kind, img)
	}
}

// storeSnapshot is every entry under dir (dir itself and directories
// included): its path, and its mode, modification time and contents or
// what it is. The time shows a rewrite of the same bytes and, in a
// directory's, an entry made and removed again.
func storeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		meta := fmt.Sprintf("%v %v ", fi.Mode(), fi.ModTime().UnixNano())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			snap[p] = meta + string(b)
			return err
		}
		snap[p] = meta + d.Type().String()
		return nil
	})
	must(t, err)
	return snap
}

// TestStatsPNGRefused: --png naming a file inside the store directory
// (the catalog, a layer, a new name; directly, through a symlink to the
// file or through a symlinked directory), inside another store's (whose
// catalog and layer files it overwrote before, an adversarial review
// found), or something that is not a regular file, exits 2 with one line
// naming --png, and writes nothing.
func TestStatsPNGRefused(t *testing.T) {
	dir := testStore(t)
	out := t.TempDir()
	layer := layerFile(t, dir, "users", 0)
	link := func(name, to string) string {
		p := filepath.Join(out, name)
		must(t, os.Symlink(to, p))
		return p
	}
	fifo := filepath.Join(out, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	other := testStore(t) // another store, and its copy with the catalog damaged
	otherLayer := layerFile(t, other, "users", 0)
	damaged := t.TempDir()
	must(t, os.Mkdir(filepath.Join(damaged, "wal"), 0o755))
	must(t, os.WriteFile(filepath.Join(damaged, "catalog.db"), []byte("damaged"), 0o644))
	lost := testStore(t) // a store that lost its catalog
	lostLayer := layerFile(t, lost, "users", 0)
	must(t, os.Remove(filepath.Join(lost, "catalog.db")))
	cases := map[string]string{
		"another store's catalog":      filepath.Join(other, "catalog.db"),
		"another store's layer":        otherLayer,
		"a new file in another store":  filepath.Join(other, "filters", "x.png"),
		"a damaged store's catalog":    filepath.Join(damaged, "catalog.db"),
		"a catalog-less store's layer": lostLayer,
		"the catalog":                  filepath.Join(dir, "catalog.db"),
		"a layer file":                 layer,
		"a new file in the store":      filepath.Join(dir, "stats.png"),
		"a new file in filters/":       filepath.Join(dir, "filters", "stats.png"),
		"a relative path into it":      filepath.Join(dir, "filters", "..", "catalog.db"),
		"a symlink to the catalog":     link("cat.png", filepath.Join(dir, "catalog.db")),
		"a symlink to a layer":         link("layer.png", layer),
		"a new file via a dir symlink": filepath.Join(link("storelink", dir), "x.png"),
		"a dangling symlink into it":   link("dangling.png", filepath.Join(dir, "new.png")),
		"a directory":                  out,
		"a FIFO":                       fifo,
		"a device":                     os.DevNull,
		"a missing directory":          filepath.Join(out, "no", "such", "x.png"),
	}
	before := storeSnapshot(t, dir)
	otherBefore, damagedBefore, lostBefore := storeSnapshot(t, other), storeSnapshot(t, damaged), storeSnapshot(t, lost)
	outBefore := storeSnapshot(t, out)
	for what, p := range cases {
		r := runCLI("stats", dir, "hits", "--png", p)
		t.Logf("%s: exit %d %s", what, r.code, strings.TrimSpace(r.stderr))
		if r.code != exitUsage || !strings.Contains(r.stderr, "--png") {
			t.Errorf("--png naming %s: want exit 2 naming --png, got:\n%s", what, r)
		}
		checkClean(t, []string{"stats", "--png", what}, r)
	}
	if after := storeSnapshot(t, dir); !maps.Equal(before, after) {
		t.Errorf("the store changed:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	if after := storeSnapshot(t, other); !maps.Equal(otherBefore, after) {
		t.Errorf("the other store changed:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(otherBefore)), slices.Sorted(maps.Keys(after)))
	}
	if after := storeSnapshot(t, lost); !maps.Equal(lostBefore, after) {
		t.Errorf("the store without a catalog changed:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(lostBefore)), slices.Sorted(maps.Keys(after)))
	}
	if after := storeSnapshot(t, damaged); !maps.Equal(damagedBefore, after) {
		t.Errorf("the damaged store changed:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(damagedBefore)), slices.Sorted(maps.Keys(after)))
	}
	if after := storeSnapshot(t, out); !maps.Equal(outBefore, after) {
		t.Errorf("the output directory changed:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(outBefore)), slices.Sorted(maps.Keys(after)))
	}
}

// TestStatsPNGReplaces: --png over an existing file outside the store
// replaces it by a rename: the old file (here kept by a second hard link,
// as a process mapping it keeps its pages) is never truncated or written,
// the new one keeps its permissions, a symlink stays a symlink with its
// target replaced, and no temporary file is left behind.
func TestStatsPNGReplaces(t *testing.T) {
	dir := testStore(t)
	out := t.TempDir()
	old := []byte("the previous contents, not a PNG")
	target := filepath.Join(out, "stats.png")
	must(t, os.WriteFile(target, old, 0o640))
	must(t, os.Chmod(target, 0o640))
	kept := filepath.Join(out, "kept")
	must(t, os.Link(target, kept))
	viaLink := filepath.Join(out, "via-link.png")
	must(t, os.Symlink("stats.png", viaLink))

	mustRun(t, 0, "stats", dir, "hits", "--png", target)
	if b, err := os.ReadFile(kept); err != nil || !bytes.Equal(b, old) {
		t.Errorf("the old file was written in place: now %q (%v)", b, err)
	}
	checkPNGFile(t, target)
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("the new file's mode: %v (%v), want 0640", fi.Mode(), err)
	}

	mustRun(t, 0, "stats", dir, "users", "--png", viaLink)
	if fi, err := os.Lstat(viaLink); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v", err)
	}
	checkPNGFile(t, target)

	mustRun(t, 0, "stats", dir, "users", "--png", filepath.Join(out, "new.png"))
	checkPNGFile(t, filepath.Join(out, "new.png"))
	names, _ := filepath.Glob(filepath.Join(out, "*"))
	hidden, _ := filepath.Glob(filepath.Join(out, ".*"))
	if len(names) != 4 || len(hidden) != 0 {
		t.Errorf("files left in the output directory: %q %q", names, hidden)
	}
}

func checkPNGFile(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	must(t, err)
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("%s: %v", p, err)
	}
}
