package vision

import (
	"io/fs"
	"syscall"
	"unsafe"
)

// read reads the regular file at path, at most limit bytes (0: no
// limit), into the scratch buffer with raw system calls: no allocation
// once the buffer is large enough. It opens without blocking (a FIFO
// would wait for a writer) and refuses anything but a regular file
// before reading a byte.
func (sc *scratch) read(path string, limit int64) ([]byte, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	sc.path = append(append(sc.path[:0], path...), 0)
	fd, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, atFDCWD(), uintptr(unsafe.Pointer(&sc.path[0])),
		uintptr(syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOCTTY), 0, 0, 0)
	if errno != 0 {
		return nil, &fs.PathError{Op: "open", Path: path, Err: errno}
	}
	defer syscall.Close(int(fd))
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd), &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, notRegular(path, fs.FileMode(0), st.Mode&syscall.S_IFMT)
	}
	if err := checkSize(path, st.Size, limit); err != nil {
		return nil, err
	}
	size := int(st.Size)
	sc.data = grow(sc.data, size+1)
	n := 0
	for n < len(sc.data) {
		k, err := syscall.Read(int(fd), sc.data[n:])
		if err == syscall.EINTR || err == syscall.EAGAIN {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if k == 0 {
			break
		}
		n += k
		if n == size {
			break // all stat said: skip the read that would return 0
		}
		if n == len(sc.data) { // larger than stat said (growing, or /proc): keep reading, within the limit
			if err := checkSize(path, int64(n), limit); err != nil {
				return nil, err
			}
			sc.data = append(sc.data, make([]byte, len(sc.data))...)
		}
	}
	if err := checkSize(path, int64(n), limit); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, emptyFile(path)
	}
	return sc.data[:n], nil
}

// atFDCWD is AT_FDCWD (-100) as the system call takes it.
func atFDCWD() uintptr { d := -100; return uintptr(d) }
