//go:build !unix

package shards

import "os"

// openTokenFile opens the file for ReadAt: there is no mapping here.
func openTokenFile(path string, _ int64) (tokenFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return readAtFile{f}, nil
}
