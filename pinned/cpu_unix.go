//go:build unix

package pinned

import (
	"fmt"

	"golang.org/x/sys/unix"
)

const lockAdvice = "raise RLIMIT_MEMLOCK (ulimit -l) to lock them"

func mapPages(size int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	return b, nil
}

func lockPages(b []byte) error { return unix.Mlock(b) }

// unmapPages unmaps b, which unlocks it too.
func unmapPages(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("munmap: %w", err)
	}
	return nil
}
