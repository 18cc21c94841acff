package mmapbits

import "golang.org/x/sys/unix"

// adviseHuge asks for transparent huge pages (under the kernel's "madvise"
// policy they are given only when asked). Advice only: an error changes
// nothing but speed.
func adviseHuge(mem []byte) { _ = unix.Madvise(mem, unix.MADV_HUGEPAGE) }

// adviseSmall asks for base pages only (MADV_NOHUGEPAGE). Advice only.
func adviseSmall(mem []byte) { _ = unix.Madvise(mem, unix.MADV_NOHUGEPAGE) }
