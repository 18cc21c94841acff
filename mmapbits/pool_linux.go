package mmapbits

import "golang.org/x/sys/unix"

// mapFixedNoReplace is MAP_FIXED_NOREPLACE: map at the address given or
// fail with EEXIST if anything is mapped there (Linux 4.17; older kernels
// take the address as a hint).
const mapFixedNoReplace = unix.MAP_FIXED_NOREPLACE
