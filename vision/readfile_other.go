//go:build !linux

package vision

import (
	"fmt"
	"io"
	"os"
)

// read reads the file at path into the scratch buffer.
func (sc *scratch) read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	sc.data = grow(sc.data, int(fi.Size())+512)
	n, err := io.ReadFull(f, sc.data)
	for err == nil { // larger than stat said
		sc.data = append(sc.data, make([]byte, len(sc.data))...)
		var k int
		k, err = io.ReadFull(f, sc.data[n:])
		n += k
	}
	if err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: empty file: %w", path, ErrNotImage)
	}
	return sc.data[:n], nil
}
