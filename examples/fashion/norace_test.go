//go:build !race

package main

// race reports whether the tests run under the race detector.
const race = false
