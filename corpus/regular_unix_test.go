//go:build unix

package corpus

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tensorbatch/tensorbatch/collate"
)

// notRegular replaces the file at path by one of another kind: "fifo", a
// named pipe, or "zero", a symlink to /dev/zero. It returns what the
// error is to say.
func notRegular(t *testing.T, path, kind string) string {
	t.Helper()
	require.NoError(t, os.RemoveAll(path))
	switch kind {
	case "fifo":
		require.NoError(t, unix.Mkfifo(path, 0o644))
		return "a named pipe (FIFO)"
	case "zero":
		require.NoError(t, os.Symlink("/dev/zero", path))
		return "a character device"
	}
	t.Fatalf("unknown kind %q", kind)
	return ""
}

// soon returns what fn returns, failing the test where it blocks for 10
// s: it then opens each FIFO under dir for writing and closes it, which
// lets a reader blocked on one go on.
func soon(t *testing.T, dir string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Errorf("blocks on a FIFO")
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type()&os.ModeNamedPipe != 0 {
					if w, err := os.OpenFile(p, os.O_RDWR, 0); err == nil { // O_RDWR: opens without a reader
						w.Close()
					}
				}
				return nil
			})
		}
	}
}

// Defect 6 (issue 35): a Megatron .idx that is a FIFO hung Megatron; a
// symlink to /dev/zero ran out of memory. The .bin likewise. Each is
// refused, naming the file and what it is.
func TestMegatronFilesNotRegular(t *testing.T) {
	for _, ext := range []string{".idx", ".bin"} {
		for _, kind := range []string{"fifo", "zero"} {
			t.Run(ext+"/"+kind, func(t *testing.T) {
				prefix := megatronDocs(t, collate.Uint16, knownDocs())
				what := notRegular(t, prefix+ext, kind)
				err := soon(t, filepath.Dir(prefix), func() error {
					d, err := Megatron(prefix, MegatronConfig{SeqLength: 4})
					if err == nil {
						d.Close()
					}
					return err
				})
				assert.ErrorIs(t, err, ErrNotRegular)
				assert.ErrorContains(t, err, prefix+ext)
				assert.ErrorContains(t, err, what)
			})
		}
	}
}

// A token file is refused the same way.
func TestTokenFileNotRegular(t *testing.T) {
	for _, kind := range []string{"fifo", "zero"} {
		t.Run(kind, func(t *testing.T) {
			tokens, _ := writeTokens(t, 100, 2)
			what := notRegular(t, tokens, kind)
			err := soon(t, filepath.Dir(tokens), func() error {
				d, err := Tokens(tokens, TokenConfig{Context: 4})
				if err == nil {
					d.Close()
				}
				return err
			})
			assert.ErrorIs(t, err, ErrNotRegular)
			assert.ErrorContains(t, err, tokens)
			assert.ErrorContains(t, err, what)
		})
	}
}

// A .idx whose header's counts do not fill it is refused from its header
// and its size, before the rest is read: a sparse file of GBs with a
// valid header costs no memory.
func TestMegatronIndexSizeCheckedFirst(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "big")
	idx := make([]byte, 34)
	copy(idx, megatronMagic)
	binary.LittleEndian.PutUint64(idx[9:], 1)
	idx[17] = 8 // uint16
	binary.LittleEndian.PutUint64(idx[18:], 2)
	binary.LittleEndian.PutUint64(idx[26:], 3)
	require.NoError(t, os.WriteFile(prefix+".idx", idx, 0o644))
	require.NoError(t, os.Truncate(prefix+".idx", 3<<30)) // sparse: 3 GiB of zeros after the header
	require.NoError(t, os.WriteFile(prefix+".bin", make([]byte, 8), 0o644))
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadMegatronIndex(prefix)
	_, err2 := Megatron(prefix, MegatronConfig{SeqLength: 1})
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	for _, err := range []error{err, err2} {
		require.Error(t, err)
		assert.ErrorContains(t, err, "document count: 3: the file holds 3221225414 bytes after the sequences, want 24")
	}
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "nothing of the file's size allocated")
}
