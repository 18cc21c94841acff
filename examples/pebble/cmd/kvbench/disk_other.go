//go:build !linux

package main

import "errors"

// disk would read a block device's counters; only Linux has them here.
type disk struct{}

// diskOf returns an error: no block device counters on this system.
func diskOf(string) (*disk, error) { return nil, errors.New("no block device counters on this system") }

// read is never called: diskOf returns no disk.
func (*disk) read() (diskCounters, error) {
	return diskCounters{}, errors.New("no block device counters")
}
