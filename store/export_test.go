package store

import (
	"github.com/filterstore/filterstore/mmapbits"
	"github.com/filterstore/filterstore/wal"
)

// WithSeams returns opts with the test seams set.
func WithSeams(opts Options, m mmapbits.Mapper, fs wal.FS) *Options {
	opts.mapper, opts.walFS = m, fs
	_, sim := m.(*mmapbits.Sim)
	_, mem := fs.(*wal.MemFS)
	opts.simulated = sim && mem
	return &opts
}

// abandonForTest drops the store as a killed process would: no checkpoint,
// no WAL close beyond what is durable already, lock released.
func (s *Store) abandonForTest() {
	s.closed.Store(true)
	close(s.stop)
	s.bg.Wait()
	s.abandon()
}
