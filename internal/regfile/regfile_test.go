package regfile_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// readers are the ways to read a whole file, each returning its bytes.
var readers = map[string]func(path string, limit int64) ([]byte, error){
	"ReadFile": regfile.ReadFile,
	"Buffer.Read": func(path string, limit int64) ([]byte, error) {
		var b regfile.Buffer
		return b.Read(path, limit)
	},
}

// ways are every way to open a file, each reading it whole through
// the file it ways, without a bound.
var ways = map[string]func(path string) ([]byte, error){
	"ReadFile":    func(path string) ([]byte, error) { return regfile.ReadFile(path, 0) },
	"Buffer.Read": func(path string) ([]byte, error) { return readers["Buffer.Read"](path, 0) },
	"Open": func(path string) ([]byte, error) {
		f, err := regfile.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		b := make([]byte, fi.Size())
		_, err = f.ReadAt(b, 0)
		return b, err
	},
	"Map": func(path string) ([]byte, error) {
		m, err := regfile.Map(path)
		if err != nil {
			return nil, err
		}
		defer m.Close()
		b := make([]byte, m.Size)
		if m.Data != nil {
			copy(b, m.Data)
			return b, nil
		}
		_, err = m.File.ReadAt(b, 0)
		return b, err
	},
}

func write(t *testing.T, name string, data []byte) string {
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

// A regular file reads whole by every way; an empty one is empty, not
// an error.
func TestRegularFiles(t *testing.T) {
	t.Parallel()
	data := []byte("0123456789abcdef")
	p := write(t, "a.bin", data)
	empty := write(t, "empty.bin", nil)
	for name, open := range ways {
		got, err := open(p)
		require.NoError(t, err, name)
		assert.Equal(t, data, got, name)
		got, err = open(empty)
		require.NoError(t, err, name)
		assert.Empty(t, got, name)
	}
	m, err := regfile.Map(p)
	require.NoError(t, err)
	assert.EqualValues(t, len(data), m.Size)
	if runtime.GOOS != "windows" {
		assert.Equal(t, data, m.Data, "mapped")
	}
	require.NoError(t, m.Close())
	m, err = regfile.Map(empty)
	require.NoError(t, err)
	assert.Nil(t, m.Data, "an empty file is not mapped")
	require.NoError(t, m.Close())
}

// A directory is refused by every way, naming it.
func TestDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, open := range ways {
		_, err := open(dir)
		assert.ErrorIs(t, err, regfile.ErrNotRegular, name)
		assert.ErrorContains(t, err, dir, name)
		assert.ErrorContains(t, err, "a directory", name)
	}
}

// A missing file is the system's error, naming the path.
func TestMissingFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "none")
	for name, open := range ways {
		_, err := open(p)
		assert.ErrorIs(t, err, fs.ErrNotExist, name)
		assert.ErrorContains(t, err, p, name)
	}
}

// A path with a NUL byte is an error (fs.ErrInvalid) quoting it, not
// the file before the NUL.
func TestPathWithNUL(t *testing.T) {
	t.Parallel()
	p := write(t, "a.bin", []byte("a"))
	for name, open := range ways {
		for _, bad := range []string{p + "\x00", p + "\x00.png", "\x00" + p} {
			_, err := open(bad)
			assert.ErrorIs(t, err, fs.ErrInvalid, "%s %q", name, bad)
			assert.ErrorContains(t, err, strconv.Quote(bad), name)
			assert.ErrorContains(t, err, "NUL", name)
		}
	}
}

// A file over the bound is refused from its size, before anything is
// allocated (a sparse file of 1 TiB), naming it and the bound; one at
// the bound reads.
func TestFileOverTheBound(t *testing.T) {
	p := write(t, "a.bin", make([]byte, 100))
	big := write(t, "big.bin", nil)
	require.NoError(t, os.Truncate(big, 1<<40)) // sparse
	for name, read := range readers {
		_, err := read(p, 99)
		assert.ErrorIs(t, err, regfile.ErrTooLarge, name)
		assert.ErrorContains(t, err, p, name)
		assert.ErrorContains(t, err, "100 bytes or more, the limit is 99", name)
		got, err := read(p, 100)
		require.NoError(t, err, name)
		assert.Len(t, got, 100, name)

		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		_, err = read(big, 1<<30)
		assert.ErrorIs(t, err, regfile.ErrTooLarge, name)
		assert.ErrorContains(t, err, "the limit is 1073741824", name)
		runtime.ReadMemStats(&ms)
		assert.Less(t, ms.TotalAlloc-before, uint64(1<<20), "%s: allocated before refusing", name)
	}
}

// A Buffer reuses its memory: a second read of a file no larger
// allocates nothing where it reads with raw system calls (Linux).
func TestBufferReuse(t *testing.T) {
	a := write(t, "a.bin", []byte("first file"))
	b := write(t, "b.bin", []byte("second"))
	var buf regfile.Buffer
	got, err := buf.Read(a, 0)
	require.NoError(t, err)
	assert.Equal(t, "first file", string(got))
	got, err = buf.Read(b, 0)
	require.NoError(t, err)
	assert.Equal(t, "second", string(got))
	if runtime.GOOS != "linux" {
		return
	}
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := buf.Read(a, 0); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}
