package pinned

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
)

// CPU is the backend of machines with no GPU: host buffers are anonymous
// mmap'd pages, locked in memory with mlock where RLIMIT_MEMLOCK allows.
// When the lock is refused the buffer is used unlocked and one note is
// logged for the process.
type CPU struct{}

var mlockNote sync.Once

// Name returns "cpu".
func (CPU) Name() string { return "cpu" }

// HostAlloc maps n bytes (rounded up to whole pages) and tries to lock them.
func (CPU) HostAlloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("pinned: host alloc of %d bytes", n)
	}
	page := syscall.Getpagesize()
	size := (n + page - 1) &^ (page - 1)
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("pinned: mmap %d bytes: %w", size, err)
	}
	if err := syscall.Mlock(b); err != nil {
		mlockNote.Do(func() {
			slog.Info("tensorbatch: host buffers are not page-locked; raise RLIMIT_MEMLOCK (ulimit -l) to lock them",
				"err", err, "bytes", size)
		})
	}
	return b[:n], nil
}

// HostFree unmaps memory from HostAlloc.
func (CPU) HostFree(b []byte) error {
	if cap(b) == 0 {
		return errors.New("pinned: free of an empty buffer")
	}
	// munmap unlocks too; the whole mapping is b[:cap(b)].
	if err := syscall.Munmap(b[:cap(b)]); err != nil {
		return fmt.Errorf("pinned: munmap: %w", err)
	}
	return nil
}
