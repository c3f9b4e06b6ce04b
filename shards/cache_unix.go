//go:build unix

package shards

import (
	"errors"
	"os"
	"syscall"
)

// fileLock is an flock(2) lock on a shard's lock file, which serializes
// its download and eviction across the processes of a node.
type fileLock struct{ f *os.File }

func openLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &fileLock{f}, nil
}

// try takes the lock, shared or exclusive, if no other holder prevents it;
// a lock taken already is converted. A file system without flock counts
// as taken: the cache then works within a process only.
func (l *fileLock) try(exclusive bool) bool {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(l.f.Fd()), how|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return !errors.Is(err, syscall.EWOULDBLOCK)
		}
	}
}

func (l *fileLock) unlock() { syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN) }

// close releases the lock.
func (l *fileLock) close() { l.f.Close() }
