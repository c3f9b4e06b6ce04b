package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"
)

var (
	// ErrNotRegular is wrapped by the error of a path that is not a
	// regular file (a directory, FIFO, device or socket, a link to one
	// included): it is refused before any byte is read.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge is wrapped by the error of a file of more bytes than
	// the bound: it is refused before it is read, or as soon as it grows
	// past the bound while it is read.
	ErrTooLarge = errors.New("file larger than the limit")
)

// Open opens the regular file at path for reading. Anything else is
// refused: the open does not block, and the opened descriptor is what
// is checked.
func Open(path string) (*os.File, error) {
	f, _, err := open(path)
	return f, err
}

// open is Open that also returns the file's size, from the fstat that
// checked it.
func open(path string) (*os.File, int64, error) {
	if err := checkPath(path); err != nil {
		return nil, 0, err
	}
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, 0, openError(path, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = notRegular(path, fi.Mode())
	}
	if err == nil {
		err = blocking(f)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// ReadFile returns the bytes of the regular file at path, at most limit
// of them (0: no limit). A file larger than limit by its size is refused
// before anything is allocated; the bytes read are those its size says
// (fewer where it ends sooner), or, where it says 0 (a file of /proc),
// those up to its end within the limit.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, size, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf, n, err := fill(path, nil, false, size, limit, f.Read)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// A Buffer reads whole files into memory that it reuses from file to
// file: once it is large enough, a read allocates nothing (on Linux,
// where it reads with raw system calls). The zero value is ready to use;
// a Buffer is not safe for concurrent use.
type Buffer struct {
	path []byte // NUL-terminated, for the system call
	data []byte
}

// unknownSize is the first buffer for a file whose size says 0.
const unknownSize = 4 << 10

// fill reads, with read, a file that fstat says is size bytes into buf,
// grown where it is too short (with room to spare where it is reused,
// for the next file), and returns the buffer and the bytes read: size of
// them, fewer where the file ends sooner; where size is 0 (a file of
// /proc), up to its end. Never more than limit (0: none), however the
// file grows. read returns 0 bytes (and nil or io.EOF) at the end.
func fill(path string, buf []byte, reuse bool, size, limit int64, read func([]byte) (int, error)) ([]byte, int, error) {
	if err := checkSize(path, size, limit); err != nil {
		return buf, 0, err
	}
	if size > math.MaxInt-1 {
		return buf, 0, checkSize(path, size, math.MaxInt-1)
	}
	known := size > 0
	want := int(size)
	if !known {
		want = unknownSize
		if limit > 0 {
			want = int(min(int64(want), limit+1))
		}
	}
	buf = grow(buf, want, reuse)
	n := 0
	for {
		if n == len(buf) {
			if known {
				break // all fstat said: the bytes written since are not read
			}
			if err := checkSize(path, int64(n), limit); err != nil {
				return buf, 0, err
			}
			next := 2 * len(buf)
			if limit > 0 {
				next = int(min(int64(next), limit+1))
			}
			grown := make([]byte, next)
			copy(grown, buf)
			buf = grown
		}
		k, err := read(buf[n:])
		n += k
		if err == io.EOF || err == nil && k == 0 {
			break
		}
		if err != nil {
			return buf, 0, &fs.PathError{Op: "read", Path: path, Err: err}
		}
	}
	if err := checkSize(path, int64(n), limit); err != nil {
		return buf, 0, err
	}
	return buf, n, nil
}

// grow returns s, or a new slice where it is too short (a quarter
// larger with spare), of length n.
func grow(s []byte, n int, spare bool) []byte {
	if cap(s) >= n {
		return s[:n]
	}
	if spare {
		return make([]byte, n, n+n/4)
	}
	return make([]byte, n)
}

// checkPath refuses a path with a NUL byte, which the system would cut
// short: it would read another file. The path is quoted in the error.
func checkPath(path string) error {
	if strings.IndexByte(path, 0) >= 0 {
		return fmt.Errorf("open %q: %w: the path has a NUL byte", path, fs.ErrInvalid)
	}
	return nil
}

// notRegular is the error for path, which is not a regular file but of
// the type in mode.
func notRegular(path string, mode fs.FileMode) error {
	what := "not a regular file"
	switch {
	case mode&fs.ModeDir != 0:
		what = "a directory"
	case mode&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case mode&fs.ModeCharDevice != 0:
		what = "a character device"
	case mode&fs.ModeDevice != 0:
		what = "a block device"
	case mode&fs.ModeSocket != 0:
		what = "a socket"
	case mode&fs.ModeIrregular != 0:
		what = "an irregular file"
	}
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %s", ErrNotRegular, what)}
}

// checkSize refuses a file of n bytes, or n read so far, over limit (0:
// no limit).
func checkSize(path string, n, limit int64) error {
	if limit > 0 && n > limit {
		return &fs.PathError{Op: "read", Path: path,
			Err: fmt.Errorf("%w: %d bytes or more, the limit is %d", ErrTooLarge, n, limit)}
	}
	return nil
}
