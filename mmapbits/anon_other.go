//go:build !linux

package mmapbits

// adviseHuge does nothing where there is no transparent huge page advice.
func adviseHuge([]byte) {}

// adviseSmall does nothing where there is no transparent huge page advice.
func adviseSmall([]byte) {}
