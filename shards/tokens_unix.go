//go:build unix

package shards

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mappedFile is a token file mapped read-only into memory.
type mappedFile struct {
	f    *os.File
	data []byte
}

// openTokenFile maps the file, or falls back to ReadAt when it cannot
// be mapped.
func openTokenFile(path string, size int64) (tokenFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if size == 0 || int64(int(size)) != size {
		return readAtFile{f}, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return readAtFile{f}, nil // a file system that cannot map: read instead
	}
	return &mappedFile{f: f, data: data}, nil
}

func (m *mappedFile) view(off, n int64) []byte { return m.data[off : off+n : off+n] }

func (m *mappedFile) readAt(p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > int64(len(m.data)) {
		return fmt.Errorf("read of %d bytes at %d: past the end (%d)", len(p), off, len(m.data))
	}
	copy(p, m.data[off:])
	return nil
}

func (m *mappedFile) contains(addr uintptr) bool {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m.data)))
	return base <= addr && addr-base < uintptr(len(m.data))
}

func (m *mappedFile) size() (int64, error) {
	fi, err := m.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (m *mappedFile) close() error {
	err := unix.Munmap(m.data)
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	return err
}
