package shards

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// DefaultMaxParquetBytes is the MaxParquetBytes of a Source when unset.
const DefaultMaxParquetBytes = 2 << 30

// MaxParquetBytes bounds the size of a remote Parquet shard, which is read
// whole into memory (DefaultMaxParquetBytes by default): a larger one is
// an error naming it.
func MaxParquetBytes(n int64) Option { return func(o *options) { o.maxParquet = n } }

// ParquetColumns reads only the named top-level columns of Parquet shards
// (and their fields, for a struct), skipping the pages of the others: a
// shard that lacks one, or holds it in a type that Records cannot carry,
// is an error naming the shard and the column. By default every column
// that a Record can carry is read.
func ParquetColumns(names ...string) Option {
	return func(o *options) { o.columns = append([]string(nil), names...) }
}

// isParquet reports whether the shard name is a Parquet file: its path
// ends in ".parquet" (any case).
func isParquet(name string) bool {
	p := name
	if loc, _ := parse(name); loc.k == viaHTTP {
		if u, err := url.Parse(name); err == nil {
			p = u.Path
		}
	}
	return strings.HasSuffix(strings.ToLower(p), ".parquet")
}

func (o *options) maxParquetBytes() int64 {
	if o.maxParquet > 0 {
		return o.maxParquet
	}
	return DefaultMaxParquetBytes
}

// footerTail is what is read of a remote file's end to reach its footer
// in one request, most of the time.
const footerTail = 64 << 10

// parquetFile opens the Parquet file of the shard name. With whole, a
// remote file is read whole into memory (up to max bytes); without it,
// only its footer is read, by range requests, so that the File serves
// the footer alone. The closer releases the file.
func (o *Opener) parquetFile(ctx context.Context, name string, whole bool, max int64) (*parquet.File, io.Closer, error) {
	loc, err := parse(name)
	if err != nil {
		return nil, nil, err
	}
	k, p := loc.k, loc.path
	if k == local {
		f, err := regfile.Open(p)
		if err != nil {
			return nil, nil, fmt.Errorf("shards: %w", err)
		}
		return parquetFrom(name, f, max)
	}
	if !whole {
		r, head, err := o.probe(ctx, name, make([]byte, len(parquetMagic)))
		if err != nil {
			return nil, nil, err
		}
		if r.total < 0 {
			r.Close()
			return nil, nil, fmt.Errorf("shards: %s: the server does not say its size, which a Parquet footer needs", name)
		}
		return parquetClosing(name, &tailReaderAt{r: r, size: r.total, head: head}, r.total, r)
	}
	rc, err := o.Open(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	return parquetFrom(name, rc, max)
}

// parquetFrom opens the Parquet file rc reads: in place where rc is a
// file (a local shard, a cached copy), else read whole into memory, up
// to max bytes. It closes rc, or leaves it to the closer it returns.
func parquetFrom(name string, rc io.ReadCloser, max int64) (*parquet.File, io.Closer, error) {
	if f, ok := rc.(interface {
		io.ReaderAt
		Stat() (os.FileInfo, error)
	}); ok {
		fi, err := f.Stat()
		if err != nil {
			rc.Close()
			return nil, nil, fmt.Errorf("shards: %s: %w", name, err)
		}
		return parquetClosing(name, f, fi.Size(), rc)
	}
	defer rc.Close()
	if r, ok := rc.(*remoteReader); ok && r.total > max {
		return nil, nil, fmt.Errorf("shards: %s: %d bytes, more than MaxParquetBytes (%d)", name, r.total, max)
	}
	data, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, nil, fmt.Errorf("shards: %s: %w", name, err)
	}
	if int64(len(data)) > max {
		return nil, nil, fmt.Errorf("shards: %s: more than MaxParquetBytes (%d bytes)", name, max)
	}
	return parquetClosing(name, bytes.NewReader(data), int64(len(data)), io.NopCloser(nil))
}

// parquetClosing opens the Parquet file ra reads, of size bytes, and
// closes closer if that fails.
func parquetClosing(name string, ra io.ReaderAt, size int64, closer io.Closer) (*parquet.File, io.Closer, error) {
	f, err := openParquet(name, ra, size)
	if err != nil {
		closer.Close()
		return nil, nil, err
	}
	return f, closer, nil
}

// parquetMagic starts and ends a Parquet file.
const parquetMagic = "PAR1"

// openParquet reads the footer of the Parquet file name, of size bytes,
// from ra, after checking its declared length against the size.
func openParquet(name string, ra io.ReaderAt, size int64) (*parquet.File, error) {
	const minSize = 4 + 4 + 4 // magic, footer length, magic
	if size < minSize {
		return nil, fmt.Errorf("shards: %s: %d bytes, too short for a Parquet file", name, size)
	}
	// The magic first (a remote file's first bytes came with the answer
	// that said its size: tailReaderAt.head), then the end.
	var magic [4]byte
	if _, err := ra.ReadAt(magic[:], 0); err != nil {
		return nil, fmt.Errorf("shards: %s: reading the Parquet header: %w", name, err)
	}
	if string(magic[:]) != parquetMagic {
		return nil, fmt.Errorf("shards: %s: not a Parquet file (it starts with %q, not \"PAR1\")", name, magic[:])
	}
	var end [8]byte
	if _, err := ra.ReadAt(end[:], size-8); err != nil {
		return nil, fmt.Errorf("shards: %s: reading the Parquet footer: %w", name, err)
	}
	if string(end[4:]) != parquetMagic {
		return nil, fmt.Errorf("shards: %s: not a Parquet file (it ends in %q, not \"PAR1\"): corrupt or truncated", name, end[4:])
	}
	n := int64(binary.LittleEndian.Uint32(end[:4]))
	if n > size-minSize {
		return nil, fmt.Errorf("shards: %s: Parquet footer of %d bytes in a file of %d: corrupt or truncated", name, n, size)
	}
	if n > maxParquetFooter {
		return nil, fmt.Errorf("shards: %s: Parquet footer of %d bytes, more than the %d a shard may have", name, n, maxParquetFooter)
	}
	// parquet-go sizes slices by the footer's counts, and the paths of
	// its columns by its schema's depth, before it checks them: the
	// footer is held to its bytes and bounds first (parquet_bounds.go).
	if err := checkFooterAt(ra, size-8-n, n); err != nil {
		return nil, fmt.Errorf("shards: %s: %w", name, err)
	}
	// Not parquet.OptimisticRead: it copies the file's last ReadBufferSize
	// bytes into a new buffer at every open, where the footer is a few KB
	// (a remote file's tail is kept by its tailReaderAt already).
	f, err := parquet.OpenFile(ra, size, parquet.SkipMagicBytes(true),
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true),
		parquet.ReadBufferSize(footerTail))
	if err != nil {
		return nil, fmt.Errorf("shards: %s: %w", name, err)
	}
	var rows int64
	for i, rg := range f.Metadata().RowGroups {
		for j, c := range rg.Columns {
			md := c.MetaData
			start := chunkStart(&md)
			if start < 0 || md.TotalCompressedSize < 0 || start > size || md.TotalCompressedSize > size-start {
				return nil, fmt.Errorf("shards: %s: row group %d: column chunk %d spans bytes %d+%d of a %d-byte file: corrupt", name, i, j, start, md.TotalCompressedSize, size)
			}
		}
		if rg.NumRows < 0 || rows+rg.NumRows < rows {
			return nil, fmt.Errorf("shards: %s: row group %d declares %d rows: corrupt", name, i, rg.NumRows)
		}
		rows += rg.NumRows
	}
	if rows != f.NumRows() {
		return nil, fmt.Errorf("shards: %s: its row groups hold %d rows, its footer says %d: corrupt", name, rows, f.NumRows())
	}
	return f, nil
}

// tailReaderAt reads a remote file at offsets, by moving its reader
// (a new range request), and keeps the file's last footerTail bytes, so
// that a footer costs one request, and its first bytes, which the
// request for its size read (Opener.probe): the magic number, which a
// Parquet file is opened by reading too.
type tailReaderAt struct {
	mu   sync.Mutex
	r    *remoteReader
	size int64
	head []byte // the file's first bytes
	tail []byte // the bytes from size-len(tail)
}

func (t *tailReaderAt) ReadAt(p []byte, off int64) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if off < 0 || off > t.size {
		return 0, fmt.Errorf("offset %d outside the file's %d bytes", off, t.size)
	}
	if off+int64(len(p)) <= int64(len(t.head)) {
		return copy(p, t.head[off:]), nil
	}
	if t.tail == nil && t.size-off <= footerTail {
		n := min(t.size, footerTail)
		t.tail = make([]byte, n)
		if err := t.read(t.tail, t.size-n); err != nil {
			t.tail = nil
			return 0, err
		}
	}
	if from := t.size - int64(len(t.tail)); t.tail != nil && off >= from {
		n := copy(p, t.tail[off-from:])
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	want := min(int64(len(p)), t.size-off)
	if err := t.read(p[:want], off); err != nil {
		return 0, err
	}
	if want < int64(len(p)) {
		return int(want), io.EOF
	}
	return len(p), nil
}

func (t *tailReaderAt) read(p []byte, off int64) error {
	if t.r.off != off {
		t.r.closeBody()
		t.r.off = off
	}
	_, err := io.ReadFull(t.r, p)
	return err
}

// parquetCount returns the rows of the Parquet shard name, from its
// footer, after checking that it has the columns asked for.
func (o *Opener) parquetCount(ctx context.Context, name string, columns []string) (int, error) {
	f, closer, err := o.parquetFile(ctx, name, false, 0)
	return parquetRows(name, columns, f, closer, err)
}

// parquetRows returns the rows of f, opened with err, after checking
// that it has the columns asked for, and closes it.
func parquetRows(name string, columns []string, f *parquet.File, closer io.Closer, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if _, err := parquetLeaves(name, f, columns); err != nil {
		return 0, err
	}
	return int(f.NumRows()), nil
}

// parquetFile opens the Parquet file of shard name as Opener.parquetFile
// does, a remote one through the cache when there is one (read whole,
// into the cache and from there).
func (s *Source) parquetFile(ctx context.Context, name string, whole bool) (*parquet.File, io.Closer, error) {
	if s.cache == nil || !remote(name) {
		return s.o.opener.parquetFile(ctx, name, whole, s.o.maxParquetBytes())
	}
	rc, err := s.open(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	return parquetFrom(name, rc, s.o.maxParquetBytes())
}

// openParquet starts reading the Parquet shard.
func (s *Source) openParquet(ctx context.Context, shard engine.ShardInfo) (engine.RecordReader, error) {
	f, closer, err := s.parquetFile(ctx, shard.Name, true)
	if err != nil {
		return nil, err
	}
	if f.NumRows() != int64(shard.Samples) {
		closer.Close()
		return nil, fmt.Errorf("shards: %s: %d rows, listed with %d", shard.Name, f.NumRows(), shard.Samples)
	}
	leaves, err := parquetLeaves(shard.Name, f, s.o.columns)
	if err != nil {
		closer.Close()
		return nil, err
	}
	return &parquetReader{shard: shard.Name, f: f, closer: closer, leaves: leaves, group: -1}, nil
}

// leaf is a column of a Parquet file that records carry.
type leaf struct {
	col      *parquet.Column
	name     string // the field's name: "label", "image.bytes"
	kind     parquet.Kind
	unsigned bool
	bytesOf  string // for a struct's "bytes" field: the struct's name
	pathOf   string // for a struct's "path" field, beside a "bytes" one: the struct's name
}

// parquetLeaves returns the columns of f that records carry: the
// top-level columns named by columns, or all of them when there are none.
func parquetLeaves(shard string, f *parquet.File, columns []string) ([]*leaf, error) {
	var out []*leaf
	top := f.Root().Columns()
	for _, want := range columns {
		if !slices.ContainsFunc(top, func(c *parquet.Column) bool { return c.Name() == want }) {
			names := make([]string, len(top))
			for i, c := range top {
				names[i] = c.Name()
			}
			return nil, fmt.Errorf("shards: %s: no column %q (it has %s)", shard, want, strings.Join(names, ", "))
		}
	}
	for _, c := range top {
		asked := slices.Contains(columns, c.Name())
		if len(columns) > 0 && !asked {
			continue
		}
		ls, why := carried(c, c.Name())
		if why != "" {
			if asked {
				return nil, fmt.Errorf("shards: %s: column %q: %s, which a record cannot carry", shard, c.Name(), why)
			}
			continue
		}
		out = append(out, ls...)
	}
	return out, nil
}

// carried returns the leaves of column c, named name, or why a record
// cannot carry it.
func carried(c *parquet.Column, name string) ([]*leaf, string) {
	if repeated(c) {
		return nil, "a list or map"
	}
	if c.Leaf() {
		l := &leaf{col: c, name: name, kind: c.Type().Kind()}
		switch l.kind {
		case parquet.Int96:
			return nil, "INT96"
		case parquet.Int32, parquet.Int64:
			if lt := c.Type().LogicalType(); lt != nil {
				if it, ok := lt.Value.(*format.IntType); ok && !it.IsSigned {
					l.unsigned = true
				}
			}
		}
		return []*leaf{l}, ""
	}
	var out []*leaf
	var bytesLeaf, pathLeaf *leaf
	for _, sub := range c.Columns() {
		ls, why := carried(sub, name+"."+sub.Name())
		if why != "" {
			return nil, why
		}
		if sub.Leaf() {
			switch sub.Name() {
			case "bytes":
				bytesLeaf = ls[0]
			case "path":
				pathLeaf = ls[0]
			}
		}
		out = append(out, ls...)
	}
	if bytesLeaf != nil && (bytesLeaf.kind == parquet.ByteArray || bytesLeaf.kind == parquet.FixedLenByteArray) {
		bytesLeaf.bytesOf = name
		if pathLeaf != nil && pathLeaf.kind == parquet.ByteArray {
			pathLeaf.pathOf = name
		}
	}
	return out, ""
}

// parquetReader reads the rows of a Parquet shard as records (see Parquet
// shards in the package documentation), one row group at a time, one page
// per column at a time. Source.Open returns one for a ".parquet" shard.
type parquetReader struct {
	shard  string
	f      *parquet.File
	closer io.Closer
	leaves []*leaf
	curs   []*cursor
	names  map[string]bool // the field names of columns, which extensions do not take

	group            int   // the row group being read
	groupRows, inRow int64 // its declared rows, and those read
	row              int64 // the next row's index in the file
	text             []byte
	err              error // sticky
}

// cursor reads one column's values of a row group, page by page.
type cursor struct {
	l     *leaf
	pages parquet.Pages
	page  parquet.Page // the page vr reads, released once read
	vr    parquet.ValueReader
	buf   []parquet.Value
	i, n  int
}

// next returns the cursor's next value; ok is false at the end of the
// column chunk.
func (c *cursor) next() (v parquet.Value, ok bool, err error) {
	for c.i == c.n {
		if c.vr != nil {
			c.n, err = c.vr.ReadValues(c.buf)
			c.i = 0
			if c.n > 0 {
				break
			}
			if err != nil && err != io.EOF {
				return v, false, err
			}
			c.vr = nil
			c.release()
		}
		page, err := c.pages.ReadPage()
		if err == io.EOF {
			return v, false, nil
		}
		if err != nil {
			return v, false, err
		}
		// The page goes back to parquet-go once its values are read (the
		// records hold copies: see parquetReader.valueBytes), which reads
		// the next page into its buffers.
		c.page, c.vr = page, page.Values()
	}
	v = c.buf[c.i]
	c.i++
	return v, true, nil
}

// release gives the page read back to parquet-go's buffer pools.
func (c *cursor) release() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
}

func (c *cursor) close() {
	c.release()
	if c.pages != nil {
		c.pages.Close()
	}
}

// startGroup starts reading row group g.
func (r *parquetReader) startGroup(g int) error {
	// parquet-go sizes page buffers by the page headers: they are held to
	// the bytes, the rows and the bounds first (parquet_bounds.go).
	md := &r.f.Metadata().RowGroups[g]
	for _, l := range r.leaves {
		cm := &md.Columns[l.col.Index()].MetaData
		codec := cm.Codec
		if cc := l.col.Compression(); cc != nil { // the first row group's, which parquet-go uses
			codec = cc.CompressionCodec()
		}
		if err := checkPages(r.f, l.name, chunkStart(cm), cm.TotalCompressedSize, codec, md.NumRows); err != nil {
			return fmt.Errorf("shards: %s: row group %d: %w", r.shard, g, err)
		}
	}
	for _, c := range r.curs {
		c.close()
	}
	rg := r.f.RowGroups()[g]
	chunks := rg.ColumnChunks()
	if r.curs == nil {
		r.curs = make([]*cursor, len(r.leaves))
		r.names = make(map[string]bool)
		for i, l := range r.leaves {
			r.curs[i] = &cursor{l: l, buf: make([]parquet.Value, 64)}
			r.names[l.name] = true
			if l.bytesOf != "" {
				r.names[l.bytesOf] = true
			}
		}
	}
	for _, c := range r.curs {
		c.pages, c.vr, c.i, c.n = chunks[c.l.col.Index()].Pages(), nil, 0, 0
	}
	r.group, r.groupRows, r.inRow = g, rg.NumRows(), 0
	return nil
}

// endGroup checks that every column of the row group ends with its rows.
func (r *parquetReader) endGroup() error {
	for _, c := range r.curs {
		_, ok, err := c.next()
		if err != nil {
			return r.columnErr(c, err)
		}
		if ok {
			return fmt.Errorf("shards: %s: row group %d: column %q holds more values than its %d rows", r.shard, r.group, c.l.name, r.groupRows)
		}
	}
	return nil
}

func (r *parquetReader) columnErr(c *cursor, err error) error {
	return fmt.Errorf("shards: %s: row group %d: column %q: row %d: %w", r.shard, r.group, c.l.name, r.row, err)
}

// Next returns the next row as a record, or io.EOF after the last.
func (r *parquetReader) Next(ctx context.Context) (engine.Record, error) {
	if r.err != nil {
		return engine.Record{}, r.err
	}
	rec, err := r.next(ctx)
	if err != nil {
		r.err = err
	}
	return rec, err
}

func (r *parquetReader) next(ctx context.Context) (engine.Record, error) {
	for r.group < 0 || r.inRow == r.groupRows {
		if r.group >= 0 {
			if err := r.endGroup(); err != nil {
				return engine.Record{}, err
			}
		}
		if r.group+1 == len(r.f.RowGroups()) {
			return engine.Record{}, io.EOF
		}
		if err := ctx.Err(); err != nil {
			return engine.Record{}, context.Cause(ctx)
		}
		if err := r.startGroup(r.group + 1); err != nil {
			return engine.Record{}, err
		}
	}
	rec := engine.Record{Shard: r.shard, Fields: make(map[string][]byte, len(r.curs)+2)}
	var exts []string
	var bytesOf map[string][]byte
	for _, c := range r.curs {
		v, ok, err := c.next()
		if err != nil {
			return engine.Record{}, r.columnErr(c, err)
		}
		if !ok {
			return engine.Record{}, fmt.Errorf("shards: %s: row group %d: column %q ends after %d of its %d rows", r.shard, r.group, c.l.name, r.inRow, r.groupRows)
		}
		if v.IsNull() {
			continue
		}
		b := r.valueBytes(c.l, v)
		rec.Fields[c.l.name] = b
		if c.l.bytesOf != "" {
			rec.Fields[c.l.bytesOf] = b
			if bytesOf == nil {
				bytesOf = make(map[string][]byte, 1)
			}
			bytesOf[c.l.bytesOf] = b
		}
		if c.l.pathOf != "" {
			if ext := pathExt(b); ext != "" {
				exts = append(exts, c.l.pathOf, ext)
			}
		}
	}
	for i := 0; i < len(exts); i += 2 {
		b, ok := bytesOf[exts[i]]
		if !ok {
			continue
		}
		for _, e := range []string{exts[i+1], alias(exts[i+1])} {
			if e != "" && !r.names[e] {
				rec.Fields[e] = b
			}
		}
	}
	if k, ok := rec.Fields["__key__"]; ok {
		rec.Key = string(k)
	} else {
		rec.Key = strconv.FormatInt(r.row, 10)
	}
	r.inRow++
	r.row++
	return rec, nil
}

// valueBytes returns the bytes of v, a value of column l: byte arrays
// copied out of the page, numbers as text.
func (r *parquetReader) valueBytes(l *leaf, v parquet.Value) []byte {
	if len(r.text) > 4096-32 {
		r.text = nil
	}
	if r.text == nil {
		r.text = make([]byte, 0, 4096)
	}
	n := len(r.text)
	switch l.kind {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		// A copy, of bytes that would otherwise keep the page's buffers
		// from parquet-go's pools: a large one (an image) into a buffer
		// that Source.Decode takes back, a small one (a path, a key)
		// beside the numbers' text.
		b := v.ByteArray()
		if d := recordBuffers.get(len(b)); d != nil {
			copy(d, b)
			return d
		}
		if len(b) > 256 {
			return bytes.Clone(b)
		}
		r.text = append(r.text, b...)
	case parquet.Boolean:
		if v.Boolean() {
			r.text = append(r.text, '1')
		} else {
			r.text = append(r.text, '0')
		}
	case parquet.Int32:
		if l.unsigned {
			r.text = strconv.AppendUint(r.text, uint64(uint32(v.Int32())), 10)
		} else {
			r.text = strconv.AppendInt(r.text, int64(v.Int32()), 10)
		}
	case parquet.Int64:
		if l.unsigned {
			r.text = strconv.AppendUint(r.text, uint64(v.Int64()), 10)
		} else {
			r.text = strconv.AppendInt(r.text, v.Int64(), 10)
		}
	case parquet.Float:
		r.text = strconv.AppendFloat(r.text, float64(v.Float()), 'g', -1, 32)
	case parquet.Double:
		r.text = strconv.AppendFloat(r.text, v.Double(), 'g', -1, 64)
	}
	return r.text[n:len(r.text):len(r.text)]
}

// pathExt returns the extension of a file path, lowercased and without
// its dot, or "" when it has none made of letters and digits.
func pathExt(p []byte) string {
	ext := path.Ext(string(p))
	if len(ext) < 2 || len(ext) > 9 {
		return ""
	}
	ext = strings.ToLower(ext[1:])
	for _, c := range ext {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return ""
		}
	}
	return ext
}

// alias returns the other name decoders know an extension by, if any.
func alias(ext string) string {
	if ext == "jpeg" {
		return "jpg"
	}
	return ""
}

// Close releases the shard.
func (r *parquetReader) Close() error {
	for _, c := range r.curs {
		c.close()
	}
	r.curs = nil
	if r.err == nil {
		r.err = fmt.Errorf("shards: %s: read after Close", r.shard)
	}
	if r.closer != nil {
		err := r.closer.Close()
		r.closer = nil
		return err
	}
	return nil
}

// repeated reports whether column c, or a column within it, repeats.
func repeated(c *parquet.Column) bool {
	if c.Repeated() || c.MaxRepetitionLevel() > 0 {
		return true
	}
	return slices.ContainsFunc(c.Columns(), repeated)
}
