//go:build !linux

package main

import "errors"

// counters are the events opened on one OS thread (Linux only).
type counters struct {
	names, failed []string
}

func openCounters() (*counters, error) {
	return nil, errors.New("hardware counters are read on Linux only")
}

func (c *counters) read() []float64 { return nil }

func (c *counters) close() {}
