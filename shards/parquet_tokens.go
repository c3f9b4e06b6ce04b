package shards

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/tensorbatch/tensorbatch/engine"
)

// DefaultMaxParquetTokens is ParquetDocsConfig.MaxTokens when unset: 1 Gi
// tokens, 4 GiB as int32.
const DefaultMaxParquetTokens = 1 << 30

// ParquetDocsConfig configures ParquetDocuments.
type ParquetDocsConfig struct {
	// Column is the top-level column of token lists, one a document:
	// list<int32> or list<int64> (a Parquet LIST, or a repeated integer
	// field). "" means "input_ids", the column of Hugging Face's
	// tokenized datasets.
	Column string
	// MaxTokens bounds the tokens held in all; more is an error naming
	// the file where the bound is passed. 0 means
	// DefaultMaxParquetTokens.
	MaxTokens int64
	// Int64 keeps the tokens as int64 (8 bytes a token), any value.
	// By default they are kept as int32 (4 bytes a token), and a token
	// that is negative or above math.MaxInt32 is an error naming the
	// file, the column, the document and the token.
	Int64 bool
	// Opener reads the files; nil means a zero Opener.
	Opener *Opener
	// MaxParquetBytes bounds a remote file, read whole into memory; 0 means
	// DefaultMaxParquetBytes (as MaxParquetBytes does for a Source).
	MaxParquetBytes int64
}

// ParquetDocs is a corpus of tokenized documents read from the token-list
// column of Parquet files into memory (ParquetDocuments): all tokens in
// one slice, and each document's offset into it. It is a Documents, for
// Pack, safe for concurrent reads.
type ParquetDocs struct {
	t32   []int32 // the tokens, without Int64
	t64   []int64 // the tokens, with Int64
	off   []int64 // document i is tokens [off[i], off[i+1])
	files []int   // file f's documents start at files[f]
	names []string
	fp    engine.Fingerprint
}

// ParquetDocuments reads the token lists of column cfg.Column of every
// Parquet file that pattern names (a brace pattern, see Expand:
// "https://host/train-{00000..00009}-of-00010.parquet"), in order, row
// group by row group: each row is a document, in file order. Files are
// local paths, file://, http(s)://, or an object store's URLs (s3://,
// gs://, az://, with the store's package imported), read through
// cfg.Opener; a remote file is read whole into memory first, up to
// cfg.MaxParquetBytes. A null or empty list is an empty document (Pack
// leaves it out); a null token is an error. ParquetDocs is a
// corpus.Documents.
//
// Errors name the file and the column: a file that is missing, not
// Parquet, truncated or corrupt; a missing column (with the columns the
// file has); a column that is not a list of integers (INT32 or INT64
// physical type, signed or unsigned); a token out of int32's range
// without cfg.Int64; more than cfg.MaxTokens tokens in all.
func ParquetDocuments(ctx context.Context, pattern string, cfg ParquetDocsConfig) (*ParquetDocs, error) {
	names, err := Expand(pattern)
	if err != nil {
		return nil, err
	}
	o := options{opener: cfg.Opener, maxParquet: cfg.MaxParquetBytes}
	if o.opener == nil {
		o.opener = &Opener{}
	}
	if cfg.MaxParquetBytes < 0 {
		return nil, fmt.Errorf("shards: ParquetDocuments: ParquetDocsConfig.MaxParquetBytes is %d, want >= 0 (0 means %d)", cfg.MaxParquetBytes, DefaultMaxParquetBytes)
	}
	if cfg.Column == "" {
		cfg.Column = "input_ids"
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = DefaultMaxParquetTokens
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("shards: ParquetDocuments: ParquetDocsConfig.MaxTokens is %d, want >= 0 (0 means %d)", cfg.MaxTokens, DefaultMaxParquetTokens)
	}
	d := &ParquetDocs{off: []int64{0}, names: names}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		d.files = append(d.files, len(d.off)-1)
		if err := d.readFile(ctx, o.opener, name, cfg, o.maxParquetBytes()); err != nil {
			return nil, err
		}
	}
	d.fp = engine.Fingerprint{"parquet_docs.column": cfg.Column, "parquet_docs.int64": strconv.FormatBool(cfg.Int64),
		"parquet_docs.offsets": engine.FingerprintBytes(leBytes(d.off))}
	if cfg.Int64 {
		d.fp["parquet_docs.tokens"] = engine.FingerprintBytes(leBytes(d.t64))
	} else {
		d.fp["parquet_docs.tokens"] = engine.FingerprintBytes(leBytes(d.t32))
	}
	return d, nil
}

// Fingerprint returns the documents' identity (engine.Fingerprinter),
// which corpus.Pack records in its own, taken when the files are read:
//
//   - parquet_docs.tokens: the identity of the tokens held, all the
//     documents' back to back (engine.FingerprintBytes of their bytes,
//     4 a token, or 8 with Int64: all of them up to 256 KiB, else 64
//     blocks of 4 KiB spread evenly over them);
//   - parquet_docs.offsets: the same of the documents' offsets into them
//     (8 bytes a document, and one more);
//   - parquet_docs.column and parquet_docs.int64.
//
// The files' names, places and row groups are left out: the same
// documents read from a copy elsewhere, or from files cut otherwise,
// keep it. The limit: tokens (or offsets) of more than 256 KiB that
// differ only between the sampled blocks, their count kept, are not told
// apart.
func (d *ParquetDocs) Fingerprint() engine.Fingerprint { return maps.Clone(d.fp) }

// leBytes returns the bytes of v, little-endian: v's own memory on a
// little-endian machine, a copy elsewhere, so that a fingerprint is the
// same on any machine.
func leBytes[T int32 | int64](v []T) []byte {
	size := int(unsafe.Sizeof(T(0)))
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), size*len(v))
	}
	b := make([]byte, 0, size*len(v))
	for _, x := range v {
		if size == 4 {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		} else {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
	}
	return b
}

// tokenLeaf returns the integer leaf of the list column named column of
// f, the definition level of a null token (-1 when a token cannot be
// null), and whether the integers are unsigned.
func tokenLeaf(name string, f *parquet.File, column string) (leaf *parquet.Column, nullDef int, unsigned bool, err error) {
	var col *parquet.Column
	top := f.Root().Columns()
	names := make([]string, len(top))
	for i, c := range top {
		names[i] = c.Name()
		if c.Name() == column {
			col = c
		}
	}
	if col == nil {
		return nil, 0, false, fmt.Errorf("shards: %s: no column %q (it has %s)", name, column, strings.Join(names, ", "))
	}
	notList := func(why string) error {
		return fmt.Errorf("shards: %s: column %q is %s, not a list of integers", name, column, why)
	}
	leaf = col
	for !leaf.Leaf() {
		sub := leaf.Columns()
		if len(sub) != 1 {
			return nil, 0, false, notList(fmt.Sprintf("a group of %d fields", len(sub)))
		}
		leaf = sub[0]
	}
	if leaf.MaxRepetitionLevel() != 1 {
		if leaf.MaxRepetitionLevel() == 0 {
			return nil, 0, false, notList("not a list")
		}
		return nil, 0, false, notList("a nested list")
	}
	switch k := leaf.Type().Kind(); k {
	case parquet.Int32, parquet.Int64:
	default:
		return nil, 0, false, notList("a list of " + k.String())
	}
	if lt := leaf.Type().LogicalType(); lt != nil {
		if it, ok := lt.Value.(*format.IntType); ok && !it.IsSigned {
			unsigned = true
		}
	}
	nullDef = -1
	if leaf.Optional() {
		nullDef = leaf.MaxDefinitionLevel() - 1
	}
	return leaf, nullDef, unsigned, nil
}

// readFile appends the documents of the Parquet file name.
func (d *ParquetDocs) readFile(ctx context.Context, o *Opener, name string, cfg ParquetDocsConfig, maxBytes int64) error {
	f, closer, err := o.parquetFile(ctx, name, true, maxBytes)
	if err != nil {
		return err
	}
	defer closer.Close()
	leaf, nullDef, unsigned, err := tokenLeaf(name, f, cfg.Column)
	if err != nil {
		return err
	}
	maxDef := leaf.MaxDefinitionLevel()
	kind := leaf.Type().Kind()
	buf := make([]parquet.Value, 1024)
	firstDoc := len(d.off) - 1
	for g, rg := range f.RowGroups() {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		groupDoc := len(d.off) - 1
		fail := func(format string, args ...any) error {
			return fmt.Errorf("shards: %s: column %q: row group %d: "+format, append([]any{name, cfg.Column, g}, args...)...)
		}
		pages := rg.ColumnChunks()[leaf.Index()].Pages()
		err := func() error {
			defer pages.Close()
			for {
				page, err := pages.ReadPage()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return fail("%v (truncated or corrupt?)", err)
				}
				vr := page.Values()
				for {
					n, err := vr.ReadValues(buf)
					for _, v := range buf[:n] {
						if v.RepetitionLevel() == 0 {
							d.off = append(d.off, d.ntok())
						}
						if len(d.off)-1 == groupDoc {
							return fail("its first value continues a list: corrupt")
						}
						doc := len(d.off) - 2 - firstDoc // the row in the file
						def := v.DefinitionLevel()
						if def < maxDef {
							if def == nullDef {
								return fail("row %d: token %d is null", doc, d.ntok()-d.off[len(d.off)-2])
							}
							continue // a null or empty list
						}
						var t int64
						if kind == parquet.Int32 {
							if unsigned {
								t = int64(uint32(v.Int32()))
							} else {
								t = int64(v.Int32())
							}
						} else {
							t = v.Int64()
							if unsigned && t < 0 {
								return fail("row %d: token %d is %d, above int64's range", doc, d.ntok()-d.off[len(d.off)-2], uint64(t))
							}
						}
						if d.ntok() >= cfg.MaxTokens {
							return fail("row %d: more than MaxTokens (%d) tokens in all", doc, cfg.MaxTokens)
						}
						if cfg.Int64 {
							d.t64 = append(d.t64, t)
							d.off[len(d.off)-1]++
							continue
						}
						if t < 0 || t > math.MaxInt32 {
							why := "negative"
							if t > 0 {
								why = "above math.MaxInt32"
							}
							return fail("row %d: token %d is %d, %s, which int32 tokens cannot hold (set ParquetDocsConfig.Int64)", doc, d.ntok()-d.off[len(d.off)-2], t, why)
						}
						d.t32 = append(d.t32, int32(t))
						d.off[len(d.off)-1]++
					}
					if err == io.EOF {
						break
					}
					if err != nil {
						parquet.Release(page)
						return fail("%v (truncated or corrupt?)", err)
					}
				}
				parquet.Release(page)
			}
		}()
		if err != nil {
			return err
		}
		if got := int64(len(d.off) - 1 - groupDoc); got != rg.NumRows() {
			return fail("%d lists in a row group of %d rows: truncated or corrupt", got, rg.NumRows())
		}
	}
	return nil
}

// ntok returns the tokens read so far.
func (d *ParquetDocs) ntok() int64 { return int64(len(d.t32) + len(d.t64)) }

// NumDocuments returns the documents (rows) of every file.
func (d *ParquetDocs) NumDocuments() int { return len(d.off) - 1 }

// DocumentLen returns the tokens of document i.
func (d *ParquetDocs) DocumentLen(i int) int { return int(d.off[i+1] - d.off[i]) }

// NumTokens returns the tokens of every document.
func (d *ParquetDocs) NumTokens() int64 { return d.ntok() }

// Files returns the files read, in order.
func (d *ParquetDocs) Files() []string { return append([]string(nil), d.names...) }

// FileDocuments returns the documents of file f, [first, end).
func (d *ParquetDocs) FileDocuments(f int) (first, end int) {
	first = d.files[f]
	if f+1 < len(d.files) {
		return first, d.files[f+1]
	}
	return first, d.NumDocuments()
}

// Document returns the tokens of document i, a new slice.
func (d *ParquetDocs) Document(i int) []int64 {
	dst := make([]int64, d.DocumentLen(i))
	d.ReadDocument(i, 0, dst)
	return dst
}

// ReadDocument writes tokens [off, off+len(dst)) of document i into dst.
func (d *ParquetDocs) ReadDocument(i, off int, dst []int64) error {
	if i < 0 || i >= d.NumDocuments() || off < 0 || off+len(dst) > d.DocumentLen(i) {
		return fmt.Errorf("shards: ParquetDocs: tokens [%d, %d) of document %d are out of range", off, off+len(dst), i)
	}
	from := d.off[i] + int64(off)
	if d.t64 != nil {
		copy(dst, d.t64[from:])
		return nil
	}
	for k, t := range d.t32[from : from+int64(len(dst))] {
		dst[k] = int64(t)
	}
	return nil
}
