//go:build !amd64

package shards

var haveMoveRuns = false

func moveRunsAVX2(dst, src *byte, runs *byteRun, n int) { panic("unreachable") }
