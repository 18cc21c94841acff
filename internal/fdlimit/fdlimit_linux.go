package fdlimit

import (
	"os"
	"syscall"
	"testing"
)

// Leave lowers the process's RLIMIT_NOFILE so that exactly n more
// descriptors can be opened, and returns what puts the limit back and
// closes the descriptors it took. It first fills every free number below
// the highest in use (with /dev/null), so that each later open takes a
// new number and the (n+1)-th fails with EMFILE. The limit is the
// process's: nothing else in it should open files meanwhile.
func Leave(t testing.TB, n int) (restore func()) {
	t.Helper()
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	var fillers []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		if fd := f.Fd(); int(fd) >= len(fds)-2 { // above every descriptor but ReadDir's and f
			f.Close()
			low := was
			low.Cur = uint64(int(fd) + n)
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
				t.Fatal(err)
			}
			break
		}
		fillers = append(fillers, f)
	}
	return func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
			t.Fatal(err)
		}
		for _, f := range fillers {
			f.Close()
		}
	}
}
