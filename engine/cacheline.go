package engine

// cacheLinePad separates the fields before and after it onto cache lines
// of their own (NOTE [lines]): as golang.org/x/sys/cpu.CacheLinePad,
// without linking that package into every program of the loader.
type cacheLinePad struct{ _ [cacheLineSize]byte }
