//go:build !linux

package regfile

// Read reads the regular file at path into b, at most limit bytes (0:
// no limit), as ReadFile does, and returns its bytes: valid until the
// next Read. The memory is reused; opening the file allocates here.
func (b *Buffer) Read(path string, limit int64) ([]byte, error) {
	f, size, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var n int
	b.data, n, err = fill(path, b.data, true, size, limit, f.Read)
	if err != nil {
		return nil, err
	}
	return b.data[:n], nil
}
