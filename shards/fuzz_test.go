package shards

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// totalAlloc returns the bytes allocated so far, without a GC: cheap
// enough for a fuzz iteration.
func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// FuzzTar reads untrusted bytes as a tar shard, with the member limit
// raised as far as it goes. It must not panic; what it allocates is
// bounded by the bytes there are (not by the sizes headers declare); the
// records hold no more bytes than the input; every error names the
// shard; Count agrees with Next.
func FuzzTar(f *testing.F) {
	f.Add(tarBytes(f, sampleMembers(0)...))
	f.Add(tarBytes(f, append(sampleMembers(1), sampleMembers(2)...)...))
	f.Add(hugeMember(f, "a.bin", 1<<40, 4<<10))
	f.Add(hugeMember(f, "k.jpg", 1<<62, 100))
	f.Add(tarBytes(f, tarMember{name: "a.jpg"}, tarMember{name: "a.JPG"}))
	f.Add(tarBytes(f, sampleMembers(3)...)[:1500])
	f.Add(sparseTar(f, 1<<40))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		before := totalAlloc()
		r := NewTarReader("mem.tar", io.NopCloser(bytes.NewReader(data)), 1<<62)
		held, recs := 0, 0
		var err error
		for {
			var rec engine.Record
			rec, err = r.Next(context.Background())
			if err != nil {
				break
			}
			recs++
			held += rec.Size()
			assert.Equal(t, "mem.tar", rec.Shard)
		}
		r.Close()
		allocated := totalAlloc() - before
		assert.LessOrEqual(t, held, len(data), "records hold bytes the input has")
		assert.Less(t, allocated, uint64(4<<20+16*len(data)), "allocation bounded by the input's %d bytes", len(data))
		if err != io.EOF {
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "shards: mem.tar: "), err.Error())
		}
		c := NewTarReader("mem.tar", io.NopCloser(bytes.NewReader(data)), 1<<62)
		n, cerr := c.Count(context.Background())
		c.Close()
		if err == io.EOF && cerr == nil {
			assert.Equal(t, recs, n, "Count and Next agree")
		}
		if cerr != nil {
			assert.True(t, strings.HasPrefix(cerr.Error(), "shards: mem.tar: "), cerr.Error())
		}
	})
}

// FuzzShardList reads untrusted bytes as the shard list of a real 3-sample
// shard. It must not panic; a count it accepts is one the shard's bytes
// can hold; what it allocates is bounded by the list's bytes; errors are
// errors of this package.
func FuzzShardList(f *testing.F) {
	dir := f.TempDir()
	paths, _ := writeShards(f, dir, 3)
	fi, err := os.Stat(paths[0])
	require.NoError(f, err)
	index := filepath.Join(dir, "shardlist.json")
	for _, s := range []string{
		`{"__kind__":"wids-shard-index-v1","wids_version":1,"shardlist":[{"url":"train-0000.tar","nsamples":3}]}`,
		`{"shardlist":[{"url":"train-0000.tar","nsamples":4294967296}]}`,
		`{"shardlist":[{"url":"train-0000.tar","nsamples":-1}]}`,
		`{"shardlist":[{"url":"train-0000.tar","nsamples":9223372036854775807},{"url":"train-0000.tar","nsamples":1}]}`,
		`{"shardlist":[{"url":"train-0000.tar","nsamples":0}]}`,
		`{"shardlist":[{"url":"./train-0000.tar","nsamples":1e30}]}`,
		`{"shardlist":[{"url":"` + paths[0] + `","nsamples":2}]}`,
		`{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		require.NoError(t, os.WriteFile(index, data, 0o644))
		src, err := FromNames(paths, testSchema, decodeTest, IndexFile(index))
		require.NoError(t, err)
		before := totalAlloc()
		infos, err := src.Shards(context.Background())
		allocated := totalAlloc() - before
		assert.Less(t, allocated, uint64(1<<20+64*len(data)), "allocation bounded by the list's %d bytes", len(data))
		if err != nil {
			assert.True(t, strings.HasPrefix(err.Error(), "shards: "), err.Error())
			return
		}
		require.Len(t, infos, 1)
		assert.GreaterOrEqual(t, infos[0].Samples, 0)
		assert.LessOrEqual(t, int64(infos[0].Samples), fi.Size()/minSampleBytes, "a count the shard's bytes can hold")
	})
}

// FuzzExpand expands untrusted brace patterns. It must not panic; an
// accepted pattern stands for at most maxExpand names of maxExpandBytes
// in all, as many as it counted, and a rejected one allocates next to
// nothing; errors name the pattern.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{
		"train-{0000..0003}.tar", "{a,b}-{0..1}.tar", "{a,b{1..2}}.tar", "part-{0..10..5}-{a..c}",
		"{-05..05}", "{10..1..-4}", "{Y..b}", "{a,,b}", "a{0..3", "a}", "{}", "{x}",
		strings.Repeat("{a,b,c,d}", 12), strings.Repeat("{{a,b},{c,d}}", 12), strings.Repeat("{a,b}", 70),
		"{" + strings.Repeat("{0..4000000},", 5) + "z}", strings.Repeat("p", 1300) + "{0..4000000}",
		"{-9223372036854775808..-9223372036854775807}", "{0..99999999999999999999}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		p, err := parsePattern(pattern, 0)
		if err == nil {
			err = p.check()
		}
		if err == nil {
			if n, b := p.size(); n > 1<<16 || b > 1<<22 {
				return // valid, but too big to expand at fuzzing speed
			}
		}
		before := totalAlloc()
		names, err := Expand(pattern)
		allocated := totalAlloc() - before
		if err != nil {
			assert.True(t, strings.HasPrefix(err.Error(), "shards: pattern "), err.Error())
			assert.Less(t, allocated, uint64(1<<20+64*len(pattern)), "a rejected pattern allocates next to nothing")
			return
		}
		n, b := p.size()
		require.EqualValues(t, n, len(names), "as many names as counted")
		total := 0
		for _, s := range names {
			total += len(s)
		}
		assert.EqualValues(t, b, total, "as many bytes as counted")
		if !strings.ContainsAny(pattern, "{}") {
			assert.Equal(t, []string{pattern}, names)
		}
	})
}
