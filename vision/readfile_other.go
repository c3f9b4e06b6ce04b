//go:build !linux

package vision

import (
	"io"
	"os"
)

// read reads the regular file at path, at most limit bytes (0: no
// limit), into the scratch buffer. Anything but a regular file is
// refused from its stat, before it is opened: a FIFO would block.
func (sc *scratch) read(path string, limit int64) ([]byte, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode(), 0)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() { // replaced since the first stat
		return nil, notRegular(path, fi.Mode(), 0)
	}
	if err := checkSize(path, fi.Size(), limit); err != nil {
		return nil, err
	}
	sc.data = grow(sc.data, int(fi.Size())+512)
	n, err := io.ReadFull(f, sc.data)
	for err == nil { // larger than stat said
		if err := checkSize(path, int64(n), limit); err != nil {
			return nil, err
		}
		sc.data = append(sc.data, make([]byte, len(sc.data))...)
		var k int
		k, err = io.ReadFull(f, sc.data[n:])
		n += k
	}
	if err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if err := checkSize(path, int64(n), limit); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, emptyFile(path)
	}
	return sc.data[:n], nil
}
