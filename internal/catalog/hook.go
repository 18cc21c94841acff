//go:build !filterstore_testhooks

package catalog

// afterCommit returns the result of an update's bbolt transaction as the
// caller sees it. Built without the filterstore_testhooks tag it passes
// err through and compiles away; with it (hook_testhooks.go) a test can
// turn a commit that reached the file into a failure, as a final
// fdatasync reporting ENOSPC or EIO would.
func afterCommit(path string, err error) error { return err }
