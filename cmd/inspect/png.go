package main

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/filterstore/filterstore/internal/regfile"
)

// The image stats --png writes, readable on its own: a title naming the
// store, the filter and its kind; then per layer a panel titled with the
// layer, its file and geometry, holding the histogram of the text output
// (count of units per bin, with both axes ticked and labelled in their
// units) above a heat map of the fill of every 4 KiB data page in file
// order, with its colour scale numbered from 0 (empty) to 1 (full). Text
// is drawn with the built-in 5x7 font (font.go).

const (
	pngWidth   = 900
	pngMargin  = 16
	plotLeft   = 78 // room for the y tick labels
	histHeight = 170
	maxCellPx  = 24
	heatCols   = 100
	scaleH     = 14 // colour scale strip
)

var (
	pngBackground = color.RGBA{255, 255, 255, 255}
	pngText       = color.RGBA{20, 20, 20, 255}
	pngDim        = color.RGBA{90, 90, 90, 255}
	pngAxis       = color.RGBA{60, 60, 60, 255}
	pngGrid       = color.RGBA{225, 225, 225, 255}
	pngBar        = color.RGBA{70, 130, 180, 255}
	pngSeparator  = color.RGBA{170, 170, 170, 255}
)

// viridis-like colour stops, empty to full.
var heatStops = []color.RGBA{
	{68, 1, 84, 255}, {59, 82, 139, 255}, {33, 145, 140, 255}, {94, 201, 98, 255}, {253, 231, 37, 255},
}

func heatColor(v float64) color.RGBA {
	v = min(max(v, 0), 1)
	x := v * float64(len(heatStops)-1)
	i := int(x)
	if i >= len(heatStops)-1 {
		return heatStops[len(heatStops)-1]
	}
	t := x - float64(i)
	a, b := heatStops[i], heatStops[i+1]
	lerp := func(p, q uint8) uint8 { return uint8(float64(p) + (float64(q)-float64(p))*t + 0.5) }
	return color.RGBA{lerp(a.R, b.R), lerp(a.G, b.G), lerp(a.B, b.B), 255}
}

// pngInfo is what the title says.
type pngInfo struct {
	store   string // the store directory's name
	filter  string
	kind    string
	pending int // WAL records after the checkpoint, applied
}

// canvas draws on img, or only lays out when img is nil: render runs once
// to measure the height, once to draw.
type canvas struct {
	img *image.RGBA
	y   int // the next free row
}

func (c *canvas) fill(x0, y0, x1, y1 int, col color.RGBA) {
	if c.img == nil {
		return
	}
	r := image.Rect(x0, y0, x1, y1).Intersect(c.img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c.img.SetRGBA(x, y, col)
		}
	}
}

// line writes s at the left margin on the next row and advances.
func (c *canvas) line(s string, scale int, col color.RGBA) {
	drawText(c.img, pngMargin, c.y, fitText(s, pngWidth-2*pngMargin, scale), scale, col)
	c.y += (glyphH + 4) * scale
}

// renderPNG draws the whole image on c.
func renderPNG(c *canvas, info pngInfo, layers []statsLayer) {
	c.fill(0, 0, pngWidth, math.MaxInt32, pngBackground)
	c.y = pngMargin
	c.line(fmt.Sprintf("store %s / filter %s (%s)", info.store, fmtKey(info.filter), info.kind), 2, pngText)
	sub := fmt.Sprintf("inspect stats --png: %s", plural(len(layers), "layer", "layers"))
	if info.pending > 0 {
		sub += fmt.Sprintf(", with the %s after the checkpoint applied", plural(info.pending, "WAL record", "WAL records"))
	}
	c.line(sub, 1, pngDim)
	for _, l := range layers {
		c.y += 8
		c.fill(pngMargin, c.y, pngWidth-pngMargin, c.y+1, pngSeparator)
		c.y += 10
		renderLayer(c, l)
	}
	c.y += pngMargin
}

// renderLayer draws one layer's panel: title, histogram, heat map and
// colour scale.
func renderLayer(c *canvas, l statsLayer) {
	g := l.scan.g
	c.line(fmt.Sprintf("layer %d: %s", l.Layer, l.File), 2, pngText)
	c.line(fmt.Sprintf("%s; fill %s; %s: mean %.2f, stddev %.2f, min %d, max %d",
		g.sizeDesc(), fmtFill(float64(l.FillRatio)), l.Measure, float64(l.Mean), float64(l.Stddev), l.Min, l.Max), 1, pngDim)
	c.y += 6
	renderHistogram(c, l)
	c.y += 10
	renderHeatMap(c, l)
}

// renderHistogram draws the bins of the text output as bars: x is the
// measure (units counted), y the number of units in each bin.
func renderHistogram(c *canvas, l statsLayer) {
	bins := l.Histogram
	unitsLabel := l.Unit + "s"
	drawText(c.img, pngMargin, c.y, "number of "+unitsLabel, 1, pngDim)
	c.y += glyphH + 6
	top, x0, x1 := c.y, plotLeft, pngWidth-pngMargin
	base := top + histHeight
	var most uint64
	for _, b := range bins {
		most = max(most, b.Count)
	}
	// y axis: ticks at nice counts.
	step := niceStep(float64(max(most, 1)), 4)
	ymax := math.Ceil(float64(max(most, 1))/step) * step
	for v := 0.0; v <= ymax+step/2; v += step {
		y := base - int(v/ymax*float64(histHeight))
		c.fill(x0, y, x1, y+1, pngGrid)
		c.fill(x0-4, y, x0, y+1, pngAxis)
		s := fmtTick(v)
		drawText(c.img, x0-7-textWidth(s, 1), y-3, s, 1, pngText)
	}
	if len(bins) > 0 {
		// Counts are whole numbers: value v is drawn centred on v, a bin
		// [From, To] spans From-0.5 to To+0.5.
		lo, hi := float64(bins[0].From)-0.5, float64(bins[len(bins)-1].To)+0.5
		xOf := func(v float64) int { return x0 + int((v-lo)/(hi-lo)*float64(x1-x0)) }
		for _, b := range bins {
			if b.Count == 0 {
				continue
			}
			bx0, bx1 := xOf(float64(b.From)-0.5), xOf(float64(b.To)+0.5)
			if bx1-bx0 > 3 {
				bx0, bx1 = bx0+1, bx1-1
			}
			h := max(int(float64(b.Count)/ymax*float64(histHeight)), 1)
			c.fill(bx0, base-h, max(bx1, bx0+1), base, pngBar)
		}
		// x axis: ticks at nice values of the measure.
		xstep := max(niceStep(hi-lo, 8), 1)
		for v := math.Ceil(lo/xstep) * xstep; v <= hi; v += xstep {
			if v == 0 {
				v = 0 // not -0
			}
			x := xOf(v)
			c.fill(x, base, x+1, base+5, pngAxis)
			s := fmtTick(v)
			drawText(c.img, x-textWidth(s, 1)/2, base+8, s, 1, pngText)
		}
	}
	c.fill(x0, top, x0+1, base+1, pngAxis)
	c.fill(x0, base, x1, base+1, pngAxis)
	c.y = base + 8 + glyphH + 6
	label := l.Measure + " (each bar: how many " + unitsLabel + " have that count)"
	drawText(c.img, x0+(x1-x0-textWidth(label, 1))/2, c.y, label, 1, pngDim)
	c.y += glyphH + 4
}

// heatLayout returns the cell size and grid of a heat map of n cells.
func heatLayout(n int) (px, cols, rows int) {
	if n == 0 {
		return 0, 0, 0
	}
	cols = min(n, heatCols)
	px = min(max((pngWidth-plotLeft-pngMargin)/cols, 1), maxCellPx)
	rows = (n + cols - 1) / cols
	return px, cols, rows
}

// renderHeatMap draws the fill of every data page (or group of pages) in
// file order, rows labelled with their first page, and the colour scale.
func renderHeatMap(c *canvas, l statsLayer) {
	cells, per := l.scan.cells, max(l.scan.perCell, 1)
	px, cols, rows := heatLayout(len(cells))
	what := "fill of each 4 KiB data page"
	if per > 1 {
		what = fmt.Sprintf("fill of each group of %d 4 KiB data pages", per)
	}
	c.line(fmt.Sprintf("%s, in file order: left to right, %d per row, top to bottom", what, cols), 1, pngDim)
	drawText(c.img, pngMargin, c.y, "first page of the row", 1, pngDim)
	c.y += glyphH + 6
	labelEvery := max(1, (glyphH+5+px-1)/max(px, 1))
	for r := 0; r < rows; r++ {
		if r%labelEvery == 0 {
			s := strconv.FormatUint(uint64(r*cols)*per, 10)
			drawText(c.img, plotLeft-7-textWidth(s, 1), c.y+r*px+(px-glyphH)/2, s, 1, pngText)
		}
	}
	for i, v := range cells {
		x, y := plotLeft+(i%cols)*px, c.y+(i/cols)*px
		c.fill(x, y, x+px, y+px, heatColor(v))
	}
	c.y += max(rows*px, glyphH) + 10
	// Colour scale, numbered.
	x0, x1 := plotLeft, pngWidth-pngMargin
	drawText(c.img, pngMargin, c.y+(scaleH-glyphH)/2, "fill", 1, pngDim)
	for x := x0; x < x1; x++ {
		c.fill(x, c.y, x+1, c.y+scaleH, heatColor(float64(x-x0)/float64(x1-x0-1)))
	}
	c.y += scaleH
	for _, v := range []float64{0, 0.25, 0.5, 0.75, 1} {
		x := x0 + int(v*float64(x1-x0-1))
		c.fill(x, c.y, x+1, c.y+4, pngAxis)
		s := strconv.FormatFloat(v, 'g', -1, 64)
		drawText(c.img, min(max(x-textWidth(s, 1)/2, x0), x1-textWidth(s, 1)), c.y+6, s, 1, pngText)
	}
	c.y += 6 + glyphH + 4
	label := "0 = empty, 1 = full (" + l.scan.g.fillName() + " / all)"
	drawText(c.img, x0+(x1-x0-textWidth(label, 1))/2, c.y, label, 1, pngDim)
	c.y += glyphH + 4
}

// niceStep returns a step of 1, 2 or 5 times a power of ten that divides
// span into about n intervals.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// fmtTick formats a tick value: integers plainly, large ones with k or M.
func fmtTick(v float64) string {
	switch {
	case v >= 1e6 && math.Mod(v, 1e5) == 0:
		return strconv.FormatFloat(v/1e6, 'g', -1, 64) + "M"
	case v >= 1e4 && math.Mod(v, 100) == 0:
		return strconv.FormatFloat(v/1e3, 'g', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// pngSize is the size of the image for layers.
func pngSize(info pngInfo, layers []statsLayer) image.Point {
	c := &canvas{}
	renderPNG(c, info, layers)
	return image.Pt(pngWidth, c.y)
}

// pngTarget is where stats --png writes: the file the path names, with
// symlinks resolved, and the mode to give it.
type pngTarget struct {
	path string      // as given, for messages
	real string      // symlinks resolved: the file rename replaces
	perm fs.FileMode // an existing file's permissions; 0 for a new file
}

// checkPNGPath resolves the --png path and refuses, before any work, a
// path that is not a regular file (a directory, a device, a FIFO) or
// resolves to a file inside the store directory dir, or inside any other
// directory that looks like a store's: inspect never writes into a store.
func checkPNGPath(dir, path string) (*pngTarget, error) {
	t := &pngTarget{path: path}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("--png %s: %w", path, err)
	}
	if _, err := os.Lstat(abs); err == nil {
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("--png %s: a symlink that cannot be resolved: %w", path, err)
		}
		fi, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("--png %s: %w", path, err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("--png %s: not a regular file: it is %s", path, regfile.Describe(fi.Mode()))
		}
		t.real, t.perm = real, fi.Mode().Perm()
	} else if errors.Is(err, fs.ErrNotExist) {
		parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
		if err != nil {
			return nil, fmt.Errorf("--png %s: its directory: %w", path, err)
		}
		t.real = filepath.Join(parent, filepath.Base(abs))
	} else {
		return nil, fmt.Errorf("--png %s: %w", path, err)
	}
	if inside, err := inDir(filepath.Dir(t.real), dir); err != nil {
		return nil, fmt.Errorf("--png %s: %w", path, err)
	} else if inside {
		return nil, fmt.Errorf("--png %s: the file is inside the store directory %s; inspect never writes into a store", path, dir)
	}
	if other := storeAbove(filepath.Dir(t.real)); other != "" {
		return nil, fmt.Errorf("--png %s: the file is inside the store directory %s (another store than %s); inspect never writes into a store", path, other, dir)
	}
	return t, nil
}

// storeAbove returns the directory d or the nearest one above it that
// looks like a store's (see looksLikeStore), or "" if none does: the
// guard of --png for stores other than the one inspected.
func storeAbove(d string) string {
	for {
		if looksLikeStore(d) {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			return ""
		}
		d = up
	}
}

// looksLikeStore reports whether d holds what a store's directory does:
// two of catalog.db (as a file of any type, or even a dangling link: a
// store whose catalog is damaged is still one), a filters directory and
// a wal directory (a store that lost its catalog keeps the other two).
func looksLikeStore(d string) bool {
	n := 0
	if _, err := os.Lstat(filepath.Join(d, "catalog.db")); err == nil {
		n++
	}
	for _, sub := range []string{"filters", "wal"} {
		if fi, err := os.Stat(filepath.Join(d, sub)); err == nil && fi.IsDir() {
			n++
		}
	}
	return n >= 2
}

// inDir reports whether the directory d is dir or lies under it,
// comparing directories by identity (os.SameFile), so symlinks and other
// names of dir count. A dir that cannot be found is not one d lies under.
func inDir(d, dir string) (bool, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return false, nil
	}
	for {
		fi, err := os.Stat(d)
		if err != nil {
			return false, err
		}
		if os.SameFile(fi, st) {
			return true, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return false, nil
		}
		d = up
	}
}

// writePNG draws the image and writes it to t: into a new temporary file
// beside the target, renamed over it once complete. An existing file is
// replaced whole, never truncated or written in place, so a process that
// has it mapped keeps its pages, and a failed write leaves it as it was.
func writePNG(t *pngTarget, info pngInfo, layers []statsLayer) error {
	size := pngSize(info, layers)
	c := &canvas{img: image.NewRGBA(image.Rectangle{Max: size})}
	renderPNG(c, info, layers)
	f, err := createTemp(filepath.Dir(t.real), "."+filepath.Base(t.real)+".tmp")
	if err != nil {
		return fmt.Errorf("--png %s: %w", t.path, err)
	}
	tmp := f.Name()
	err = png.Encode(f, c.img)
	if err == nil && t.perm != 0 {
		err = f.Chmod(t.perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, t.real)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("--png %s: %w", t.path, err)
	}
	return nil
}

// createTemp creates a new file prefix.NNNN in dir, with the permissions
// a new file gets (0666 less the umask); os.CreateTemp's are 0600.
func createTemp(dir, prefix string) (*os.File, error) {
	for i := 0; ; i++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil || !errors.Is(err, fs.ErrExist) || i == 100 {
			return f, err
		}
	}
}
