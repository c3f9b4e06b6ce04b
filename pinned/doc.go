// Package pinned provides page-locked host memory, device memory and a
// caching pool of batch buffers for fast host-to-device copies.
//
// A Backend (cpu, cuda or hip) allocates the memory. A Pool caches the
// buffers: a buffer handed back with a Fence is reused only after the fence
// (the event of the copy that reads it) has completed, and a byte limit
// turns growth into backpressure. Memory is released explicitly; views
// taken from a buffer are invalid after it is freed.
package pinned
