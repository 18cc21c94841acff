//go:build (amd64 || arm64) && !purego

package prefetch

import "unsafe"

// lines prefetches the n lines at p[0], ..., p[n-1]; n > 0.
//
//go:noescape
func lines(p *unsafe.Pointer, n int)
