//go:build filterstore_testhooks

package catalog

// AfterCommitHook, if set, is called by every update once its bbolt
// transaction has returned, with the catalog's path and that result, and
// its result is returned instead: a test can turn a commit that reached
// the file into an error (ENOSPC, EIO), or change an error. It runs with
// the bbolt file still open. Tests set it and clear it; it is not
// synchronized.
var AfterCommitHook func(path string, err error) error

// afterCommit calls AfterCommitHook.
func afterCommit(path string, err error) error {
	if h := AfterCommitHook; h != nil {
		return h(path, err)
	}
	return err
}
