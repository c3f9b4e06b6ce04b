//go:build !unix

package corpus

import "github.com/tensorbatch/tensorbatch/internal/regfile"

// openTokenFile opens the regular file at path for ReadAt: there is no
// mapping here. It returns the file's size when it was opened.
func openTokenFile(path string) (tokenFile, int64, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return readAtFile{f}, fi.Size(), nil
}
