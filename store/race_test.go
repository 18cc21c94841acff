//go:build race

package store

// raceEnabled says the tests run under the race detector, where a few
// single-goroutine tests take fewer rounds with -short.
const raceEnabled = true
