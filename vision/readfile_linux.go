package vision

import (
	"fmt"
	"io/fs"
	"syscall"
	"unsafe"
)

// read reads the file at path into the scratch buffer with raw system
// calls: no allocation once the buffer is large enough.
func (sc *scratch) read(path string) ([]byte, error) {
	sc.path = append(append(sc.path[:0], path...), 0)
	fd, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, atFDCWD(), uintptr(unsafe.Pointer(&sc.path[0])),
		uintptr(syscall.O_RDONLY|syscall.O_CLOEXEC), 0, 0, 0)
	if errno != 0 {
		return nil, &fs.PathError{Op: "open", Path: path, Err: errno}
	}
	defer syscall.Close(int(fd))
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd), &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return nil, &fs.PathError{Op: "read", Path: path, Err: syscall.EISDIR}
	}
	size := int(st.Size)
	sc.data = grow(sc.data, size+1)
	n := 0
	for n < len(sc.data) {
		k, err := syscall.Read(int(fd), sc.data[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if k == 0 {
			break
		}
		n += k
		if n == size && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			break // all stat said: skip the read that would return 0
		}
		if n == len(sc.data) { // larger than stat said: keep reading
			sc.data = append(sc.data, make([]byte, len(sc.data))...)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: empty file: %w", path, ErrNotImage)
	}
	return sc.data[:n], nil
}

// atFDCWD is AT_FDCWD (-100) as the system call takes it.
func atFDCWD() uintptr { d := -100; return uintptr(d) }
