package regfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes data as the file at path, whole or not at all: into
// a new temporary file of a random name beside it (created exclusively,
// so no FIFO, link or file already there is opened), then renamed over
// path, which replaces whatever path names (a link is replaced, not
// followed). perm is the file's mode.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
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
