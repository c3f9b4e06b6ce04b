package regfile

import (
	"io/fs"
	"syscall"
	"unsafe"
)

// Read reads the regular file at path into b, at most limit bytes (0:
// no limit), as ReadFile does, and returns its bytes: valid until the
// next Read. Here it reads with raw system calls, so that it allocates
// nothing once b is large enough.
func (b *Buffer) Read(path string, limit int64) ([]byte, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	b.path = append(append(b.path[:0], path...), 0)
	var fd uintptr
	for {
		var errno syscall.Errno
		fd, _, errno = syscall.Syscall6(syscall.SYS_OPENAT, atFDCWD(), uintptr(unsafe.Pointer(&b.path[0])),
			uintptr(syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOCTTY), 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return nil, openError(path, &fs.PathError{Op: "open", Path: path, Err: errno})
		}
		break
	}
	defer syscall.Close(int(fd))
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd), &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, notRegular(path, modeType(st.Mode))
	}
	var n int
	var err error
	b.data, n, err = fill(path, b.data, true, st.Size, limit, func(p []byte) (int, error) {
		for {
			// O_NONBLOCK stays set: a regular file's read does not
			// return EAGAIN, but were one to, it is retried.
			k, err := syscall.Read(int(fd), p)
			if err == syscall.EINTR || err == syscall.EAGAIN {
				continue
			}
			return max(k, 0), err
		}
	})
	if err != nil {
		return nil, err
	}
	return b.data[:n], nil
}

// atFDCWD is AT_FDCWD (-100) as the system call takes it.
func atFDCWD() uintptr { d := -100; return uintptr(d) }

// modeType is the fs.FileMode type of the stat mode m.
func modeType(m uint32) fs.FileMode {
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return fs.ModeDir
	case syscall.S_IFIFO:
		return fs.ModeNamedPipe
	case syscall.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		return fs.ModeDevice
	case syscall.S_IFSOCK:
		return fs.ModeSocket
	case syscall.S_IFLNK:
		return fs.ModeSymlink
	}
	return fs.ModeIrregular
}
