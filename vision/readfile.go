package vision

import (
	"errors"
	"fmt"
)

// DefaultMaxFileBytes is the largest file read as an image by default:
// 64 MiB, far above any photo a loader resizes (a 100-megapixel JPEG is
// about 30 MB), and far below what would run a worker out of memory.
const DefaultMaxFileBytes = 64 << 20

// read reads the regular file at path, at most limit bytes (0: no
// limit), into the scratch buffer: no allocation once the buffer is
// large enough (regfile.Buffer, raw system calls on Linux). Anything but
// a regular file is refused before a byte is read, without blocking.
func (sc *scratch) read(path string, limit int64) ([]byte, error) {
	data, err := sc.file.Read(path, limit)
	if err != nil {
		if errors.Is(err, ErrFileTooLarge) {
			return nil, fmt.Errorf("%w (MaxFileBytes)", err)
		}
		return nil, err
	}
	if len(data) == 0 {
		return nil, emptyFile(path)
	}
	return data, nil
}

func emptyFile(path string) error { return fmt.Errorf("%s: empty file: %w", path, ErrNotImage) }
