package vision

import (
	"fmt"
	"io/fs"
	"strings"
	"syscall"
)

// DefaultMaxFileBytes is the largest file read as an image by default:
// 64 MiB, far above any photo a loader resizes (a 100-megapixel JPEG is
// about 30 MB), and far below what would run a worker out of memory.
const DefaultMaxFileBytes = 64 << 20

// checkPath refuses a path with a NUL byte, which the system would cut
// short: it would read another file. The path is quoted in the error.
func checkPath(path string) error {
	if strings.IndexByte(path, 0) >= 0 {
		return fmt.Errorf("open %q: %w: the path has a NUL byte", path, fs.ErrInvalid)
	}
	return nil
}

// notRegular is the error for a path that is not a regular file: mode is
// its fs.FileMode, or 0 with ifmt its S_IFMT bits.
func notRegular(path string, mode fs.FileMode, ifmt uint32) error {
	what := "not a regular file"
	switch {
	case mode&fs.ModeDir != 0 || ifmt == syscall.S_IFDIR:
		what = "a directory"
	case mode&fs.ModeNamedPipe != 0 || ifmt == syscall.S_IFIFO:
		what = "a named pipe (FIFO)"
	case mode&fs.ModeCharDevice != 0 || ifmt == syscall.S_IFCHR:
		what = "a character device"
	case mode&fs.ModeDevice != 0 || ifmt == syscall.S_IFBLK:
		what = "a block device"
	case mode&fs.ModeSocket != 0 || ifmt == syscall.S_IFSOCK:
		what = "a socket"
	}
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %s", ErrNotRegular, what)}
}

// checkSize refuses a file of more than limit bytes (0: no limit).
func checkSize(path string, n, limit int64) error {
	if limit > 0 && n > limit {
		return &fs.PathError{Op: "read", Path: path,
			Err: fmt.Errorf("%w: %d bytes or more, the limit is %d (MaxFileBytes)", ErrFileTooLarge, n, limit)}
	}
	return nil
}

func emptyFile(path string) error { return fmt.Errorf("%s: empty file: %w", path, ErrNotImage) }
