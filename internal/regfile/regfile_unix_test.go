//go:build unix

package regfile_test

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// soon returns what open returns for path, failing the test where it
// blocks for 10 s: it then ways the FIFO fifo and closes it, which lets
// the open go on.
func soon(t *testing.T, open func(string) ([]byte, error), path, fifo string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := open(path); done <- err }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Errorf("%s blocks", path)
		if w, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil { // O_RDWR: ways without a reader
			w.Close()
		}
		return <-done
	}
}

// A FIFO, a device and a socket, and a link to each, are refused by
// every way to open a file, before a byte is read and without blocking,
// with an error naming the path and what it is; /dev/zero does not fill
// the memory.
func TestOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	for name, target := range map[string]string{"zero": "/dev/zero", "null": "/dev/null", "fifo_link": fifo} {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, name)))
	}
	cases := map[string]string{
		"fifo": "a named pipe (FIFO)", "fifo_link": "a named pipe (FIFO)",
		"zero": "a character device", "null": "a character device",
	}
	sock := filepath.Join(dir, "sock")
	if l, err := net.Listen("unix", sock); err == nil { // fails where the path is too long for a socket
		defer l.Close()
		require.NoError(t, os.Symlink(sock, filepath.Join(dir, "sock_link")))
		cases["sock"], cases["sock_link"] = "a socket", "a socket"
	} else {
		t.Logf("no socket: %v", err)
	}
	for name, what := range cases {
		p := filepath.Join(dir, name)
		for way, open := range ways {
			err := soon(t, open, p, fifo)
			assert.ErrorIs(t, err, regfile.ErrNotRegular, "%s %s", way, name)
			assert.ErrorContains(t, err, p, "%s %s", way, name)
			assert.ErrorContains(t, err, what, "%s %s", way, name)
		}
	}
}

// A file that says 0 bytes and has more (a file of /proc) is read to
// its end, within the bound.
func TestProcFile(t *testing.T) {
	t.Parallel()
	const p = "/proc/self/status"
	fi, err := os.Stat(p)
	if err != nil || fi.Size() != 0 {
		t.Skip("no /proc/self/status of size 0")
	}
	for name, read := range readers {
		got, err := read(p, 0)
		require.NoError(t, err, name)
		assert.Contains(t, string(got), "Pid:", name)
		_, err = read(p, 10)
		assert.ErrorIs(t, err, regfile.ErrTooLarge, name)
	}
}

// WriteFile replaces what its path names, a FIFO (which an open would
// block on) or a link (which an open would follow), leaving the link's
// target and nothing else behind.
func TestWriteFileReplacesAFIFOOrALink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, []byte("keep"), 0o644))
	link := filepath.Join(dir, "link.json")
	require.NoError(t, os.Symlink(target, link))
	for _, path := range []string{fifo, link, filepath.Join(dir, "new.json")} {
		require.NoError(t, regfile.WriteFile(path, []byte("{}\n"), 0o640))
		fi, err := os.Lstat(path)
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "%s is a regular file now", path)
		assert.Zero(t, fi.Mode().Perm()&^0o640, "no more than perm (under the umask)")
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm()&0o600)
		data, err := regfile.ReadFile(path, 0)
		require.NoError(t, err)
		assert.Equal(t, "{}\n", string(data))
	}
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(data), "the link's target is untouched")
	names, err := filepath.Glob(filepath.Join(dir, "*.tmp"))
	require.NoError(t, err)
	assert.Empty(t, names, "no temporary file is left")
	assert.Error(t, regfile.WriteFile(filepath.Join(dir, "no", "such", "dir.json"), nil, 0o644))
}
