//go:build unix

package corpus

import (
	"fmt"
	"unsafe"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// mappedFile is a token file mapped read-only into memory.
type mappedFile struct {
	m    *regfile.Mapping
	data []byte
}

// openTokenFile opens the regular file at path and maps it, or falls
// back to ReadAt when it cannot be mapped. It returns the file's size
// when it was opened: the size of the mapping.
func openTokenFile(path string) (tokenFile, int64, error) {
	m, err := regfile.Map(path)
	if err != nil {
		return nil, 0, err
	}
	if m.Data == nil { // empty, or a file system that cannot map: read instead
		return readAtFile{m.File}, m.Size, nil
	}
	return &mappedFile{m: m, data: m.Data}, m.Size, nil
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
	fi, err := m.m.File.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (m *mappedFile) close() error { return m.m.Close() }
