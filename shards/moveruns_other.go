//go:build !amd64

package shards

import "unsafe"

var haveMoveRuns = false

func moveAVX2(dst, src *byte, runs unsafe.Pointer, n int, spans bool) bool { panic("unreachable") }
