package pinned

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// CPU is the backend of machines with no GPU: host buffers are whole pages
// from the OS (mmap; VirtualAlloc on Windows), locked in memory where the
// OS allows it (mlock within RLIMIT_MEMLOCK; VirtualLock within the
// process's minimum working set, which HostAlloc grows by the buffer).
// When the lock is refused the buffer is used unlocked and one note, with
// the reason, is logged for the process.
type CPU struct{}

var lockNote sync.Once

// Name returns "cpu".
func (CPU) Name() string { return "cpu" }

// HostAlloc maps n bytes (rounded up to whole pages) and tries to lock them.
func (CPU) HostAlloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("pinned: host alloc of %d bytes", n)
	}
	page := os.Getpagesize()
	size := (n + page - 1) &^ (page - 1)
	b, err := mapPages(size)
	if err != nil {
		return nil, fmt.Errorf("pinned: %w", err)
	}
	if err := lockPages(b); err != nil {
		lockNote.Do(func() {
			slog.Info("tensorbatch: host buffers are not page-locked; "+lockAdvice, "err", err, "bytes", size)
		})
	}
	return b[:n], nil
}

// HostFree unmaps memory from HostAlloc.
func (CPU) HostFree(b []byte) error {
	if cap(b) == 0 {
		return errors.New("pinned: free of an empty buffer")
	}
	// The whole mapping is b[:cap(b)].
	if err := unmapPages(b[:cap(b)]); err != nil {
		return fmt.Errorf("pinned: %w", err)
	}
	return nil
}
