package mmapbits

import "golang.org/x/sys/unix"

// fallocate is unix.Fallocate; tests replace it to exercise the fallback.
var fallocate = unix.Fallocate
