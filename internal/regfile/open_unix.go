//go:build unix

package regfile

import (
	"errors"
	"os"
	"syscall"
)

// openFlags open without blocking (a FIFO would wait for a writer) and
// without making a terminal the controlling one.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// blocking clears O_NONBLOCK on the regular file f, so that its reads
// block as a regular file's do on every file system.
func blocking(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fcntl", Path: f.Name(), Err: serr}
	}
	return nil
}

// openError is the error of a failed open of path: the system's, or,
// where the open failed because of what path is (a socket fails ENXIO,
// or EOPNOTSUPP on some systems), the error saying what it is, from a
// stat made for the message alone.
func openError(path string, err error) error {
	if errors.Is(err, syscall.ENXIO) || errors.Is(err, syscall.EOPNOTSUPP) {
		if fi, serr := os.Stat(path); serr == nil && !fi.Mode().IsRegular() {
			return notRegular(path, fi.Mode())
		}
	}
	return err
}
