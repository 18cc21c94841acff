package dirsync

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSync(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Sync(dir); err != nil {
		t.Fatalf("Sync(%s) = %v", dir, err)
	}
	if err := Sync(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("Sync of a missing directory = %v, want not-exist", err)
	}
}
