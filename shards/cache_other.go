//go:build !unix

package shards

import "os"

// fileLock is a shard's lock file. Without flock(2) (Windows) it locks
// nothing across processes: there, each process needs a cache folder of
// its own.
type fileLock struct{ f *os.File }

func openLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &fileLock{f}, nil
}

func (l *fileLock) try(exclusive bool) bool { return true }
func (l *fileLock) unlock()                 {}
func (l *fileLock) close()                  { l.f.Close() }
