package pinned

import "errors"

// Backend allocates host and device memory and moves bytes between them.
// The cpu backend has no device: DeviceAlloc returns ErrNoDevice and the
// host buffer is the batch.
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

// Errors that callers test with errors.Is.
var (
	ErrClosed   = errors.New("pinned: closed")
	ErrNoDevice = errors.New("no GPU device")
)
