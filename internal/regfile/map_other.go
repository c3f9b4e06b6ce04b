//go:build !unix

package regfile

import "errors"

// mmap: files are not mapped here; a Mapping is read with ReadAt.
func mmap(uintptr, int) ([]byte, error) { return nil, errors.New("not mapped on this system") }

func munmap([]byte) error { return nil }
