//go:build !linux

package mmapbits

// mapLimit reports no limit the guard can read: the other platforms'
// limits on mappings are not counted.
func mapLimit() (int, error) { return 0, errNoMapLimit }

// mapCount is not used where mapLimit reports no limit.
func mapCount() (int, error) { return 0, nil }
