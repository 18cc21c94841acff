//go:build !race

package main

// raceEnabled says the tests run under the race detector, where FuzzInspect
// takes fewer seeds with -short.
const raceEnabled = false
