package regfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// WriteFile writes data as the file at path, whole or not at all: into
// a new temporary file of a random name beside it (created exclusively,
// with perm under the process's umask, so no FIFO, link or file already
// there is opened), synced, then renamed over path, which replaces
// whatever path names (a link is replaced, not followed).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	var f *os.File
	var tmp string
	var err error
	for range 100 {
		tmp = filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+strconv.FormatUint(rand.Uint64(), 36)+".tmp")
		if f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm); !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Check reports, without opening it, whether path names a regular file
// (following links): for a file that another library opens by name (a
// credentials file, a shared library), whose open would block on a FIFO.
// A missing file is fs.ErrNotExist; another kind wraps ErrNotRegular.
func Check(path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return notRegular(path, fi.Mode())
	}
	return nil
}
