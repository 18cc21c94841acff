package catalog

import (
	"os"
	"syscall"
)

// statStamp is fi's fileStamp.
func statStamp(fi os.FileInfo) fileStamp {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}
	}
	return fileStamp{dev: uint64(st.Dev), ino: st.Ino, size: uint64(st.Size),
		mtimeSec: st.Mtim.Sec, mtimeNsec: st.Mtim.Nsec, ctimeSec: st.Ctim.Sec, ctimeNsec: st.Ctim.Nsec, ok: true}
}
