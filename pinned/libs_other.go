//go:build !windows

package pinned

// The library names tried, in order, when no path is forced (dlopen's
// search: LD_LIBRARY_PATH, the ld.so cache).
var (
	hipLibs  = []string{"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"}
	cudaLibs = []string{"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}
)
