package shards

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

func TestSplitKey(t *testing.T) {
	t.Parallel()
	for name, want := range map[string][2]string{
		"s001.jpg":            {"s001", "jpg"},
		"s001.JPG":            {"s001", "jpg"},
		"dir/n0153.seg.png":   {"dir/n0153", "seg.png"},
		"a.b/c.d.e":           {"a.b/c", "d.e"},
		"./train/x.cls":       {"./train/x", "cls"},
		"sample_01.input.npy": {"sample_01", "input.npy"},
	} {
		key, ext, ok := SplitKey(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, [2]string{key, ext}, name)
	}
	for _, name := range []string{"README", "dir/.hidden", ".jpg", "dir/noext", "a.b/c"} {
		_, _, ok := SplitKey(name)
		assert.False(t, ok, name)
	}
}

func readAll(t *testing.T, data []byte) ([]engine.Record, error) {
	r := NewTarReader("mem.tar", io.NopCloser(bytes.NewReader(data)), 0)
	defer r.Close()
	var out []engine.Record
	for {
		rec, err := r.Next(context.Background())
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}

func count(t *testing.T, data []byte) (int, error) {
	r := NewTarReader("mem.tar", io.NopCloser(bytes.NewReader(data)), 0)
	defer r.Close()
	return r.Count(context.Background())
}

func TestTarReaderGroupsMembersByKey(t *testing.T) {
	t.Parallel()
	data := tarBytes(t,
		tarMember{name: "__meta__", data: []byte("skipped")},
		tarMember{name: "train/", typ: tar.TypeDir},
		tarMember{name: "train/a.jpg", data: []byte("A")},
		tarMember{name: "train/a.CLS", data: []byte("1")},
		tarMember{name: "train/b.jpg", data: []byte("B")},
		tarMember{name: "train/b.seg.png", data: []byte("BS")},
		tarMember{name: "pax_global_header", typ: tar.TypeXGlobalHeader},
		tarMember{name: "__x__/c.txt", data: []byte("skipped")},
		tarMember{name: "c.txt", data: nil},
	)
	recs, err := readAll(t, data)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	assert.Equal(t, engine.Record{Key: "train/a", Shard: "mem.tar", Fields: map[string][]byte{"jpg": []byte("A"), "cls": []byte("1")}}, recs[0])
	assert.Equal(t, engine.Record{Key: "train/b", Shard: "mem.tar", Fields: map[string][]byte{"jpg": []byte("B"), "seg.png": []byte("BS")}}, recs[1])
	assert.Equal(t, "c", recs[2].Key)
	assert.Equal(t, []byte{}, recs[2].Fields["txt"])
	key, err := Field(recs[1], "__key__")
	require.NoError(t, err)
	assert.Equal(t, "train/b", string(key), "WebDataset's __key__")
	url, err := Field(recs[1], "__url__")
	require.NoError(t, err)
	assert.Equal(t, "mem.tar", string(url))
	n, err := count(t, data)
	require.NoError(t, err)
	assert.Equal(t, 3, n)

	empty := tarBytes(t)
	recs, err = readAll(t, empty)
	require.NoError(t, err)
	assert.Empty(t, recs)
	n, err = count(t, empty)
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestTarReaderLongNamesAndTypes(t *testing.T) {
	dir := strings.Repeat("a.dir/", 30) // dots in folder names are not the key's
	for _, format := range []tar.Format{tar.FormatPAX, tar.FormatGNU} {
		var buf bytes.Buffer
		w := tar.NewWriter(&buf)
		for _, m := range []struct {
			name string
			typ  byte
		}{
			{dir + "ключ.a.b.c.jpg", tar.TypeReg}, // longer than the 100 bytes of a ustar name
			{dir + "ключ.cls", tar.TypeCont},      // a regular file to Python's tarfile too
			{dir + "second.cls", tar.TypeReg},
		} {
			require.NoError(t, w.WriteHeader(&tar.Header{Name: m.name, Typeflag: m.typ, Size: 1, Mode: 0o644, Format: format}))
			_, err := w.Write([]byte("x"))
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
		recs, err := readAll(t, buf.Bytes())
		require.NoError(t, err, format)
		require.Len(t, recs, 2, format)
		assert.Equal(t, dir+"ключ", recs[0].Key, format)
		assert.Equal(t, map[string][]byte{"a.b.c.jpg": []byte("x"), "cls": []byte("x")}, recs[0].Fields, format)
		assert.Equal(t, dir+"second", recs[1].Key, format)
		n, err := count(t, buf.Bytes())
		require.NoError(t, err)
		assert.Equal(t, 2, n, format)
	}
}

func TestTarReaderErrorsNameShardAndMember(t *testing.T) {
	t.Parallel()
	good := tarBytes(t, sampleMembers(0)...)
	// The offset of the end of s000000.bin's data: header, .cls, header, .bin.
	binEnd := 512 + 512 + 512 + len(payload(0))
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"no key":          {tarBytes(t, tarMember{name: "a.jpg"}, tarMember{name: "README", data: []byte("x")}), `mem.tar: member "README" has no sample key`},
		"hidden":          {tarBytes(t, tarMember{name: "dir/.jpg"}), `member "dir/.jpg" has no sample key`},
		"duplicate":       {tarBytes(t, tarMember{name: "a.jpg"}, tarMember{name: "a.JPG"}), `mem.tar: member "a.JPG": sample "a" already has a .jpg member`},
		"duplicate field": {tarBytes(t, tarMember{name: "d/a.b.c.jpg"}, tarMember{name: "d/a.B.c.JPG"}), `mem.tar: member "d/a.B.c.JPG": sample "d/a" already has a .b.c.jpg member`},
		"no dot":          {tarBytes(t, tarMember{name: "a.b/noext", data: []byte("x")}), `mem.tar: member "a.b/noext" has no sample key`},
		"dot first":       {tarBytes(t, tarMember{name: ".jpg", data: []byte("x")}), `mem.tar: member ".jpg" has no sample key`},
		"symlink":         {tarBytes(t, tarMember{name: "a.jpg"}, tarMember{name: "a.png", typ: tar.TypeSymlink}), `mem.tar: member "a.png" is a symbolic link, not a regular file`},
		"hard link":       {tarBytes(t, tarMember{name: "a.jpg"}, tarMember{name: "b.jpg", typ: tar.TypeLink}), `mem.tar: member "b.jpg" is a hard link, not a regular file`},
		"fifo":            {tarBytes(t, tarMember{name: "a.pipe", typ: tar.TypeFifo}), `mem.tar: member "a.pipe" is a named pipe, not a regular file`},
		"cut in data":     {good[:binEnd-1], `mem.tar: member "s000000.bin": truncated after 0 of its 1 bytes: unexpected EOF`},
		"cut in header":   {good[:1024+100], `mem.tar: after member "s000000.cls": truncated or corrupt header: unexpected EOF`},
		"cut at boundary": {good[:len(good)-1024], `mem.tar: truncated after member "s000000.json": no end-of-archive blocks`},
		"empty file":      {nil, "mem.tar: empty file, not a tar"},
		"not a tar":       {bytes.Repeat([]byte("garbage!"), 100), "mem.tar: not a tar"},
	} {
		_, err := readAll(t, tc.data)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
		assert.Equal(t, "shards: ", err.Error()[:8], name)
		if name == "cut in data" { // Count skips the data: the cut shows at the next header
			tc.want = `after member "s000000.bin"`
		}
		_, err = count(t, tc.data)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name+" (Count)")
	}
	// One end block of the two is enough.
	recs, err := readAll(t, good[:len(good)-512])
	require.NoError(t, err)
	assert.Len(t, recs, 1)
}

func TestTarReaderMemberLimit(t *testing.T) {
	t.Parallel()
	data := tarBytes(t, tarMember{name: "a.bin", data: make([]byte, 100)})
	r := NewTarReader("mem.tar", io.NopCloser(bytes.NewReader(data)), 99)
	defer r.Close()
	_, err := r.Next(context.Background())
	assert.ErrorContains(t, err, `mem.tar: member "a.bin": 100 bytes, more than the limit of 99`)
}

func TestCountSeeksLocalFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	paths, _ := writeShards(t, dir, 7, 0, 3)
	o := &Opener{}
	for i, want := range []int{7, 0, 3} {
		n, err := o.Count(context.Background(), paths[i])
		require.NoError(t, err)
		assert.Equal(t, want, n)
	}
	// A local shard cut inside a member's data fails the count too.
	data, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	cut := filepath.Join(dir, "cut.tar")
	require.NoError(t, os.WriteFile(cut, data[:len(data)/2+3], 0o644))
	_, err = o.Count(context.Background(), cut)
	assert.ErrorContains(t, err, "cut.tar: ")
	assert.ErrorContains(t, err, "truncated")
	_, err = o.Count(context.Background(), filepath.Join(dir, "missing.tar"))
	assert.ErrorContains(t, err, "missing.tar: no such file or directory")
}

// TestTarReaderBufferReusedAfterClose: a closed TarReader's read buffer
// serves the next one; the records it returned keep their bytes, and the
// closed reader reads nothing more.
func TestTarReaderBufferReusedAfterClose(t *testing.T) {
	t.Parallel()
	var a, b []tarMember
	for id := range 4 {
		a = append(a, sampleMembers(id)...)
		b = append(b, sampleMembers(100+id)...)
	}
	ra := NewTarReader("a.tar", io.NopCloser(bytes.NewReader(tarBytes(t, a...))), 0)
	first, err := ra.Next(context.Background())
	require.NoError(t, err)
	want := bytes.Clone(first.Fields["bin"])
	require.NoError(t, ra.Close())
	for range 3 { // the pool may hand out ra's buffer
		rb := NewTarReader("b.tar", io.NopCloser(bytes.NewReader(tarBytes(t, b...))), 0)
		n, err := rb.Count(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 4, n)
		require.NoError(t, rb.Close())
	}
	assert.Equal(t, want, first.Fields["bin"], "a record keeps its bytes")
	_, err = ra.Next(context.Background())
	assert.ErrorContains(t, err, "a.tar: read after Close")
	_, err = ra.Count(context.Background())
	assert.ErrorContains(t, err, "a.tar: read after Close")
}

// What follows a tar's end-of-archive blocks must be zeros, a record's
// worth at most (64 MiB): blocks of zeros inside a shard (a disk or copy fault)
// read as its end, and the samples after them would be lost without a
// word. Next and Count say so alike.
func TestTarTrailer(t *testing.T) {
	t.Parallel()
	var ms []tarMember
	for id := range 6 {
		ms = append(ms, sampleMembers(id)...)
	}
	whole := tarBytes(t, ms...)
	zeroed := slices.Clone(whole)
	clear(zeroed[6144 : 6144+4096]) // mid-shard
	for _, tc := range []struct {
		name string
		data []byte
		want string // "" for none
	}{
		{"as written", whole, ""},
		{"padded to a 10 KiB record, as tar and Python write", append(slices.Clone(whole), make([]byte, 10240-len(whole)%10240)...), ""},
		{"padded with 1 MiB of zeros", append(slices.Clone(whole), make([]byte, 1<<20-1024)...), ""},
		{"zeroed blocks inside", zeroed, "a byte that is not zero at byte"},
		{"another file after it", append(slices.Clone(whole), whole...), "a byte that is not zero at byte"},
		{"a 10 MiB record's zeros, as tar -b 20480 writes", append(slices.Clone(whole), make([]byte, 10<<20-1024)...), ""},
		{"65 MiB of zeros after it", append(slices.Clone(whole), make([]byte, 65<<20)...), "more than 67108864 bytes after the end-of-archive blocks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewTarReader("z.tar", io.NopCloser(bytes.NewReader(tc.data)), 0)
			n, err := 0, error(nil)
			for err == nil {
				if _, err = r.Next(context.Background()); err == nil {
					n++
				}
			}
			r.Close()
			c := NewTarReader("z.tar", io.NopCloser(bytes.NewReader(tc.data)), 0)
			count, cerr := c.Count(context.Background())
			c.Close()
			if tc.want == "" {
				assert.Equal(t, io.EOF, err)
				assert.Equal(t, 6, n)
				assert.NoError(t, cerr)
				assert.Equal(t, 6, count)
				return
			}
			assert.ErrorContains(t, err, "shards: z.tar: "+tc.want)
			assert.ErrorContains(t, cerr, "shards: z.tar: "+tc.want)
		})
	}
}
