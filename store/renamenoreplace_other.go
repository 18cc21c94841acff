//go:build !linux

package store

// renameNoReplace renames from to to unless to exists, which fails with
// an error wrapping fs.ErrExist. Without renameat2(2) it checks first,
// then renames: a path made between the two is replaced if it is an
// empty directory.
func renameNoReplace(from, to string) error { return renameIfAbsent(from, to) }
