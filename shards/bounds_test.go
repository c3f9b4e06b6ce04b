package shards

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
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

// paxRecord is one record of a PAX extended header.
func paxRecord(k, v string) string {
	s := " " + k + "=" + v + "\n"
	size := len(s) + len(fmt.Sprint(len(s)))
	if len(fmt.Sprint(size)) != len(fmt.Sprint(len(s))) {
		size++
	}
	return fmt.Sprint(size) + s
}

// sparseTar returns a tar of one PAX sparse member a.bin (GNU format
// 1.0) of real bytes, all of them a hole but the last 10: archive/tar
// reads the hole as zeros that the 3.5 KB tar does not hold.
func sparseTar(t testing.TB, real int64) []byte {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	recs := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", "a.bin") + paxRecord("GNU.sparse.realsize", fmt.Sprint(real))
	// tar.Writer drops GNU.sparse records: write them as a file, then
	// make its header a PAX one ('x').
	require.NoError(t, w.WriteHeader(&tar.Header{Name: "PaxHeaders/a.bin", Mode: 0o644, Size: int64(len(recs)), Typeflag: tar.TypeReg}))
	_, err := w.Write([]byte(recs))
	require.NoError(t, err)
	sparseMap := make([]byte, 512)
	copy(sparseMap, fmt.Sprintf("1\n%d\n10\n", real-10))
	data := append(sparseMap, "0123456789"...)
	require.NoError(t, w.WriteHeader(&tar.Header{Name: "a.bin", Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}))
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	b := buf.Bytes()
	b[156] = tar.TypeXHeader
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b[:512] {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// TestTarSparseHolesAllocateNothing: a PAX sparse member, whose holes
// archive/tar reads as zeros no input holds, is an error naming it, for
// Next and Count, whatever the limit.
func TestTarSparseHolesAllocateNothing(t *testing.T) {
	for _, real := range []int64{1 << 40, 1 << 30, 100} {
		data := sparseTar(t, real)
		var err, cerr error
		n := allocated(func() {
			r := NewTarReader("sparse.tar", io.NopCloser(bytes.NewReader(data)), 1<<42)
			_, err = r.Next(context.Background())
			r.Close()
			c := NewTarReader("sparse.tar", io.NopCloser(bytes.NewReader(data)), 1<<42)
			_, cerr = c.Count(context.Background())
			c.Close()
		})
		for _, err := range []error{err, cerr} {
			require.Error(t, err, real)
			assert.Contains(t, err.Error(), `sparse.tar: member "a.bin" is a sparse file`)
		}
		assert.Less(t, n, uint64(4<<20), "bytes allocated for a %d-byte tar of a %d-byte sparse member", len(data), real)
	}
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

// TestExpandCountsBeforeExpanding: a short pattern that stands for
// millions of names (products of lists, nested lists, ranges, lists of
// ranges, long names) is an error before a name is made.
func TestExpandCountsBeforeExpanding(t *testing.T) {
	long := strings.Repeat("p", 1300)
	for _, tc := range []struct {
		name, pattern, want string
	}{
		{"product of lists", long + strings.Repeat("{a,b,c,d}", 12), "more than 4194304 names"},
		{"nested lists", long + strings.Repeat("{{a,b},{c,d}}", 12), "more than 4194304 names"},
		{"product of ranges", long + strings.Repeat("{0..3}", 12), "more than 4194304 names"},
		{"deep nesting", strings.Repeat("{x,", 200) + "y" + strings.Repeat("}{a,b}", 200), "more than 4194304 names"},
		{"overflowing product", strings.Repeat("{a,b}", 200), "more than 4194304 names"},
		{"list of ranges", "{" + strings.Repeat("{0..4000000},", 50) + "z}", "more than 4194304 names"},
		{"long names", long + "{0..4000000}", "more than 268435456 bytes of names"},
		{"long alternatives", "{" + long + "," + long + "}{0..999999}", "more than 268435456 bytes of names"},
	} {
		var err error
		n := allocated(func() { _, err = Expand(tc.pattern) })
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
		assert.Less(t, n, uint64(1<<20), "%s: bytes allocated for a %d-byte pattern", tc.name, len(tc.pattern))
	}
	// Up to the limits, names are made.
	names, err := Expand("shard-{000000..999999}.tar")
	require.NoError(t, err)
	assert.Len(t, names, 1000000)
	assert.Equal(t, "shard-999999.tar", names[999999])
}
