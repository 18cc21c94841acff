package store

// manyChunk is how many keys the batch lookups hash at a time, on the
// stack: enough to keep several cache misses in flight.
const manyChunk = 256

// fitBools returns dst[:n], allocating only if dst has less capacity.
func fitBools(dst []bool, n int) []bool {
	if cap(dst) < n {
		return make([]bool, n)
	}
	return dst[:n]
}
