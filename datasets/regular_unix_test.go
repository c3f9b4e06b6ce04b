//go:build unix

package datasets_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tensorbatch/tensorbatch/datasets"
)

// A split's file that is a FIFO or a link to /dev/zero is refused,
// naming it, without blocking and without filling the memory.
func TestOnlyRegularFilesAreRead(t *testing.T) {
	for _, kind := range []string{"fifo", "zero"} {
		mnist := tiny(t, 3, false)
		images := filepath.Join(mnist, "train-images-idx3-ubyte")
		dir := t.TempDir()
		cifar(t, dir, "test_batch.bin", 0, 4)
		batch := filepath.Join(dir, "test_batch.bin")
		for _, p := range []string{images, batch} {
			require.NoError(t, os.Remove(p))
			if kind == "fifo" {
				require.NoError(t, unix.Mkfifo(p, 0o644))
			} else {
				require.NoError(t, os.Symlink("/dev/zero", p))
			}
		}
		for name, tc := range map[string]struct {
			path string
			read func() error
		}{
			"MNIST":   {images, func() error { _, err := datasets.MNIST(mnist, "train", 0); return err }},
			"CIFAR10": {batch, func() error { _, err := datasets.CIFAR10(dir, false, 0); return err }},
		} {
			done := make(chan error, 1)
			go func() { done <- tc.read() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Errorf("%s %s: blocks", name, kind)
				if w, err := os.OpenFile(tc.path, os.O_RDWR, 0); err == nil { // O_RDWR: opens without a reader
					w.Close()
				}
				err = <-done
			}
			assert.ErrorIs(t, err, datasets.ErrNotRegular, "%s %s", name, kind)
			assert.ErrorContains(t, err, tc.path, "%s %s", name, kind)
		}
	}
}
