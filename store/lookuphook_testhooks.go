//go:build filterstore_testhooks

package store

// lookupReadHook, if set, is called by beforeLookupRead. Tests set it
// before the lookups they run and clear it after; it is not synchronized.
var lookupReadHook func(b *filterBase)

// beforeLookupRead runs in every lookup after its first check that the
// filter is on and before it reads the filter's words; in this build it
// calls lookupReadHook.
func beforeLookupRead(b *filterBase) {
	if h := lookupReadHook; h != nil {
		h(b)
	}
}
