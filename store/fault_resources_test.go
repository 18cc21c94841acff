package store

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/filterstore/filterstore/mmapbits"
)

// TestOpenOutOfResourcesFails: a filter file that cannot be mapped for
// want of descriptors or memory (EMFILE, ENFILE, ENOMEM, EAGAIN) at Open,
// writer's or read-only, or that a writer may not open (EACCES, EPERM),
// fails the Open with an error that wraps the system's and is not
// ErrCorrupt, instead of opening the filter broken ("corrupt data") for
// the session; the next Open, with the resource or permission back, finds
// every key. A read-only Open opens a filter it may not open broken, its
// error wrapping the permission error (so that inspect reports the rest
// of the store), and an EIO still opens the filter broken, as the package
// doc says of an unreadable layer file. Open used to open the filter
// broken for all of them: its lookups answered "maybe" and its changes
// failed with ErrCorrupt until the store was reopened (for a writer's
// EACCES and EPERM until the seventeenth session: an adversarial tester's
// finding, a filter called corrupt that an operator might have dropped).
func TestOpenOutOfResourcesFails(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EAGAIN, syscall.EACCES, syscall.EPERM} {
		for _, ro := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/readonly=%v", errno, ro), func(t *testing.T) {
				w := newSimWorld(t, SyncAlways)
				s, err := w.open(t)
				must(t, err)
				for _, name := range []string{"a", "b", "c"} {
					b, err := s.CreateBloom(name, BloomConfig{Capacity: 1000})
					must(t, err)
					must(t, second(b.Add([]byte(name+"-key"))))
				}
				must(t, s.Close())

				fired := 0
				w.sim.SetInjector(func(op mmapbits.Op, path string) error {
					if op == mmapbits.OpOpen && strings.HasSuffix(path, "2-0.flt") { // "b"
						fired++
						return errno
					}
					return nil
				})
				opts := w.opts
				opts.ReadOnly = ro
				s, err = Open(w.dir, WithSeams(opts, w.sim, w.fs))
				if ro && errors.Is(errno, fs.ErrPermission) {
					must(t, err)
					b, err := s.Bloom("b")
					must(t, err)
					_, err = b.Info()
					must(t, s.Close())
					if fired == 0 || !errors.Is(err, errno) {
						t.Fatalf("read-only Open with %v mapping filter b's file: filter b's Info: %v; want it broken, wrapping %v", errno, err, errno)
					}
					return
				}
				if err == nil {
					s.Close()
					t.Fatalf("Open with %v mapping a filter file succeeded", errno)
				}
				if fired == 0 || !errors.Is(err, errno) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"b"`) {
					t.Fatalf("Open with %v mapping filter b's file: %v; want an error naming the filter, wrapping %v and not ErrCorrupt", errno, err, errno)
				}

				w.sim.SetInjector(nil)
				s, err = Open(w.dir, WithSeams(opts, w.sim, w.fs))
				must(t, err)
				defer s.Close()
				for _, name := range []string{"a", "b", "c"} {
					b, err := s.Bloom(name)
					must(t, err)
					if in, err := b.Info(); err != nil || in.State != "ok" || !b.Has([]byte(name+"-key")) {
						t.Fatalf("filter %s after the resource came back: state %q, %v", name, in.State, err)
					}
				}
			})
		}
	}
	t.Run("EIO", func(t *testing.T) {
		w := newSimWorld(t, SyncAlways)
		s, err := w.open(t)
		must(t, err)
		_, err = s.CreateBloom("b", BloomConfig{Capacity: 1000})
		must(t, err)
		must(t, s.Close())
		w.sim.SetInjector(func(op mmapbits.Op, _ string) error {
			if op == mmapbits.OpOpen {
				return syscall.EIO
			}
			return nil
		})
		s, err = w.open(t)
		must(t, err)
		defer s.Close()
		b, err := s.Bloom("b")
		must(t, err)
		if _, err := b.Info(); !errors.Is(err, ErrCorrupt) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("Info of a filter whose file gave EIO: %v, want broken (ErrCorrupt wrapping EIO)", err)
		}
	})
}
