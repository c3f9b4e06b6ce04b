package shards

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// compactWriter writes Thrift compact-protocol bytes by hand, for
// footers and page headers that declare what their bytes do not hold.
type compactWriter struct{ b []byte }

func (c *compactWriter) uvarint(v uint64) { c.b = binary.AppendUvarint(c.b, v) }

// field writes a field header, the field delta after the last one.
func (c *compactWriter) field(delta int, typ byte) {
	if delta > 0 && delta < 16 {
		c.b = append(c.b, byte(delta<<4)|typ)
		return
	}
	panic("long field ids: write them by hand")
}

func (c *compactWriter) i32(v int32) { c.uvarint(uint64(uint32(v<<1) ^ uint32(v>>31))) }

func (c *compactWriter) str(s string) {
	c.uvarint(uint64(len(s)))
	c.b = append(c.b, s...)
}

func (c *compactWriter) list(n uint64, typ byte) {
	if n < 15 {
		c.b = append(c.b, byte(n<<4)|typ)
		return
	}
	c.b = append(c.b, 0xf0|typ)
	c.uvarint(n)
}

func (c *compactWriter) stop() { c.b = append(c.b, 0) }

// rootOnly writes the first fields of a FileMetaData, up to field 3: a
// version, a schema of a root without columns, no rows.
func (c *compactWriter) rootOnly() {
	c.field(1, tcI32)
	c.i32(1)
	c.field(1, tcList)
	c.list(1, tcStruct)
	c.field(4, tcBinary)
	c.str("schema")
	c.stop()
	c.field(1, tcI64)
	c.uvarint(0)
}

// parquetOfFooter returns a Parquet file of no pages and the footer
// (Thrift compact bytes) given.
func parquetOfFooter(footer []byte) []byte {
	b := append([]byte(parquetMagic), footer...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(footer)))
	return append(b, parquetMagic...)
}

func marshalThrift(t testing.TB, v any) []byte {
	b, err := thrift.Marshal(new(thrift.CompactProtocol), v)
	require.NoError(t, err)
	return b
}

// writeFile writes data to a file name in a new folder and returns its
// path.
func writeFile(t testing.TB, name string, data []byte) string {
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

// countShard counts the rows of the shard p as Source.Shards does,
// reading its footer, and returns the bytes that allocated.
func countShard(t *testing.T, p string) (uint64, error) {
	src, err := FromNames([]string{p}, testSchema, decodeTest)
	require.NoError(t, err)
	var cerr error
	n := allocated(func() { _, cerr = src.Shards(context.Background()) })
	return n, cerr
}

// nestedSchema returns the schema of a root and groups-1 groups, each
// the only child of the last, around one INT32 column: the column is
// groups levels deep.
func nestedSchema(groups int) []format.SchemaElement {
	s := make([]format.SchemaElement, 0, groups+1)
	for i := range groups {
		s = append(s, format.SchemaElement{Name: "g" + strconv.Itoa(i), NumChildren: thrift.New[int32](1)})
	}
	return append(s, format.SchemaElement{Name: "x", Type: thrift.New(format.Int32), RepetitionType: thrift.New(format.Optional)})
}

// A schema of 20,000 nested groups (a footer of about 200 KB) is an error
// naming the shard, found before parquet-go builds anything of it: it
// reserves a path of every level for every column, 20,000²/2 strings
// (3.2 GB); so is one of 9,000 (650 MB), which has fewer elements than
// maxSchemaElements but is deeper than maxSchemaDepth.
func TestParquetDeepSchemaIsRefusedBeforeParquetGoBuildsIt(t *testing.T) {
	for groups, want := range map[int]string{
		20_000: "its schema has 20001 elements, more than the 10000 a shard may have",
		9_000:  "its schema nests columns more than 64 levels deep",
	} {
		footer := marshalThrift(t, &format.FileMetaData{Version: 1, Schema: nestedSchema(groups)})
		p := writeFile(t, "deep.parquet", parquetOfFooter(footer))
		n, err := countShard(t, p)
		require.Error(t, err, "%d groups", groups)
		assert.ErrorContains(t, err, p)
		assert.ErrorContains(t, err, want)
		assert.Less(t, n, uint64(64<<20), "allocated before refusing a footer of %d bytes", len(footer))
	}

	for _, levels := range []int{maxSchemaDepth, maxSchemaDepth + 1} {
		footer := marshalThrift(t, &format.FileMetaData{Version: 1, Schema: nestedSchema(levels)})
		_, err := countShard(t, writeFile(t, "deep.parquet", parquetOfFooter(footer)))
		if levels > maxSchemaDepth {
			assert.ErrorContains(t, err, "more than 64 levels deep")
		} else {
			assert.NoError(t, err, "a column %d levels deep", levels)
		}
	}
}

// A schema of more than maxSchemaElements elements is an error naming the
// shard.
func TestParquetWideSchemaIsRefused(t *testing.T) {
	for _, columns := range []int{maxSchemaElements - 1, maxSchemaElements} {
		s := []format.SchemaElement{{Name: "schema", NumChildren: thrift.New(int32(columns))}}
		for i := range columns {
			s = append(s, format.SchemaElement{Name: "c" + strconv.Itoa(i), Type: thrift.New(format.Int32)})
		}
		p := writeFile(t, "wide.parquet", parquetOfFooter(marshalThrift(t, &format.FileMetaData{Version: 1, Schema: s})))
		_, err := countShard(t, p)
		if columns < maxSchemaElements {
			assert.NoError(t, err, "%d columns", columns)
			continue
		}
		assert.ErrorContains(t, err, p)
		assert.ErrorContains(t, err, "its schema has 10001 elements, more than the 10000 a shard may have")
	}
}

// A footer of more than maxParquetFooter bytes is an error naming the
// shard, before it is read.
func TestParquetLargeFooterIsRefused(t *testing.T) {
	md := &format.FileMetaData{Version: 1, Schema: []format.SchemaElement{{Name: "schema"}},
		KeyValueMetadata: []format.KeyValue{{Key: "big", Value: string(make([]byte, maxParquetFooter))}}}
	p := writeFile(t, "footer.parquet", parquetOfFooter(marshalThrift(t, md)))
	n, err := countShard(t, p)
	assert.ErrorContains(t, err, p)
	assert.ErrorContains(t, err, fmt.Sprintf("more than the %d a shard may have", maxParquetFooter))
	assert.Less(t, n, uint64(4<<20), "allocated before refusing")
}

// Every count in a footer that parquet-go sizes a slice or a loop by is
// held to the bytes the footer has: each case is an error naming the
// shard, allocating next to nothing, where parquet-go alone runs out of
// memory or stack.
func TestParquetFooterCountsAreHeldToItsBytes(t *testing.T) {
	cases := []struct {
		name, want string
		footer     func(c *compactWriter)
	}{
		{"2³¹-1 row groups in 30 bytes", "a list length of 2147483647 in 0 bytes", func(c *compactWriter) {
			c.rootOnly()
			c.field(1, tcList)
			c.list(1<<31-1, tcStruct) // parquet-go: 2³¹ RowGroups, 188 GB
		}},
		{"a row group of a million 1-byte column chunks", "would allocate up to", func(c *compactWriter) {
			c.rootOnly() // parquet-go: a million ColumnChunks, 560 MB
			c.field(1, tcList)
			c.list(1, tcStruct)
			c.field(1, tcList)
			c.list(1_000_000, tcStruct)
			c.b = append(c.b, make([]byte, 1_000_000)...)
			c.stop()
			c.stop()
		}},
		{"structs nested 4 million deep", "values nested more than 32 deep", func(c *compactWriter) {
			c.rootOnly() // parquet-go skips the unknown field by recursion: a stack of GBs
			c.b = append(c.b, tcStruct)
			c.i32(100) // field 100, by its id
			c.b = append(c.b, bytes.Repeat([]byte{1<<4 | tcStruct}, 4_000_000)...)
			c.b = append(c.b, make([]byte, 4_000_002)...)
		}},
		{"lists nested 4 million deep", "values nested more than 32 deep", func(c *compactWriter) {
			c.rootOnly()
			c.field(2, tcList) // key_value_metadata, a list of lists
			c.b = append(c.b, bytes.Repeat([]byte{1<<4 | tcList}, 4_000_000)...)
			c.b = append(c.b, 0)
			c.stop()
		}},
		{"a schema of 9,999 columns and 100,000 row groups without chunks", "row group 0 has 0 column chunks, for 9999 leaf columns", func(c *compactWriter) {
			c.field(1, tcI32) // parquet-go: a pointer per column per row group, 8 GB
			c.i32(1)
			c.field(1, tcList)
			c.list(10_000, tcStruct)
			c.field(4, tcBinary)
			c.str("schema")
			c.field(1, tcI32)
			c.i32(9999)
			c.stop()
			for i := range 9999 {
				c.field(1, tcI32)
				c.i32(int32(format.Int32))
				c.field(3, tcBinary)
				c.str("c" + strconv.Itoa(i))
				c.stop()
			}
			c.field(1, tcI64)
			c.uvarint(0)
			c.field(1, tcList)
			c.list(100_000, tcStruct)
			for range 100_000 { // columns: none; total_byte_size, num_rows: 0
				c.b = append(c.b, 1<<4|tcList, tcStruct, 1<<4|tcI64, 0, 1<<4|tcI64, 0, 0)
			}
			c.stop()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c compactWriter
			tc.footer(&c)
			p := writeFile(t, "counts.parquet", parquetOfFooter(c.b))
			n, err := countShard(t, p)
			assert.ErrorContains(t, err, p)
			assert.ErrorContains(t, err, tc.want)
			assert.Less(t, n, uint64(2*len(c.b)+4<<20), "allocated before refusing")
		})
	}
}

// pageParquet returns a Parquet file of one optional INT32 column "x",
// of rows rows in one row group, compressed by codec: one page, of the
// header and body given.
func pageParquet(t testing.TB, header, body []byte, codec format.CompressionCodec, rows int64) []byte {
	b := []byte(parquetMagic)
	at := int64(len(b))
	b = append(append(b, header...), body...)
	size := int64(len(b)) - at
	md := &format.FileMetaData{
		Version: 1,
		Schema: []format.SchemaElement{{Name: "schema", NumChildren: thrift.New[int32](1)},
			{Name: "x", Type: thrift.New(format.Int32), RepetitionType: thrift.New(format.Optional)}},
		NumRows: rows,
		RowGroups: []format.RowGroup{{NumRows: rows, TotalByteSize: size, Columns: []format.ColumnChunk{{
			FileOffset: at,
			MetaData: format.ColumnMetaData{Type: format.Int32, Encoding: []format.Encoding{format.Plain, format.RLE},
				PathInSchema: []string{"x"}, Codec: codec, NumValues: rows, TotalUncompressedSize: size,
				TotalCompressedSize: size, DataPageOffset: at},
		}}}},
	}
	footer := marshalThrift(t, md)
	b = append(b, footer...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(footer)))
	return append(b, parquetMagic...)
}

// int32Page returns the body of a data page (v1) of the values given, all
// defined: their definition levels (one RLE run) and the values, PLAIN.
func int32Page(values ...int32) []byte {
	levels := binary.AppendUvarint(nil, uint64(len(values))<<1)
	levels = append(levels, 1)
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(levels)))
	b = append(b, levels...)
	for _, v := range values {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

// readXColumn reads the records of the shard p, and returns their "x"
// fields and the bytes reading them allocated.
func readXColumn(t *testing.T, p string) ([]string, uint64, error) {
	var recs []string
	var err error
	n := allocated(func() {
		var rs []engine.Record
		rs, err = readRecords(t, p)
		for _, r := range rs {
			recs = append(recs, string(r.Fields["x"]))
		}
	})
	return recs, n, err
}

// Every size and count of a page header that parquet-go sizes a buffer
// by is held to the bytes of the column chunk, to the rows of the row
// group and to maxParquetPage, before parquet-go reads the page: each
// case is an error naming the shard and the column, allocating next to
// nothing, where parquet-go alone allocates GBs or panics.
func TestParquetPageHeadersAreHeldToTheirBytes(t *testing.T) {
	body := int32Page(7, 8, 9)
	good := func() format.PageHeader {
		return format.PageHeader{Type: format.DataPage, UncompressedPageSize: int32(len(body)), CompressedPageSize: int32(len(body)),
			DataPageHeader: thrift.New(format.DataPageHeader{NumValues: 3, Encoding: format.Plain,
				DefinitionLevelEncoding: format.RLE, RepetitionLevelEncoding: format.RLE,
				Statistics: format.Statistics{MaxValue: []byte("MAXVALUE")}})}
	}
	h := good()
	recs, _, err := readXColumn(t, writeFile(t, "good.parquet", pageParquet(t, marshalThrift(t, &h), body, format.Uncompressed, 3)))
	require.NoError(t, err)
	require.Equal(t, []string{"7", "8", "9"}, recs, "the test's file is a good one")

	n := len(body)
	cases := []struct {
		name, want string
		codec      format.CompressionCodec
		rows       int64
		header     func(h *format.PageHeader) []byte // nil: h marshalled
		edit       func(h *format.PageHeader)
	}{
		{name: "a page of 2³¹-1 bytes", want: fmt.Sprintf(`column "x": page 0: 2147483647 bytes, of the %d left of its column chunk`, n),
			edit: func(h *format.PageHeader) { h.CompressedPageSize = 1<<31 - 1 }},
		{name: "a Snappy page of a few bytes declares 512 MiB uncompressed", want: fmt.Sprintf(`column "x": page 0: 536870912 bytes uncompressed, of %d SNAPPY bytes`, n),
			codec: format.Snappy, edit: func(h *format.PageHeader) { h.UncompressedPageSize = 1 << 29 }},
		{name: "a page of 2³¹-1 values in a row group of 3 rows", want: `column "x" holds more values than its 3 rows`,
			edit: func(h *format.PageHeader) { h.DataPageHeader.V.NumValues = 1<<31 - 1 }},
		{name: "a page of 2³¹-1 values in a row group of 2⁴⁰ rows", want: fmt.Sprintf(`column "x": page 0: %d bytes uncompressed and 2147483647 values, more than a page may have read`, n),
			rows: 1 << 40, edit: func(h *format.PageHeader) { h.DataPageHeader.V.NumValues = 1<<31 - 1 }},
		{name: "a statistic of 2³¹-1 bytes", want: `column "x": page 0: corrupt header: a string length of 2147483647`,
			header: func(h *format.PageHeader) []byte {
				b := marshalThrift(t, h)
				i := bytes.Index(b, []byte("\x08MAXVALUE"))
				require.Positive(t, i)
				return append(append(b[:i:i], binary.AppendUvarint(nil, 1<<31-1)...), b[i+1:]...)
			}},
		{name: "a page v2 whose levels are longer than it", want: fmt.Sprintf(`column "x": page 0: levels of 1000 bytes, of %d`, n),
			edit: func(h *format.PageHeader) {
				h.Type, h.DataPageHeader = format.DataPageV2, thrift.Null[format.DataPageHeader]{}
				h.DataPageHeaderV2 = thrift.New(format.DataPageHeaderV2{NumValues: 3, NumRows: 3, Encoding: format.Plain, DefinitionLevelsByteLength: 1000})
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := good()
			if tc.edit != nil {
				tc.edit(&h)
			}
			hb := marshalThrift(t, &h)
			if tc.header != nil {
				hb = tc.header(&h)
			}
			rows := tc.rows
			if rows == 0 {
				rows = 3
			}
			p := writeFile(t, "page.parquet", pageParquet(t, hb, body, tc.codec, rows))
			_, allocs, err := readXColumn(t, p)
			assert.ErrorContains(t, err, p)
			assert.ErrorContains(t, err, tc.want)
			assert.Less(t, allocs, uint64(8<<20), "allocated before refusing")
		})
	}
}

// maxThriftStruct covers every struct of parquet-go's format package a
// footer or page header decodes into.
func TestMaxThriftStructCoversTheFormat(t *testing.T) {
	t.Parallel()
	seen := map[reflect.Type]bool{}
	var largest reflect.Type
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		if seen[ty] {
			return
		}
		seen[ty] = true
		switch ty.Kind() {
		case reflect.Struct:
			if largest == nil || ty.Size() > largest.Size() {
				largest = ty
			}
			for i := range ty.NumField() {
				walk(ty.Field(i).Type)
			}
		case reflect.Slice, reflect.Pointer, reflect.Array:
			walk(ty.Elem())
		case reflect.Map:
			walk(ty.Key())
			walk(ty.Elem())
		}
	}
	walk(reflect.TypeFor[format.FileMetaData]())
	walk(reflect.TypeFor[format.PageHeader]())
	assert.LessOrEqual(t, largest.Size(), uintptr(maxThriftStruct), "%s", largest)
}
