package shards

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/s3test"
	"github.com/tensorbatch/tensorbatch/vision"
)

// hfImage is a datasets.Image value as Hugging Face's datasets writes it.
type hfImage struct {
	Bytes []byte  `parquet:"bytes,optional"`
	Path  *string `parquet:"path,optional"`
}

// hfRow is a row of an image classification dataset as datasets writes
// it: an optional image struct and an optional int64 ClassLabel.
type hfRow struct {
	Image *hfImage `parquet:"image,optional"`
	Label *int64   `parquet:"label,optional"`
}

// hfMeta is the key-value metadata datasets writes beside its features.
const hfMeta = `{"info": {"features": {"image": {"_type": "Image"}, "label": {"names": ["a", "b"], "_type": "ClassLabel"}}}}`

// imagePath is the path of sample id's image: a .JPEG, a .png in a
// folder, or none.
func imagePath(id int) *string {
	var p string
	switch id % 3 {
	case 0:
		p = fmt.Sprintf("n%06d.JPEG", id)
	case 1:
		p = fmt.Sprintf("train/%06d.png", id)
	default:
		return nil
	}
	return &p
}

// hfRows returns the rows of samples first to first+n-1: the image bytes
// are payload(id), the label id.
func hfRows(first, n int) []hfRow {
	rows := make([]hfRow, n)
	for i := range rows {
		id := int64(first + i)
		rows[i] = hfRow{Image: &hfImage{Bytes: payload(int(id)), Path: imagePath(int(id))}, Label: &id}
	}
	return rows
}

// writeParquet writes rows to path as a Snappy-compressed Parquet file,
// perGroup rows in each row group (and pages of a few KiB, so that a
// column chunk has several), with datasets' metadata.
func writeParquet[T any](t testing.TB, path string, rows []T, perGroup int) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	w := parquet.NewGenericWriter[T](f, parquet.Compression(&parquet.Snappy),
		parquet.PageBufferSize(4<<10), parquet.KeyValueMetadata("huggingface", hfMeta))
	for len(rows) > 0 {
		n := min(perGroup, len(rows))
		_, err := w.Write(rows[:n])
		require.NoError(t, err)
		require.NoError(t, w.Flush()) // ends the row group
		rows = rows[n:]
	}
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
}

// readRecords reads every record of the Parquet shard name through a
// Source with opts.
func readRecords(t testing.TB, name string, opts ...Option) ([]engine.Record, error) {
	t.Helper()
	src, err := FromNames([]string{name}, testSchema, decodeTest, opts...)
	require.NoError(t, err)
	ctx := context.Background()
	infos, err := src.Shards(ctx)
	if err != nil {
		return nil, err
	}
	rr, err := src.Open(ctx, infos[0])
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	var recs []engine.Record
	for {
		rec, err := rr.Next(ctx)
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
	}
}

func TestParquetRecordsOfHuggingFaceImages(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "train-00000-of-00001.parquet")
	rows := hfRows(0, 10)
	rows[4].Image.Bytes = nil // a null image...
	rows[5].Label = nil       // ...and label: no field
	writeParquet(t, p, rows, 3)

	recs, err := readRecords(t, p)
	require.NoError(t, err)
	require.Len(t, recs, 10)
	for i, rec := range recs {
		assert.Equal(t, strconv.Itoa(i), rec.Key)
		assert.Equal(t, p, rec.Shard)
		if i == 5 {
			_, err := Int(rec, "label")
			assert.ErrorContains(t, err, p)
			assert.ErrorContains(t, err, `sample "5" has no .label member`)
		} else {
			label, err := Int(rec, "label")
			require.NoError(t, err)
			assert.Equal(t, int64(i), label)
		}
		if i == 4 {
			assert.NotContains(t, rec.Fields, "image")
			assert.NotContains(t, rec.Fields, "image.bytes")
			continue
		}
		want := payload(i)
		assert.Equal(t, want, rec.Fields["image"], "row %d", i)
		assert.Equal(t, want, rec.Fields["image.bytes"], "row %d", i)
		keys := make([]string, 0, len(rec.Fields))
		for k := range rec.Fields {
			keys = append(keys, k)
		}
		var wantKeys []string
		switch i % 3 {
		case 0:
			assert.Equal(t, want, rec.Fields["jpeg"])
			assert.Equal(t, want, rec.Fields["jpg"])
			wantKeys = []string{"image", "image.bytes", "image.path", "jpeg", "jpg", "label"}
			assert.Equal(t, *imagePath(i), string(rec.Fields["image.path"]))
		case 1:
			assert.Equal(t, want, rec.Fields["png"])
			wantKeys = []string{"image", "image.bytes", "image.path", "png", "label"}
		case 2:
			wantKeys = []string{"image", "image.bytes", "label"}
		}
		if i == 5 {
			wantKeys = wantKeys[:len(wantKeys)-1]
		}
		assert.ElementsMatch(t, wantKeys, keys, "row %d", i)
	}
	// The fields of a record are copies, which the pages read after them
	// do not overwrite.
	assert.Equal(t, payload(0), recs[0].Fields["image"])
}

// blobRow has byte arrays of every size a record's copy treats apart
// (see parquetReader.valueBytes), plain and dictionary-encoded.
type blobRow struct {
	Blob []byte `parquet:"blob"`
	Tag  string `parquet:"tag,dict"`
}

// The pages of a shard go back to parquet-go as they are read, which
// reads the next pages into their buffers: the records read before hold
// their own bytes, of any size, dictionary-encoded or not, over row
// groups and pages.
func TestParquetRecordsOutliveTheirPages(t *testing.T) {
	t.Parallel()
	sizes := []int{0, 1, 256, 257, 8<<10 - 1, 8 << 10, 100 << 10}
	var rows []blobRow
	for i := range 4 * len(sizes) {
		blob := make([]byte, sizes[i%len(sizes)])
		for j := range blob {
			blob[j] = byte(i*37 + j*11)
		}
		rows = append(rows, blobRow{Blob: blob, Tag: strings.Repeat(string(rune('a'+i%5)), 1+i%2*400)})
	}
	p := filepath.Join(t.TempDir(), "blobs.parquet")
	writeParquet(t, p, rows, 5)
	recs, err := readRecords(t, p)
	require.NoError(t, err)
	require.Len(t, recs, len(rows))
	for i, rec := range recs {
		assert.Equal(t, rows[i].Blob, rec.Fields["blob"], "row %d", i)
		assert.Equal(t, rows[i].Tag, string(rec.Fields["tag"]), "row %d", i)
	}
}

// typedRow has a key column and one column of each kind a record carries.
type typedRow struct {
	Key     string  `parquet:"__key__"`
	Small   int32   `parquet:"small"`
	Byte    uint8   `parquet:"byte"`
	Big     uint64  `parquet:"big"`
	Neg     int64   `parquet:"neg"`
	Score   float32 `parquet:"score"`
	Ratio   float64 `parquet:"ratio"`
	OK      bool    `parquet:"ok"`
	Caption string  `parquet:"caption,dict"`
	Tags    []int64 `parquet:"tags,list"`
}

func TestParquetColumnTypes(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "typed.parquet")
	writeParquet(t, p, []typedRow{
		{Key: "a/001", Small: -7, Byte: 255, Big: 1 << 63, Neg: -1 << 62, Score: 0.1, Ratio: 1.0 / 3, OK: true, Caption: "a cat", Tags: []int64{1}},
		{Key: "a/002", Caption: "a cat"},
	}, 10)
	recs, err := readRecords(t, p)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, "a/001", recs[0].Key)
	assert.Equal(t, map[string][]byte{
		"__key__": []byte("a/001"), "small": []byte("-7"), "byte": []byte("255"),
		"big": []byte("9223372036854775808"), "neg": []byte("-4611686018427387904"),
		"score": []byte("0.1"), "ratio": []byte("0.3333333333333333"), "ok": []byte("1"),
		"caption": []byte("a cat"),
	}, recs[0].Fields, "the list column is skipped")
	assert.Equal(t, "a/002", recs[1].Key)
	assert.Equal(t, "0", string(recs[1].Fields["ok"]))
	assert.Equal(t, "a cat", string(recs[1].Fields["caption"]))

	_, err = readRecords(t, p, ParquetColumns("caption", "tags"))
	assert.ErrorContains(t, err, p)
	assert.ErrorContains(t, err, `column "tags": a list or map`)

	recs, err = readRecords(t, p, ParquetColumns("small", "caption"))
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"small": []byte("0"), "caption": []byte("a cat")}, recs[1].Fields)
	assert.Equal(t, "1", recs[1].Key)
}

// hyparquetDir returns the folder whose node_modules holds hyparquet
// (scripts/install-deps.sh puts it there), or skips the test, saying
// what is missing, unless $CI or $TB_REQUIRE_NODE is set: then it fails.
func hyparquetDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".cache", "npm"))
	require.NoError(t, err)
	var missing string
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not on PATH"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "hyparquet", "package.json")); err != nil {
		missing = "hyparquet is not in " + dir
	}
	if missing != "" {
		msg := missing + " (scripts/install-deps.sh installs it)"
		if os.Getenv("CI") != "" || os.Getenv("TB_REQUIRE_NODE") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// hyparquetRows is a script for node that prints the rows of the
// Parquet file it is given as JSON lines, read by hyparquet: bytes in
// hex, integers in decimal.
const hyparquetRows = `
import { parquetReadObjects, asyncBufferFromFile, parquetMetadataAsync } from 'hyparquet'
const file = await asyncBufferFromFile(process.argv[1])
const meta = await parquetMetadataAsync(file)
console.log(JSON.stringify({ rowGroups: meta.row_groups.length }))
const rows = await parquetReadObjects({ file, utf8: false })
const hex = b => b == null ? null : Buffer.from(b).toString('hex')
for (const r of rows) {
  console.log(JSON.stringify({ bytes: hex(r.image?.bytes), path: r.image?.path ?? null, label: r.label == null ? null : r.label.toString() }))
}
`

// TestParquetMatchesHyparquet writes a file in datasets' layout with
// parquet-go, and checks that hyparquet, a JavaScript reader, reads what
// was written, and that the shard's records hold the same.
func TestParquetMatchesHyparquet(t *testing.T) {
	t.Parallel()
	dir := hyparquetDir(t)
	p := filepath.Join(t.TempDir(), "train-00000-of-00002.parquet")
	rows := hfRows(100, 37)
	rows[3].Image = nil
	rows[8].Label = nil
	writeParquet(t, p, rows, 8)

	cmd := exec.Command("node", "--input-type=module", "-e", hyparquetRows, p)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node: %s", stderr.String())
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var head struct{ RowGroups int }
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &head))
	assert.Equal(t, 5, head.RowGroups)

	type jsRow struct {
		Bytes *string
		Path  *string
		Label *string
	}
	recs, err := readRecords(t, p)
	require.NoError(t, err)
	require.Len(t, lines[1:], len(rows))
	require.Len(t, recs, len(rows))
	for i, line := range lines[1:] {
		var js jsRow
		require.NoError(t, json.Unmarshal([]byte(line), &js))
		want, rec := rows[i], recs[i]
		if want.Image == nil {
			assert.Nil(t, js.Bytes, "row %d", i)
			assert.NotContains(t, rec.Fields, "image")
		} else {
			require.NotNil(t, js.Bytes, "row %d", i)
			assert.Equal(t, hex.EncodeToString(want.Image.Bytes), *js.Bytes, "row %d: hyparquet", i)
			assert.Equal(t, hex.EncodeToString(rec.Fields["image"]), *js.Bytes, "row %d: ours", i)
			assert.Equal(t, want.Image.Path, js.Path, "row %d", i)
			if js.Path != nil {
				assert.Equal(t, *js.Path, string(rec.Fields["image.path"]), "row %d", i)
			}
		}
		if want.Label == nil {
			assert.Nil(t, js.Label, "row %d", i)
			assert.NotContains(t, rec.Fields, "label")
		} else {
			require.NotNil(t, js.Label, "row %d", i)
			assert.Equal(t, strconv.FormatInt(*want.Label, 10), *js.Label, "row %d: hyparquet", i)
			assert.Equal(t, *js.Label, string(rec.Fields["label"]), "row %d: ours", i)
		}
	}
}

// wdsRow is a row that a WebDataset decoder reads unchanged: an image
// struct whose path ends in ".bin", and the label as "cls".
type wdsRow struct {
	Image *hfImage `parquet:"image,optional"`
	Cls   *int64   `parquet:"cls,optional"`
}

// writeParquetShards writes shards as writeShards does, as Parquet files
// that decodeTest reads as it reads the tars, perGroup rows in a row
// group.
func writeParquetShards(t testing.TB, dir string, perGroup int, counts ...int) (paths []string, pattern string) {
	id := 0
	for i, n := range counts {
		rows := make([]wdsRow, n)
		for j := range rows {
			v, path := int64(id), fmt.Sprintf("s%06d.bin", id)
			rows[j] = wdsRow{Image: &hfImage{Bytes: payload(id), Path: &path}, Cls: &v}
			id++
		}
		p := filepath.Join(dir, fmt.Sprintf("train-%04d.parquet", i))
		writeParquet(t, p, rows, perGroup)
		paths = append(paths, p)
	}
	return paths, filepath.Join(dir, fmt.Sprintf("train-{0000..%04d}.parquet", len(counts)-1))
}

// TestParquetLoaderMatchesTars loads Parquet shards through the engine,
// at Workers 0 and 2, locally and over HTTP, and checks that every batch
// is bit for bit the batch of the same samples as tar shards.
func TestParquetLoaderMatchesTars(t *testing.T) {
	t.Parallel()
	counts := []int{10, 3, 0, 7, 11}
	_, tars := writeShards(t, t.TempDir(), counts...)
	tarSrc, err := New(context.Background(), tars, testSchema, decodeTest)
	require.NoError(t, err)
	sc := engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 6}
	cfg := engine.Config{BatchSize: 4, Seed: 7}
	ref, refData, _, err := loadAll(t, tarSrc, sc, cfg, 1)
	require.NoError(t, err)
	assert.Len(t, flat(ref), 31)

	srv := newFaultServer(t)
	_, pattern := writeParquetShards(t, srv.dir, 3, counts...)
	remote := srv.URL + "/" + filepath.Base(pattern)
	for _, name := range []string{pattern, remote} {
		src, err := New(context.Background(), name, testSchema, decodeTest, IndexFile(""))
		require.NoError(t, err)
		infos, err := src.Shards(context.Background())
		require.NoError(t, err)
		for i, info := range infos {
			assert.Equal(t, counts[i], info.Samples, name)
		}
		for _, w := range []int{0, 2} {
			c := cfg
			c.Workers = w
			ids, data, _, err := loadAll(t, src, sc, c, 1)
			require.NoError(t, err, "%s workers %d", name, w)
			assert.Equal(t, ref, ids, "%s workers %d", name, w)
			assert.Equal(t, refData, data, "%s workers %d: bit-identical batches", name, w)
		}
	}
	// Counting a remote shard asks for its first bytes (the magic number,
	// and the size), then reads its footer by a range request (a small
	// one's footer comes with its first bytes).
	writeParquet(t, filepath.Join(srv.dir, "big.parquet"), hfRows(0, 100), 10)
	n, err := (&Opener{}).Count(context.Background(), srv.URL+"/big.parquet")
	require.NoError(t, err)
	assert.Equal(t, 100, n)
	var big []string
	for _, r := range srv.requests() {
		if strings.HasPrefix(r, "/big.parquet") {
			big = append(big, r)
		}
	}
	tail := fileSize(t, filepath.Join(srv.dir, "big.parquet")) - footerTail
	assert.Equal(t, []string{"/big.parquet bytes=0-3", "/big.parquet bytes=" + strconv.FormatInt(tail, 10) + "-"}, big)

	// A remote shard over MaxParquetBytes is an error naming it.
	src, err := New(context.Background(), remote, testSchema, decodeTest, IndexFile(""), MaxParquetBytes(1000))
	require.NoError(t, err)
	_, _, _, err = loadAll(t, src, sc, cfg, 1)
	assert.ErrorContains(t, err, "MaxParquetBytes")
	assert.ErrorContains(t, err, srv.URL+"/train-")
}

// rewriteFooter rewrites the footer of the Parquet file p by edit.
func rewriteFooter(t *testing.T, p string, edit func(md *format.FileMetaData)) {
	t.Helper()
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	md := *f.Metadata()
	edit(&md)
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	require.NoError(t, err)
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	out := append(data[:len(data)-8-n:len(data)-8-n], footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	out = append(out, "PAR1"...)
	require.NoError(t, os.WriteFile(p, out, 0o644))
}

func TestParquetErrorsNameTheShard(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	writeParquet(t, good, hfRows(0, 20), 6)
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	footerAt := len(data) - 8 - int(binary.LittleEndian.Uint32(data[len(data)-8:]))

	t.Run("truncated", func(t *testing.T) {
		p := write("truncated.parquet", data[:len(data)/2])
		_, err := readRecords(t, p)
		assert.ErrorContains(t, err, p)
		assert.ErrorContains(t, err, "truncated")
	})
	t.Run("empty", func(t *testing.T) {
		p := write("empty.parquet", nil)
		_, err := readRecords(t, p)
		assert.ErrorContains(t, err, p)
	})
	t.Run("footer length", func(t *testing.T) {
		b := bytes.Clone(data)
		binary.LittleEndian.PutUint32(b[len(b)-8:], 0xfffffff0)
		p := write("footer-length.parquet", b)
		_, err := readRecords(t, p)
		assert.ErrorContains(t, err, p)
		assert.ErrorContains(t, err, "footer of 4294967280 bytes")
	})
	t.Run("footer garbage", func(t *testing.T) {
		b := bytes.Clone(data)
		for i := footerAt; i < footerAt+40; i++ {
			b[i] = 0xff
		}
		p := write("footer-garbage.parquet", b)
		_, err := readRecords(t, p)
		assert.ErrorContains(t, err, p)
	})
	t.Run("column chunk outside the file", func(t *testing.T) {
		p := write("chunk.parquet", data)
		rewriteFooter(t, p, func(md *format.FileMetaData) {
			md.RowGroups[1].Columns[0].MetaData.TotalCompressedSize = 1 << 40
		})
		_, err := readRecords(t, p)
		assert.ErrorContains(t, err, p)
		assert.ErrorContains(t, err, "row group 1: column chunk 0")
	})
	t.Run("missing column", func(t *testing.T) {
		_, err := readRecords(t, good, ParquetColumns("image", "caption"))
		assert.ErrorContains(t, err, good)
		assert.ErrorContains(t, err, `no column "caption" (it has image, label)`)
	})
	t.Run("a row group declares more rows than its columns hold", func(t *testing.T) {
		p := write("more.parquet", data)
		rewriteFooter(t, p, func(md *format.FileMetaData) { md.RowGroups[1].NumRows++; md.NumRows++ })
		recs, err := readRecords(t, p)
		assert.ErrorContains(t, err, p)
		assert.ErrorContains(t, err, `row group 1: column "image.bytes" ends after 6 of its 7 rows`)
		assert.Len(t, recs, 12)
	})
	t.Run("a row group declares fewer rows than its columns hold", func(t *testing.T) {
		p := write("fewer.parquet", data)
		rewriteFooter(t, p, func(md *format.FileMetaData) { md.RowGroups[1].NumRows--; md.NumRows-- })
		_, err := readRecords(t, p)
		assert.ErrorContains(t, err, p)
		assert.ErrorContains(t, err, `row group 1: column "image.bytes" holds more values than its 5 rows`)
	})
	t.Run("footer and row groups disagree", func(t *testing.T) {
		p := write("total.parquet", data)
		rewriteFooter(t, p, func(md *format.FileMetaData) { md.NumRows++ })
		_, err := readRecords(t, p)
		assert.ErrorContains(t, err, p)
		assert.ErrorContains(t, err, "its row groups hold 20 rows, its footer says 21")
	})
	t.Run("listed with another count", func(t *testing.T) {
		list := filepath.Join(dir, "shardlist.json")
		require.NoError(t, os.WriteFile(list, fmt.Appendf(nil, `{"__kind__":"wids-shard-index-v1","wids_version":1,"shardlist":[{"url":"good.parquet","nsamples":19}]}`), 0o644))
		_, err := readRecords(t, good, IndexFile(list))
		assert.ErrorContains(t, err, good)
		assert.ErrorContains(t, err, "20 rows, listed with 19")
	})
	t.Run("changed after counting", func(t *testing.T) {
		src, err := FromNames([]string{good}, testSchema, decodeTest)
		require.NoError(t, err)
		_, err = src.Open(context.Background(), engine.ShardInfo{Name: good, Samples: 21})
		assert.ErrorContains(t, err, good)
		assert.ErrorContains(t, err, "20 rows, listed with 21")
	})
}

func TestIsParquet(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"a.parquet": true, "/d/A.PARQUET": true, "s3://b/k/x.parquet": true,
		"https://h/x.parquet?X-Amz-Signature=1": true, "a.tar": false, "a.parquet.tar": false,
		"https://h/x.tar?f=a.parquet": false,
	} {
		assert.Equal(t, want, isParquet(name), name)
	}
}

// TestParquetThroughTheCache: remote Parquet shards with a Cache are
// downloaded into it once, when they are counted; the epochs after read
// the cached copies in place, with no request, the same batches as the
// local files.
func TestParquetThroughTheCache(t *testing.T) {
	t.Parallel()
	counts := []int{10, 3, 7}
	srv := newFaultServer(t)
	_, pattern := writeParquetShards(t, srv.dir, 3, counts...)
	local, err := New(context.Background(), pattern, testSchema, decodeTest, IndexFile(""))
	require.NoError(t, err)
	sc := engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 4}
	cfg := engine.Config{BatchSize: 4, Seed: 5, Workers: 2}
	want, wantData, _, err := loadAll(t, local, sc, cfg, 1)
	require.NoError(t, err)

	o := &Opener{}
	defer o.CloseIdleConnections()
	dir := t.TempDir()
	src, err := New(context.Background(), srv.URL+"/"+filepath.Base(pattern), testSchema, decodeTest, UseOpener(o), IndexFile(""), Cache(dir, 1<<30))
	require.NoError(t, err)
	defer src.Close()
	d, err := engine.FromIterable(context.Background(), src, sc)
	require.NoError(t, err)
	listed := o.Requests()
	assert.EqualValues(t, len(counts), listed, "one download a shard, when it is counted")
	for e := range 2 {
		ids, data, _, err := load(t, d, cfg, 1)
		require.NoError(t, err, "epoch %d", e)
		assert.Equal(t, want, ids)
		assert.Equal(t, wantData, data, "bit-identical batches")
	}
	assert.Equal(t, listed, o.Requests(), "the epochs read the cache")
	st := src.StorageStats()
	// A shard that the read-ahead fetched while the scan counted another
	// is a hit when the scan opens it.
	assert.EqualValues(t, len(counts), st.Misses+st.ReadAheads, "one download a shard")
	assert.EqualValues(t, 3*len(counts), st.Hits+st.Misses, "an open a shard at the scan and in each epoch")
}

// Image shards through vision.Pipeline.Record, whose records' buffers the
// Source takes back and reads later records into, on two workers over
// three epochs, tar and Parquet (whose records hold each image under
// several names: the column, its struct, the path's extension and its
// alias): every sample is its own image's decode. (A buffer given back
// once a name, then, went to two workers at once in the bench's source
// rows, bench/sources.go; this test only rarely meets that interleaving.)
func TestRecycledRecordsThroughTheLoader(t *testing.T) {
	t.Parallel()
	const n, side = 96, 96
	dir := t.TempDir()
	p, err := vision.NewPipeline(vision.Eval(32))
	require.NoError(t, err)
	defer p.Close()
	images := make([][]byte, n)
	want := make([][]byte, n)
	for id := range n {
		images[id] = s3test.JPEG(id, side+id%5*40) // 9 to 25 KB: pooled
		want[id] = make([]byte, p.Schema()[0].Bytes())
		require.NoError(t, p.Decode(images[id], nil, want[id]))
	}
	for s := range 4 {
		rows := make([]hfRow, n/4)
		var ms []tarMember
		for j := range rows {
			id := s*n/4 + j
			label, path := int64(id), fmt.Sprintf("n%06d.JPEG", id)
			rows[j] = hfRow{Image: &hfImage{Bytes: images[id], Path: &path}, Label: &label}
			ms = append(ms, tarMember{name: fmt.Sprintf("n%06d.jpg", id), data: images[id]},
				tarMember{name: fmt.Sprintf("n%06d.cls", id), data: fmt.Append(nil, id)})
		}
		writeParquet(t, filepath.Join(dir, fmt.Sprintf("train-%d.parquet", s)), rows, 8)
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("train-%d.tar", s)), tarBytes(t, ms...), 0o644))
	}
	for _, ext := range []string{"tar", "parquet"} {
		t.Run(ext, func(t *testing.T) {
			image, label := "jpg", "cls"
			if ext == "parquet" {
				image, label = "image", "label"
			}
			src, err := New(context.Background(), filepath.Join(dir, "train-{0..3}."+ext), p.Schema(), p.Record(image, label))
			require.NoError(t, err)
			defer src.Close()
			d, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 16})
			require.NoError(t, err)
			l, err := engine.New(d, engine.Config{BatchSize: 8, Workers: 2, Seed: 1, Backend: "cpu", WorldSize: 1})
			require.NoError(t, err)
			defer l.Close()
			for e := range 3 {
				seen := 0
				for b, err := range l.Epoch(context.Background(), e) {
					require.NoError(t, err)
					img, ids := b.Tensor(p.Schema()[0].Name).Bytes(), collate.As[int64](b.Tensor(p.Schema()[1].Name))
					row := len(img) / len(ids)
					for j, id := range ids {
						require.Equal(t, want[id], img[j*row:(j+1)*row], "epoch %d: sample of image %d", e, id)
						seen++
					}
				}
				require.Equal(t, n, seen)
			}
		})
	}
}
