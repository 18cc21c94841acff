//go:build !linux

package mmapbits

// mapFixedNoReplace is 0 where there is no MAP_FIXED_NOREPLACE: the
// address given is a hint, and replace checks where the mapping went.
const mapFixedNoReplace = 0
