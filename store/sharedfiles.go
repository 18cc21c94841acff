package store

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/filterstore/filterstore/internal/format"
)

// refuseSharedFiles fails a writer's Open if the catalog, a WAL segment or
// a filter file of dir has another name (a hard link). A copy made with
// cp -al shares every file with the store it was made from; LOCK is its
// own in each (Open refuses a hard-linked one), so a writer in each
// directory would append to the same WAL and commit to the same catalog,
// and after a crash neither store opens. A read-only store writes nothing
// and skips the check. It costs one lstat per file.
func refuseSharedFiles(dir string) error {
	paths := []string{filepath.Join(dir, format.CatalogName)}
	for _, sub := range []string{format.WALName, format.FiltersName} {
		ents, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			continue // missing or unreadable: the recovery's checks report it
		}
		for _, e := range ents {
			if e.Type().IsRegular() {
				paths = append(paths, filepath.Join(dir, sub, e.Name()))
			}
		}
	}
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue // a directory has several names of its own; Open reports what is wrong with it
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			return fmt.Errorf("store: open %s: %w: the file has %d names (a hard link: a copy made with cp -al shares every file with the store it was made from, and a writer here would change that store's files too; remove the copy before a writer opens either, and copy a store with Backup, or cp -a while no writer has it open)",
				p, ErrCorrupt, st.Nlink)
		}
	}
	return nil
}
