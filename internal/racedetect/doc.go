// Package racedetect tells tests whether they run under the race
// detector, where the long single-goroutine ones take fewer rounds with
// -short: its instrumentation makes them several times slower and finds
// nothing in code that one goroutine runs.
package racedetect
