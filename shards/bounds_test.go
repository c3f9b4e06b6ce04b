package shards

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allocated returns the bytes f allocates (runtime.MemStats.TotalAlloc),
// so that a test can assert that a declared size allocated nothing
// without running the machine out of memory.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// hugeMember returns a tar whose member name declares size bytes, of
// which the tar holds the first have, followed by nothing (no padding,
// no end blocks).
func hugeMember(t testing.TB, name string, size int64, have int) []byte {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	require.NoError(t, w.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}))
	buf.Write(bytes.Repeat([]byte{'x'}, have))
	return buf.Bytes()
}

// TestTarDeclaredSizesAllocateNothing: a member header's size bounds
// nothing: a 5 KB tar that declares 1 TiB (or 1 GiB, or 100 MiB) costs
// the bytes it holds, whatever limit the caller raised, and is an error
// naming the shard and the member.
func TestTarDeclaredSizesAllocateNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int64
		limit int64
	}{
		{"a.bin", 1 << 40, 1 << 42},
		{"k.jpg", 1 << 30, 0}, // the default limit
		{"x.y.z", 100 << 20, 1 << 42},
		{"s.cls", 1<<40 + 1, 1 << 62},
	} {
		data := hugeMember(t, tc.name, tc.size, 4<<10)
		var err error
		n := allocated(func() {
			r := NewTarReader("big.tar", io.NopCloser(bytes.NewReader(data)), tc.limit)
			_, err = r.Next(context.Background())
			r.Close()
		})
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), `big.tar: member "`+tc.name+`": truncated`)
		assert.Less(t, n, uint64(4<<20), "%s: bytes allocated for a %d-byte tar declaring %d", tc.name, len(data), tc.size)
	}
}
