//go:build !linux

package store

import "testing"

// wantHugeMapping checks nothing off Linux, where filter files are not
// advised for huge pages.
func wantHugeMapping(t *testing.T, b *filterBase) {}
