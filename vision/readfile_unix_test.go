//go:build linux || darwin

package vision_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/vision"
)

// decodeSoon decodes path, failing the test where it blocks: a writer is
// then opened on the FIFO p (if any) to let it go.
func decodeSoon(t *testing.T, ds *vision.Dataset, path, fifo string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- ds.Decode(path, nil, make([]byte, 3*32*32*4)) }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Errorf("Decode(%s) blocks", path)
		if fifo != "" {
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				w.Close()
			}
		}
		return <-done
	}
}

// Only regular files are read: a FIFO, a device (or a link to one) and a
// directory are refused before any byte is read, with an error naming
// the path; a FIFO does not block, /dev/zero does not fill the memory.
func TestOnlyRegularFilesAreRead(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jpg")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "zero.jpg")))
	require.NoError(t, os.Symlink("/dev/null", filepath.Join(dir, "null.jpg")))
	require.NoError(t, os.Symlink(fifo, filepath.Join(dir, "fifo_link.jpg")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "dir.jpg"), 0o755))
	ds, err := vision.New(nil, nil, vision.Eval(32))
	require.NoError(t, err)
	defer ds.Close()
	for name, what := range map[string]string{
		"fifo.jpg": "FIFO", "fifo_link.jpg": "FIFO", "zero.jpg": "character device", "null.jpg": "character device", "dir.jpg": "directory",
	} {
		p := filepath.Join(dir, name)
		err := decodeSoon(t, ds, p, fifo)
		assert.ErrorIs(t, err, vision.ErrNotRegular, name)
		assert.ErrorContains(t, err, p)
		assert.ErrorContains(t, err, what)
	}
}

// The same through the datasets: a FIFO in an ImageFolder class and a
// directory in a FileList fail their samples, naming the path.
func TestNonRegularFilesFailTheirSamples(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, "a/0.jpg", "rgb420.jpg")
	fifo := filepath.Join(root, "a", "1.jpg")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	other := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(other, "d.jpg"), 0o755))
	list := filepath.Join(other, "list.txt")
	require.NoError(t, os.WriteFile(list, []byte(filepath.Join(root, "a/0.jpg")+" 0\nd.jpg 1\n"), 0o644))
	folder, err := vision.ImageFolder(root, vision.Eval(32))
	require.NoError(t, err)
	defer folder.Close()
	files, err := vision.FileList(list, vision.Eval(32))
	require.NoError(t, err)
	defer files.Close()
	for _, tc := range []struct {
		ds   *vision.Dataset
		bad  map[int]string
		name string
	}{
		{folder, map[int]string{1: fifo}, "ImageFolder"},
		{files, map[int]string{1: filepath.Join(other, "d.jpg")}, "FileList"},
	} {
		l, err := engine.New(tc.ds, engine.Config{BatchSize: 1, Workers: 1})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		failed := map[int]string{}
		for _, err := range l.Epoch(ctx, 0) {
			if err == nil {
				continue
			}
			var se *engine.SampleError
			require.ErrorAs(t, err, &se, tc.name)
			assert.ErrorIs(t, err, vision.ErrNotRegular, tc.name)
			failed[se.Index] = err.Error()
		}
		cancel()
		require.NoError(t, l.Close())
		require.Len(t, failed, len(tc.bad), tc.name)
		for i, p := range tc.bad {
			assert.Contains(t, failed[i], p, tc.name)
		}
	}
}

// A file over the byte limit is refused from its size, naming it and the
// limit; the default refuses a 65 MiB file without reading it; a file
// that reports no size (/proc) is read only up to the limit.
func TestFileByteLimit(t *testing.T) {
	p := filepath.Join(testdata, "rgb420.jpg")
	small, err := vision.New(nil, nil, vision.Eval(32), vision.MaxFileBytes(1000))
	require.NoError(t, err)
	defer small.Close()
	err = decodeSoon(t, small, p, "")
	assert.ErrorIs(t, err, vision.ErrFileTooLarge)
	assert.ErrorContains(t, err, p)
	assert.ErrorContains(t, err, "limit is 1000")

	big := filepath.Join(t.TempDir(), "big.jpg")
	require.NoError(t, os.WriteFile(big, jpegHeader(64, 64), 0o644))
	require.NoError(t, os.Truncate(big, vision.DefaultMaxFileBytes+1)) // sparse
	def, err := vision.New(nil, nil, vision.Eval(32))
	require.NoError(t, err)
	defer def.Close()
	err = decodeSoon(t, def, big, "")
	assert.ErrorIs(t, err, vision.ErrFileTooLarge)
	assert.ErrorContains(t, err, big)
	assert.ErrorContains(t, err, "limit is "+strconv.Itoa(vision.DefaultMaxFileBytes))

	none, err := vision.New(nil, nil, vision.Eval(32), vision.MaxFileBytes(0))
	require.NoError(t, err)
	defer none.Close()
	assert.NoError(t, decodeSoon(t, none, p, ""), "0 means no limit")
	_, err = vision.New(nil, nil, vision.Eval(32), vision.MaxFileBytes(-1))
	assert.ErrorContains(t, err, "MaxFileBytes(-1)")

	if _, err := os.Stat("/proc/self/status"); err == nil {
		tiny, err := vision.New(nil, nil, vision.Eval(32), vision.MaxFileBytes(10))
		require.NoError(t, err)
		defer tiny.Close()
		err = decodeSoon(t, tiny, "/proc/self/status", "")
		assert.ErrorIs(t, err, vision.ErrFileTooLarge)
	}
}

// A path with a NUL byte is an error, not the file before the NUL.
func TestPathWithNUL(t *testing.T) {
	ds, err := vision.New(nil, nil, vision.Eval(32))
	require.NoError(t, err)
	defer ds.Close()
	p := filepath.Join(testdata, "rgb420.jpg")
	for _, bad := range []string{p + "\x00", p + "\x00.png", "\x00" + p} {
		err := decodeSoon(t, ds, bad, "")
		assert.ErrorIs(t, err, fs.ErrInvalid, "%q", bad)
		assert.ErrorContains(t, err, strconv.Quote(bad))
		assert.ErrorContains(t, err, "NUL")
	}
}

// A file list that is a FIFO or a link to /dev/zero is refused, naming
// it, without blocking and without filling the memory.
func TestFileListNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "list.txt")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	zero := filepath.Join(dir, "zero.txt")
	require.NoError(t, os.Symlink("/dev/zero", zero))
	for _, p := range []string{fifo, zero} {
		done := make(chan error, 1)
		go func() { _, err := vision.FileList(p, vision.Eval(32)); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("FileList(%s) blocks", p)
			if w, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil { // O_RDWR: opens without a reader
				w.Close()
			}
			err = <-done
		}
		assert.ErrorIs(t, err, vision.ErrNotRegular, p)
		assert.ErrorContains(t, err, p)
	}
}

// Links that fork at every level (d_i/a and d_i/b both to d_{i+1}) reach
// the deepest folder 2^levels times, each path listing its images again
// as os.walk does: the walk stops with an error naming the folder, at
// once, instead of running for ever.
func TestImageFolderLinksThatForkAtEveryLevel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const levels = 30
	for i := range levels {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "pool", strconv.Itoa(i)), 0o755))
	}
	for i := range levels - 1 {
		next := filepath.Join(dir, "pool", strconv.Itoa(i+1))
		require.NoError(t, os.Symlink(next, filepath.Join(dir, "pool", strconv.Itoa(i), "a")))
		require.NoError(t, os.Symlink(next, filepath.Join(dir, "pool", strconv.Itoa(i), "b")))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(dir, "pool", "0"), filepath.Join(dir, "data", "cls")))
	done := make(chan error, 1)
	go func() {
		_, err := vision.ImageFolder(filepath.Join(dir, "data"), vision.Eval(32))
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.ErrorContains(t, err, "reached by more than 1000 paths through links")
	case <-time.After(30 * time.Second):
		t.Fatal("the walk does not end")
	}
}
