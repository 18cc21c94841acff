//go:build !race

package racedetect

// Enabled says the binary was built with the race detector (-race).
const Enabled = false
