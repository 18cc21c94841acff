package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"

	"github.com/filterstore/filterstore/mmapbits"
)

// The image stats --png writes: for each layer, a histogram panel (one bar
// per count, or per group of counts when there are more than fit) above a
// heat map of per-page fill and a color-scale strip. No text: the command's
// text output explains the panels.

const (
	pngWidth   = 720
	pngMargin  = 10
	histHeight = 160
	scaleStrip = 10
	maxCellPx  = 24
	heatCols   = 100
)

var (
	pngBackground = color.RGBA{255, 255, 255, 255}
	pngAxis       = color.RGBA{120, 120, 120, 255}
	pngBar        = color.RGBA{70, 130, 180, 255}
	pngSeparator  = color.RGBA{200, 200, 200, 255}
)

// viridis-like color stops, empty to full.
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

// heatLayout returns the cell size and grid of a heat map of n cells.
func heatLayout(n int) (px, cols, rows int) {
	if n == 0 {
		return 0, 0, 0
	}
	cols = min(n, heatCols)
	px = min(max((pngWidth-2*pngMargin)/cols, 1), maxCellPx)
	rows = (n + cols - 1) / cols
	return px, cols, rows
}

func writePNG(path string, layers []statsLayer) error {
	height := pngMargin
	for _, l := range layers {
		px, _, rows := heatLayout(len(l.scan.cells))
		height += histHeight + pngMargin + rows*px + pngMargin + scaleStrip + 2*pngMargin
	}
	img := image.NewRGBA(image.Rect(0, 0, pngWidth, height))
	fill := func(x0, y0, x1, y1 int, c color.RGBA) {
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				img.SetRGBA(x, y, c)
			}
		}
	}
	fill(0, 0, pngWidth, height, pngBackground)
	y := pngMargin
	inner := pngWidth - 2*pngMargin
	for li, l := range layers {
		if li > 0 {
			fill(0, y-pngMargin, pngWidth, y-pngMargin+1, pngSeparator)
		}
		// Histogram: one column group per count (or group of counts).
		hist := l.scan.hist
		top := len(hist) - 1
		if l.scan.g.kind != mmapbits.KindCuckoo { // stop at the largest count seen
			top = l.Max
		}
		cols := top + 1
		group := 1
		if cols > inner {
			group = (cols + inner - 1) / inner
			cols = (cols + group - 1) / group
		}
		counts := make([]uint64, cols)
		var most uint64
		for c := 0; c <= top; c++ {
			counts[c/group] += hist[c]
		}
		for _, n := range counts {
			most = max(most, n)
		}
		barW := max(inner/cols, 1)
		base := y + histHeight
		for i, n := range counts {
			if n == 0 || most == 0 {
				continue
			}
			h := max(int(float64(n)/float64(most)*float64(histHeight-1)), 1)
			x0 := pngMargin + i*barW
			gap := 0
			if barW > 3 {
				gap = 1
			}
			fill(x0, base-h, x0+barW-gap, base, pngBar)
		}
		fill(pngMargin, base, pngMargin+inner, base+1, pngAxis)
		y = base + pngMargin

		// Heat map of per-page fill.
		px, hcols, rows := heatLayout(len(l.scan.cells))
		for i, v := range l.scan.cells {
			cx, cy := pngMargin+(i%hcols)*px, y+(i/hcols)*px
			fill(cx, cy, cx+px, cy+px, heatColor(v))
		}
		y += rows*px + pngMargin
		// Color scale, empty to full.
		for x := 0; x < inner; x++ {
			fill(pngMargin+x, y, pngMargin+x+1, y+scaleStrip, heatColor(float64(x)/float64(inner-1)))
		}
		y += scaleStrip + 2*pngMargin
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--png: %w", err)
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("--png %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--png %s: %w", path, err)
	}
	return nil
}
