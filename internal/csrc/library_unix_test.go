//go:build cgo && unix

package csrc_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

// A library named by a path that is a FIFO, a device or a folder
// ($TENSORBATCH_CUDA_LIB, $TENSORBATCH_JPEG_LIB) is refused at once by
// tb_dl_open, which every load goes through, naming what it is: dlopen
// would block on the FIFO forever.
func TestLibraryPathNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "libfifo.so")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	for _, path := range []string{fifo, "/dev/zero", dir} {
		for name, open := range map[string]func(string) error{
			"runtime": func(p string) error { _, err := csrc.Open(csrc.CUDA, p); return err },
			"jpeg":    func(p string) error { _, err := csrc.OpenJPEG(p); return err },
			"encoder": func(p string) error { _, err := csrc.OpenJPEGEncoder(p); return err },
		} {
			done := make(chan error, 1)
			go func() { done <- open(path) }()
			select {
			case err := <-done:
				require.Error(t, err, "%s %s", name, path)
				assert.ErrorContains(t, err, "not a regular file", "%s %s", name, path)
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: opening %s blocks", name, path)
			}
		}
	}
}
