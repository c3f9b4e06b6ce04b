//go:build !(arm64 || ppc64 || ppc64le)

package engine

// cacheLineSize is the cache line, as golang.org/x/sys/cpu has it.
const cacheLineSize = 64
