package mmapbits

import (
	"bytes"
	"io"
	"os"
	"strconv"
)

// mapLimit returns vm.max_map_count (see mapLimitHook).
func mapLimit() (int, error) {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || n <= 0 {
		return 0, errNoMapLimit
	}
	return n, nil
}

// mapCount returns the number of the process's mappings: the lines of
// /proc/self/maps.
func mapCount() (int, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n := 0
	for {
		m, err := f.Read(buf)
		n += bytes.Count(buf[:m], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}
