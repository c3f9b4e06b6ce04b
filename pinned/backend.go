package pinned

import "errors"

// Backend allocates the host memory of batches. A *GPU backend also has
// device memory, streams and events; on the cpu backend the host buffer is
// the batch.
type Backend interface {
	// Name is "cpu", "cuda" or "hip".
	Name() string
	// HostAlloc returns n bytes of page-locked, page-aligned host memory.
	HostAlloc(n int) ([]byte, error)
	// HostFree frees memory from HostAlloc.
	HostFree(b []byte) error
}

// Fence reports when the work that reads a buffer has completed.
type Fence interface {
	// Done reports whether the work has completed, without blocking.
	Done() (bool, error)
}

// ErrClosed is returned by a closed Pool.
var ErrClosed = errors.New("pinned: closed")
