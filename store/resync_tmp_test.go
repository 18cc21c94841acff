package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/filterstore/filterstore/internal/format"
)

// TestStrayResyncTmp: a crash-left RESYNC.tmp (torn content) with and
// without a marker: Opens and Backup go on, and it is overwritten.
func TestStrayResyncTmp(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "s")
	s := mustOpen(t, dir, nil)
	_, err := s.CreateBloom("a", BloomConfig{Capacity: 1000})
	must(t, err)
	_, err = s.CreateBloom("b", BloomConfig{Capacity: 1000})
	must(t, err)
	must(t, s.Close())
	tmp := filepath.Join(dir, format.ResyncName+".tmp")
	must(t, os.WriteFile(tmp, []byte(resyncPartialHeader+"\n1-0.flt\n"), 0o644))
	s = mustOpen(t, dir, nil)
	must(t, s.Backup(filepath.Join(root, "bk")))
	must(t, s.Close())
	must(t, os.WriteFile(filepath.Join(dir, format.ResyncName), nil, 0o644))
	bpath := format.LayerPath(dir, 2, 0)
	must(t, os.Rename(bpath, bpath+".away"))
	s = mustOpen(t, dir, nil)
	err = s.Backup(filepath.Join(root, "bk2"))
	t.Logf("Backup with a partial marker and b missing: %v", err)
	must(t, s.Close())
	if only := readResyncList(filepath.Join(dir, format.ResyncName)); len(only) != 1 {
		t.Fatalf("marker lists %v", only)
	}
	ro, err := Open(dir, &Options{ReadOnly: true})
	must(t, err)
	must(t, ro.Close())
}
