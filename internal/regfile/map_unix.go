//go:build unix

package regfile

import "golang.org/x/sys/unix"

// mmap maps size bytes of the open file fd read-only and shared.
func mmap(fd uintptr, size int) ([]byte, error) {
	return unix.Mmap(int(fd), 0, size, unix.PROT_READ, unix.MAP_SHARED)
}

func munmap(data []byte) error { return unix.Munmap(data) }
