package kv

import "sync"

// keyLocks serializes the mutations of a key: one mutex per stripe of
// key hashes, so mutations of different keys rarely wait for each other
// while each holds its stripe across its durability waits.
type keyLocks [1024]sync.Mutex

// lock locks the stripe of hash h and returns it, for the caller to
// unlock.
func (l *keyLocks) lock(h uint64) *sync.Mutex {
	m := &l[h%uint64(len(l))]
	m.Lock()
	return m
}
