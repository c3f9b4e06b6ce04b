package shards

import (
	"bytes"
	"context"
	"encoding/binary"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
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
//
// Run it with minimizing bounded, as make fuzz does (-fuzzminimizetime):
// go test minimizes each input that reaches new code for up to 60 s by
// default, in runs of the target quadratic in the input's size, and a
// tar is KBs, so a run spends its budget minimizing its first finds.
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

// FuzzParquetFooter reads untrusted bytes as a Parquet footer. It must
// not panic; a footer that walkFooter accepts decodes (as parquet-go
// decodes it) within the allocation the walk bounded it to, and into a
// schema within maxSchemaElements.
func FuzzParquetFooter(f *testing.F) {
	p := filepath.Join(f.TempDir(), "a.parquet")
	writeParquet(f, p, hfRows(0, 5), 2)
	data, err := os.ReadFile(p)
	require.NoError(f, err)
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	f.Add(data[len(data)-8-n : len(data)-8])
	f.Add(marshalThrift(f, &format.FileMetaData{Version: 1, Schema: nestedSchema(3)}))
	var c compactWriter
	c.rootOnly()
	c.field(1, tcList)
	c.list(2, tcStruct)
	c.field(1, tcList)
	c.list(3, tcStruct)
	c.b = append(c.b, 0, 0, 0, 0, 0)
	f.Add(c.b)
	f.Add([]byte{})
	decode := func(footer []byte) (*format.FileMetaData, error) {
		md := new(format.FileMetaData)
		return md, thrift.Unmarshal(new(thrift.CompactProtocol), footer, md)
	}
	decode(data[len(data)-8-n : len(data)-8]) // parquet-go's decoders, built once
	f.Fuzz(func(t *testing.T, footer []byte) {
		bound, err := walkFooter(footer)
		if err != nil {
			assert.True(t, strings.HasPrefix(err.Error(), "Parquet footer: ") || strings.HasPrefix(err.Error(), "decoding its Parquet footer") ||
				strings.HasPrefix(err.Error(), "row group "), err.Error())
			return
		}
		before := totalAlloc()
		md, err := decode(footer)
		allocated := totalAlloc() - before
		assert.LessOrEqual(t, allocated, uint64(bound)+64<<10, "decoding allocates within the walk's bound")
		if err == nil {
			assert.LessOrEqual(t, len(md.Schema), maxSchemaElements)
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

// readCounter is a shard's reader that hands out at most 512 bytes a
// Read, and counts the Reads and the bytes.
type readCounter struct {
	r            io.Reader
	reads, bytes int
}

func (c *readCounter) Read(p []byte) (int, error) {
	c.reads++
	n, err := c.r.Read(p[:min(len(p), 512)])
	c.bytes += n
	return n, err
}

// fuzzInput returns the []byte value of a file of a fuzz corpus
// (testdata/fuzz/FuzzX/ID, "go test fuzz v1").
func fuzzInput(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	head, v, ok := strings.Cut(string(b), "\n")
	require.True(t, ok && head == "go test fuzz v1", path)
	v, ok = strings.CutPrefix(strings.TrimSpace(v), "[]byte(")
	require.True(t, ok, path)
	s, err := strconv.Unquote(strings.TrimSuffix(v, ")"))
	require.NoError(t, err, path)
	return []byte(s)
}

// TestTarWorkIsBoundedByItsBytes reads the inputs of FuzzTar's corpus
// (testdata/fuzz/FuzzTar, among them the input go test -fuzz stalled
// minimizing) and shards that declare sizes they do not hold: Next and
// Count each read no byte twice, in Reads bounded by the bytes there
// are (a loop over a declared size would make more), and end with the
// error the input calls for.
func TestTarWorkIsBoundedByItsBytes(t *testing.T) {
	t.Parallel()
	inputs := map[string][]byte{
		"a member of 1 TiB, 4 KB there": hugeMember(t, "a.bin", 1<<40, 4<<10),
		"a member of 2⁶² bytes":         hugeMember(t, "k.jpg", 1<<62, 100),
		"a sparse member of 1 TiB":      sparseTar(t, 1<<40),
	}
	corpus, err := filepath.Glob("testdata/fuzz/FuzzTar/*")
	require.NoError(t, err)
	require.NotEmpty(t, corpus)
	for _, p := range corpus {
		inputs[p] = fuzzInput(t, p)
	}
	want := map[string][2]string{ // of Next, of Count
		"a member of 1 TiB, 4 KB there": {`member "a.bin": truncated after 4096 of its 1099511627776 bytes`,
			`after member "a.bin": truncated or corrupt header: unexpected EOF`},
		"a member of 2⁶² bytes": {`member "k.jpg": truncated after 100 of its 4611686018427387904 bytes`,
			`after member "k.jpg": truncated or corrupt header: unexpected EOF`},
		"a sparse member of 1 TiB": {`member "a.bin" is a sparse file`, `member "a.bin" is a sparse file`},
		"testdata/fuzz/FuzzTar/4293488cce3e4636": {"not a tar, or truncated in its first header: unexpected EOF",
			"not a tar, or truncated in its first header: unexpected EOF"},
	}
	for name, data := range inputs {
		for i, count := range []bool{false, true} {
			rc := &readCounter{r: bytes.NewReader(data)}
			r := NewTarReader("mem.tar", io.NopCloser(rc), 1<<62)
			var err error
			if count {
				_, err = r.Count(context.Background())
			} else {
				for err == nil {
					_, err = r.Next(context.Background())
				}
			}
			r.Close()
			assert.LessOrEqual(t, rc.bytes, len(data), "%s: bytes read", name)
			assert.LessOrEqual(t, rc.reads, 4+len(data)/512, "%s: Reads of %d bytes", name, len(data))
			if w, ok := want[name]; ok {
				assert.ErrorContains(t, err, "shards: mem.tar: "+w[i], name)
			}
		}
	}
}

// TestMakeFuzzRunsEveryTarget: make fuzz (scripts/fuzz.sh) runs every
// fuzz target of the module, with minimizing bounded (FuzzTar made 11 to
// 17 runs in a minute under go test's default, 60 s per input found).
func TestMakeFuzzRunsEveryTarget(t *testing.T) {
	t.Parallel()
	mk, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^fuzz:\n\t.*scripts/fuzz\.sh`, string(mk))
	script, err := os.ReadFile("../scripts/fuzz.sh")
	require.NoError(t, err)
	assert.Contains(t, string(script), `-fuzzminimizetime "$FUZZMINIMIZETIME"`)

	var want []string
	fset := token.NewFileSet()
	err = filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "adapters" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Fuzz") {
				want = append(want, "./"+filepath.ToSlash(filepath.Dir(strings.TrimPrefix(p, "../")))+" "+fn.Name.Name)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, want, "./shards FuzzTar")
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash to run scripts/fuzz.sh")
	}
	cmd := exec.Command("bash", "../scripts/fuzz.sh", "-list")
	cmd.Env = append(os.Environ(), "FUZZ=.")
	out, err := cmd.Output()
	require.NoError(t, err)
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, got)
}
