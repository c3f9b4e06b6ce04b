//go:build arm64 || ppc64 || ppc64le

package engine

// cacheLineSize is the cache line, or the unit the hardware prefetches
// lines in (arm64's Neoverse and Apple's cores: 128 bytes), as
// golang.org/x/sys/cpu has it.
const cacheLineSize = 128
