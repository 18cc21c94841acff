package format

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Names in a store directory (drawn in the package documentation). They
// are part of the format and must never change.
const (
	// LockName is the file the one writer process holds an flock on.
	LockName = "LOCK"
	// CatalogName is the bbolt catalog.
	CatalogName = "catalog.db"
	// CatalogTmpName is a catalog being created, renamed to CatalogName
	// once complete and synced.
	CatalogTmpName = "catalog.db.tmp"
	// FiltersName is the directory of the layer files.
	FiltersName = "filters"
	// WALName is the directory of the WAL segments (named by package wal).
	WALName = "wal"
	// ResyncName marks a store whose filter files saw a failed msync: the
	// next Open rewrites every data page before it trusts them.
	ResyncName = "RESYNC"
	// SessionName is there while a writer has the store open: a clean
	// Close removes it, so found by Open it says the last writer died
	// (its pages may hold changes no data checksum covers). It is empty,
	// or holds "wal ", the first LSN of the newest WAL segment the writer
	// may append to in 20 digits, a space, the CRC-32C of the bytes
	// before it in 8 hex digits, and a newline (store/session.go).
	SessionName = "SESSION"
	// LayerSuffix ends the name of every layer file.
	LayerSuffix = ".flt"
	// TmpSuffix ends a layer file being created, renamed without it once
	// complete.
	TmpSuffix = ".tmp"
)

// LayerName returns the name of a filter layer's file in FiltersName:
// "<id>-<layer>.flt".
func LayerName(id uint64, layer int) string {
	return fmt.Sprintf("%d-%d%s", id, layer, LayerSuffix)
}

// ParseLayerName is LayerName's inverse: ok is false for any name
// LayerName does not return, a temporary one (TmpSuffix) included.
func ParseLayerName(name string) (id uint64, layer int, ok bool) {
	base, found := strings.CutSuffix(name, LayerSuffix)
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(base, "-")
	if !found {
		return 0, 0, false
	}
	id, err1 := strconv.ParseUint(a, 10, 64)
	l, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || l < 0 || LayerName(id, l) != name {
		return 0, 0, false // not a number, or not as LayerName writes it ("01", "+1")
	}
	return id, l, true
}

// LayerPath returns the file of a filter layer in the store directory dir.
func LayerPath(dir string, id uint64, layer int) string {
	return filepath.Join(dir, FiltersName, LayerName(id, layer))
}

// FiltersDir returns the layer file directory of the store directory dir.
func FiltersDir(dir string) string { return filepath.Join(dir, FiltersName) }

// WALDir returns the WAL directory of the store directory dir.
func WALDir(dir string) string { return filepath.Join(dir, WALName) }

// CatalogPath returns the catalog of the store directory dir.
func CatalogPath(dir string) string { return filepath.Join(dir, CatalogName) }
