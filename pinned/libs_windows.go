package pinned

// The library names tried, in order, when no path is forced: the DLLs of
// the HIP SDK (7, 6, then 5's unversioned one) and of the CUDA toolkit,
// found by LoadLibrary's search order (the application's folder, system32,
// PATH, which the installers extend).
var (
	hipLibs  = []string{"amdhip64_7.dll", "amdhip64_6.dll", "amdhip64.dll"}
	cudaLibs = []string{"cudart64_13.dll", "cudart64_12.dll", "cudart64_110.dll"}
)
