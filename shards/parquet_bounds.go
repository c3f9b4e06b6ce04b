package shards

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/parquet-go/parquet-go/format"
)

// Bounds of what a Parquet shard may declare, checked against the bytes
// it holds before parquet-go sizes anything by it (see Parquet shards in
// the package documentation). parquet-go trusts its input: it makes a
// slice as long as a list's declared length, a path of every schema
// level for every column (a schema n groups deep costs n²/2 strings), a
// pointer per leaf column per row group before it compares the two, and
// page buffers of the sizes and value counts page headers declare.
const (
	// maxParquetFooter is the largest footer (the file's metadata) a
	// shard may have, in bytes: it is read whole into memory, twice.
	maxParquetFooter = 16 << 20
	// maxParquetDecode bounds what decoding a footer or a page header
	// may allocate, as thriftWalk.alloc estimates it from above.
	maxParquetDecode = 256 << 20
	// maxSchemaDepth is the deepest a schema's columns may be: a leaf
	// column in a group in the root is 2 levels deep.
	maxSchemaDepth = 64
	// maxSchemaElements is the most elements (groups and leaf columns,
	// the root included) a schema may have.
	maxSchemaElements = 10_000
	// maxThriftNesting is the deepest Thrift structs and containers may
	// nest in a footer or a page header (the format's own nest 7 deep):
	// parquet-go walks them by recursion.
	maxThriftNesting = 32
	// maxParquetPage is the most that reading a page may allocate: its
	// declared uncompressed size plus parquetValueBytes per value; the
	// default bound of a tar member, DefaultMaxMemberBytes.
	maxParquetPage = DefaultMaxMemberBytes
	// parquetValueBytes is what parquet-go allocates per value of a page
	// besides the page's bytes, at most: a definition level (1), an
	// offset (4) and a decoded value (8).
	parquetValueBytes = 13
)

// maxThriftStruct is the size of the largest struct of parquet-go's
// format package that a footer or a page header decodes into (a
// format.ColumnChunk), rounded up: what decoding one item of a list may
// allocate (TestMaxThriftStructCoversTheFormat checks it).
const maxThriftStruct = 640

// Thrift compact protocol types.
const (
	tcTrue   = 1
	tcFalse  = 2
	tcI8     = 3
	tcI16    = 4
	tcI32    = 5
	tcI64    = 6
	tcDouble = 7
	tcBinary = 8
	tcList   = 9
	tcSet    = 10
	tcMap    = 11
	tcStruct = 12
	tcUUID   = 13
)

// errThriftShort: the bytes end inside a value, or a length or count
// is more than the bytes left can hold.
var errThriftShort = errors.New("it ends inside a value")

// thriftWalk reads Thrift compact-protocol bytes without building
// anything: it checks every length and count against the bytes left,
// bounds the nesting, and adds up what decoding the bytes into
// parquet-go's format types allocates, from above. It reads b, the
// bytes from offset base up to end; or, where ra is set, windows of
// them into buf, as it goes, skipping what it need not look at (a
// page header's statistics).
type thriftWalk struct {
	b         []byte
	off       int   // in b
	base, end int64 // b[0]'s offset, the end's
	ra        io.ReaderAt
	buf       []byte
	alloc     int64
}

// pos is the walk's offset.
func (w *thriftWalk) pos() int64 { return w.base + int64(w.off) }

// seek moves the walk to offset p, which it has walked before.
func (w *thriftWalk) seek(p int64) {
	if p >= w.base && p-w.base <= int64(len(w.b)) {
		w.off = int(p - w.base)
		return
	}
	w.b, w.base, w.off = nil, p, 0
}

// skip skips n bytes, which fits has checked are there.
func (w *thriftWalk) skip(n int) { w.seek(w.pos() + int64(n)) }

// visitor walks the value of a struct's field id, of type typ, itself
// and reports true, or reports false for the walk to skip it.
type visitor func(id int16, typ byte, depth int) (bool, error)

func (w *thriftWalk) byte() (byte, error) {
	if w.off >= len(w.b) {
		if err := w.fill(); err != nil {
			return 0, err
		}
	}
	c := w.b[w.off]
	w.off++
	return c, nil
}

// fill reads the next window of the bytes, from ra.
func (w *thriftWalk) fill() error {
	p := w.pos()
	if w.ra == nil || p >= w.end {
		return errThriftShort
	}
	b := w.buf[:min(int64(len(w.buf)), w.end-p)]
	if n, err := w.ra.ReadAt(b, p); n < len(b) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("reading it: %w", err)
	}
	w.b, w.base, w.off = b, p, 0
	return nil
}

func (w *thriftWalk) uvarint() (uint64, error) {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		c, err := w.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("a varint of more than 10 bytes")
}

// int32 reads a field of type typ as parquet-go reads an int32 field:
// an i32, or else skipped (0). ok reports an i32.
func (w *thriftWalk) int32(typ byte, depth int) (v int32, ok bool, err error) {
	if typ != tcI32 {
		return 0, false, w.value(typ, depth)
	}
	u, err := w.uvarint()
	if err != nil {
		return 0, false, err
	}
	s := int64(u>>1) ^ -int64(u&1)
	if s < -1<<31 || s > 1<<31-1 {
		return 0, false, fmt.Errorf("an i32 of %d", s)
	}
	return int32(s), true, nil
}

// fits checks that the bytes left hold n items of at least each bytes.
func (w *thriftWalk) fits(what string, n uint64, each int) (int, error) {
	if left := uint64(w.end - w.pos()); n > left/uint64(each) {
		return 0, fmt.Errorf("%s of %d in %d bytes: %w", what, n, left, errThriftShort)
	}
	return int(n), nil
}

// minBytes is the fewest bytes an item of type typ in a container takes.
func minBytes(typ byte) int {
	switch typ {
	case tcDouble:
		return 8
	case tcUUID:
		return 16
	}
	return 1
}

// itemAlloc is the most parquet-go allocates for an item of type typ
// of a list (a string's bytes are the input's).
func itemAlloc(typ byte) int64 {
	switch typ {
	case tcStruct:
		return maxThriftStruct
	case tcBinary, tcList, tcSet, tcMap:
		return 24
	}
	return 16
}

// list reads a list's or a set's header: its length and its items' type.
func (w *thriftWalk) list() (n int, typ byte, err error) {
	h, err := w.byte()
	if err != nil {
		return 0, 0, err
	}
	typ, u := h&0x0f, uint64(h>>4)
	if u == 0x0f {
		if u, err = w.uvarint(); err != nil {
			return 0, 0, err
		}
	}
	if n, err = w.fits("a list length", u, minBytes(typ)); err != nil {
		return 0, 0, err
	}
	if n > 0 && (typ < tcTrue || typ > tcUUID) {
		return 0, 0, fmt.Errorf("a list of items of type %d", typ)
	}
	w.alloc += int64(n) * itemAlloc(typ)
	return n, typ, nil
}

// item walks an item of a container, of type typ.
func (w *thriftWalk) item(typ byte, depth int) error {
	if typ == tcTrue || typ == tcFalse { // a byte, where a field's is its type
		_, err := w.byte()
		return err
	}
	return w.value(typ, depth)
}

// value walks a value of type typ, within depth structs and containers.
func (w *thriftWalk) value(typ byte, depth int) error {
	switch typ {
	case tcTrue, tcFalse:
		return nil
	case tcI8:
		_, err := w.byte()
		return err
	case tcI16, tcI32, tcI64:
		_, err := w.uvarint()
		return err
	case tcDouble, tcUUID:
		n, err := w.fits("a value", 1, minBytes(typ))
		w.skip(n * minBytes(typ))
		return err
	case tcBinary:
		u, err := w.uvarint()
		if err != nil {
			return err
		}
		n, err := w.fits("a string length", u, 1)
		w.skip(n)
		return err
	}
	if depth >= maxThriftNesting {
		return fmt.Errorf("values nested more than %d deep", maxThriftNesting)
	}
	switch typ {
	case tcList, tcSet:
		n, it, err := w.list()
		for i := 0; i < n && err == nil; i++ {
			err = w.item(it, depth+1)
		}
		return err
	case tcMap:
		u, err := w.uvarint()
		if err != nil || u == 0 {
			return err
		}
		kv, err := w.byte()
		if err != nil {
			return err
		}
		kt, vt := kv>>4, kv&0x0f
		n, err := w.fits("a map size", u, minBytes(kt)+minBytes(vt))
		if err != nil {
			return err
		}
		w.alloc += int64(n) * 2 * (itemAlloc(kt) + itemAlloc(vt))
		for i := 0; i < n && err == nil; i++ {
			if err = w.item(kt, depth+1); err == nil {
				err = w.item(vt, depth+1)
			}
		}
		return err
	case tcStruct:
		w.alloc += 64 // a union's member; a struct field's is its parent's
		return w.fields(depth+1, nil)
	}
	return fmt.Errorf("a value of type %d", typ)
}

// field reads a field's header, after the field id: its id and type,
// or stop at the struct's end.
func (w *thriftWalk) field(id int16) (int16, byte, bool, error) {
	h, err := w.byte()
	if err != nil || h == 0 {
		return 0, 0, true, err
	}
	if d := h >> 4; d != 0 {
		return id + int16(d), h & 0x0f, false, nil
	}
	u, err := w.uvarint()
	return int16(int64(u>>1) ^ -int64(u&1)), h & 0x0f, false, err
}

// fields walks a struct's fields, up to its stop byte, within depth
// structs and containers, handing each to visit (when not nil).
func (w *thriftWalk) fields(depth int, visit visitor) error {
	var id int16
	for {
		var typ byte
		var stop bool
		var err error
		if id, typ, stop, err = w.field(id); stop || err != nil {
			return err
		}
		walked := false
		if visit != nil {
			if walked, err = visit(id, typ, depth); err != nil {
				return err
			}
		}
		if !walked {
			if err := w.value(typ, depth); err != nil {
				return err
			}
		}
	}
}

// structList reads the header of a list of structs, the value of a
// field of type typ, and reports its length; anything else it walks as
// parquet-go skips it, and reports !ok.
func (w *thriftWalk) structList(typ byte, depth int) (n int, ok bool, err error) {
	if typ != tcList || depth >= maxThriftNesting {
		return 0, false, w.value(typ, depth)
	}
	at, alloc := w.pos(), w.alloc
	n, it, err := w.list()
	if err != nil || it == tcStruct {
		return n, err == nil, err
	}
	w.seek(at)
	w.alloc = alloc
	return 0, false, w.value(typ, depth)
}

// schemaShape follows a schema's elements in their depth-first order.
type schemaShape struct {
	leaves int
	open   []int32 // children still to come, of each group open
}

// add follows element i: a leaf column where typed, else a group of
// children.
func (s *schemaShape) add(i int, typed bool, children int32) error {
	switch {
	case children < 0:
		return fmt.Errorf("schema element %d has %d children: corrupt", i, children)
	case typed && children > 0:
		return fmt.Errorf("schema element %d is a column of a type and a group of %d: corrupt", i, children)
	case i > 0 && len(s.open) == 0:
		return fmt.Errorf("schema element %d is outside the tree of its root: corrupt", i)
	case len(s.open) > maxSchemaDepth:
		return fmt.Errorf("its schema nests columns more than %d levels deep, the most a shard may", maxSchemaDepth)
	}
	if typed {
		s.leaves++
	}
	if children > 0 {
		s.open = append(s.open, children)
		return nil
	}
	for len(s.open) > 0 { // the last child closes its group, and maybe more
		if s.open[len(s.open)-1]--; s.open[len(s.open)-1] > 0 {
			break
		}
		s.open = s.open[:len(s.open)-1]
	}
	return nil
}

// schema walks the schema field (a list of SchemaElement), of type typ.
func (w *thriftWalk) schema(s *schemaShape, typ byte, depth int) error {
	n, ok, err := w.structList(typ, depth)
	if !ok {
		return err
	}
	if n > maxSchemaElements {
		return fmt.Errorf("its schema has %d elements, more than the %d a shard may have", n, maxSchemaElements)
	}
	*s = schemaShape{}
	for i := range n {
		typed, children := false, int32(0)
		err := w.fields(depth+1, func(id int16, typ byte, depth int) (bool, error) {
			switch {
			case id == 1 && typ == tcI32: // type: a leaf column's
				typed = true
			case id == 5: // num_children
				v, ok, err := w.int32(typ, depth)
				if ok {
					children = v
				}
				return true, err
			}
			return false, nil
		})
		if err != nil {
			return err
		}
		if err := s.add(i, typed, children); err != nil {
			return err
		}
	}
	if len(s.open) > 0 {
		return fmt.Errorf("its schema's groups declare more columns than it has: corrupt")
	}
	return nil
}

// rowGroupShape is what a footer's row groups hold: how many, and the
// fewest and most column chunks one has.
type rowGroupShape struct {
	groups, fewest, most int
	fewestAt, mostAt     int
}

// rowGroups walks the row_groups field (a list of RowGroup), of type
// typ.
func (w *thriftWalk) rowGroups(g *rowGroupShape, typ byte, depth int) error {
	n, ok, err := w.structList(typ, depth)
	if !ok {
		return err
	}
	*g = rowGroupShape{groups: n}
	for i := range n {
		chunks := 0
		err := w.fields(depth+1, func(id int16, typ byte, depth int) (bool, error) {
			if id != 1 { // columns
				return false, nil
			}
			at, alloc := w.pos(), w.alloc
			if m, ok, err := w.structList(typ, depth); ok {
				chunks = m
			} else if err != nil {
				return true, err
			}
			w.seek(at)
			w.alloc = alloc
			return false, nil
		})
		if err != nil {
			return err
		}
		if i == 0 || chunks < g.fewest {
			g.fewest, g.fewestAt = chunks, i
		}
		if i == 0 || chunks > g.most {
			g.most, g.mostAt = chunks, i
		}
	}
	return nil
}

// footerBuffers holds the buffers checkFooterAt reads footers into: a
// footer with statistics of large values (an image column's) is
// hundreds of KB, which parquet-go reads and copies again.
var footerBuffers sync.Pool

// checkFooterAt checks the Parquet footer of n bytes at off in ra, as
// checkFooter does.
func checkFooterAt(ra io.ReaderAt, off, n int64) error {
	bp, _ := footerBuffers.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	if int64(cap(*bp)) < n {
		*bp = make([]byte, n)
	}
	footer := (*bp)[:n]
	defer func() {
		if cap(*bp) <= 4<<20 {
			footerBuffers.Put(bp)
		}
	}()
	if _, err := ra.ReadAt(footer, off); err != nil {
		return fmt.Errorf("reading the Parquet footer: %w", err)
	}
	return checkFooter(footer)
}

// checkFooter checks a Parquet footer (a FileMetaData) before parquet-go
// decodes it: its Thrift against its bytes and maxThriftNesting, what
// decoding it allocates against maxParquetDecode, its schema against
// maxSchemaElements and maxSchemaDepth, and each row group's column
// chunks against the schema's leaf columns (parquet-go makes a pointer
// per leaf column per row group before it compares them).
func checkFooter(footer []byte) error {
	_, err := walkFooter(footer)
	return err
}

// walkFooter checks a footer as checkFooter does, and returns what
// decoding it may allocate.
func walkFooter(footer []byte) (int64, error) {
	// parquet-go reads the footer into a buffer and decodes a copy.
	w := &thriftWalk{b: footer, end: int64(len(footer)), alloc: 2 * int64(len(footer))}
	var s schemaShape
	var g rowGroupShape
	err := w.fields(0, func(id int16, typ byte, depth int) (bool, error) {
		switch id {
		case 2:
			return true, w.schema(&s, typ, depth)
		case 4:
			return true, w.rowGroups(&g, typ, depth)
		}
		return false, nil
	})
	if err != nil {
		return 0, fmt.Errorf("Parquet footer: %w", err)
	}
	if w.alloc > maxParquetDecode {
		return 0, fmt.Errorf("decoding its Parquet footer of %d bytes would allocate up to %d bytes, more than the %d a shard may have it allocate", len(footer), w.alloc, maxParquetDecode)
	}
	if g.groups > 0 && g.fewest != s.leaves {
		return 0, fmt.Errorf("row group %d has %d column chunks, for %d leaf columns: corrupt", g.fewestAt, g.fewest, s.leaves)
	}
	if g.groups > 0 && g.most != s.leaves {
		return 0, fmt.Errorf("row group %d has %d column chunks, for %d leaf columns: corrupt", g.mostAt, g.most, s.leaves)
	}
	return w.alloc, nil
}

// pageHeader is what checkPages reads of a page header.
type pageHeader struct {
	typ, uncompressed, compressed int32
	values                        int32 // of a data or dictionary page
	levels                        int64 // of a data page v2: its levels' bytes
}

// pageHeader walks a PageHeader, by loops of its own rather than
// visitors (which would allocate, for every page).
func (w *thriftWalk) pageHeader(h *pageHeader) error {
	var id int16
	for {
		var typ byte
		var stop bool
		var err error
		if id, typ, stop, err = w.field(id); stop || err != nil {
			return err
		}
		switch id {
		case 1:
			h.typ, _, err = w.int32(typ, 0)
		case 2:
			h.uncompressed, _, err = w.int32(typ, 0)
		case 3:
			h.compressed, _, err = w.int32(typ, 0)
		case 5, 7, 8: // data_page_header, dictionary_page_header, data_page_header_v2
			if typ != tcStruct {
				err = w.value(typ, 0)
				break
			}
			err = w.pageHeaderOf(h, id == 8)
		default:
			err = w.value(typ, 0)
		}
		if err != nil {
			return err
		}
	}
}

// pageHeaderOf walks a page header's DataPageHeader, DictionaryPageHeader
// or (v2) DataPageHeaderV2.
func (w *thriftWalk) pageHeaderOf(h *pageHeader, v2 bool) error {
	var id int16
	var rep, def int32
	for {
		var typ byte
		var stop bool
		var err error
		if id, typ, stop, err = w.field(id); err != nil {
			return err
		}
		if stop {
			break
		}
		switch {
		case id == 1:
			h.values, _, err = w.int32(typ, 1)
		case v2 && id == 5:
			def, _, err = w.int32(typ, 1)
		case v2 && id == 6:
			rep, _, err = w.int32(typ, 1)
		default:
			err = w.value(typ, 1)
		}
		if err != nil {
			return err
		}
	}
	if rep < 0 || def < 0 {
		return fmt.Errorf("levels of %d and %d bytes: corrupt", rep, def)
	}
	h.levels = int64(rep) + int64(def)
	return nil
}

// maxExpansion is how many times its compressed size a page of codec
// can be when decompressed, at most, where the codec has a bound.
func maxExpansion(codec format.CompressionCodec) int64 {
	switch codec {
	case format.Snappy: // a 3-byte copy of 64 bytes
		return 22
	case format.Gzip: // deflate: 258 bytes of a 2-bit code
		return 1032
	case format.Lz4, format.Lz4Raw:
		return 256
	}
	return 0
}

// checkPages checks the page headers of a column chunk, of size bytes
// from start in ra, before parquet-go reads its pages: every header is
// Thrift that its bytes hold, within maxThriftNesting and
// maxParquetDecode; every page is within the chunk; no page has reading
// it allocate more than maxParquetPage, or declare more than what codec
// can decompress its bytes to; and the data pages hold no more values
// than the rows of their row group (the reader reads columns of one
// value per row). Its errors start with the column's name, col.
func checkPages(ra io.ReaderAt, col string, start, size int64, codec format.CompressionCodec, rows int64) error {
	end := start + size
	w := &thriftWalk{base: start, end: end, ra: ra, buf: make([]byte, min(size, 4<<10))}
	var values int64
	for page := 0; w.pos() < end; page++ {
		w.alloc = 0
		var h pageHeader
		if err := w.pageHeader(&h); err != nil {
			return fmt.Errorf("column %q: page %d: corrupt header: %w", col, page, err)
		}
		if w.alloc > maxParquetDecode {
			return fmt.Errorf("column %q: page %d: decoding its header would allocate up to %d bytes, more than %d", col, page, w.alloc, maxParquetDecode)
		}
		body := end - w.pos()
		data := h.typ == int32(format.DataPage) || h.typ == int32(format.DataPageV2)
		switch {
		case h.compressed < 0 || h.uncompressed < 0 || h.values < 0:
			return fmt.Errorf("column %q: page %d: %d bytes, %d uncompressed, %d values: corrupt", col, page, h.compressed, h.uncompressed, h.values)
		case int64(h.compressed) > body:
			return fmt.Errorf("column %q: page %d: %d bytes, of the %d left of its column chunk: corrupt", col, page, h.compressed, body)
		case data && int64(h.values) > rows-values:
			return fmt.Errorf("column %q holds more values than its %d rows", col, rows)
		case int64(h.uncompressed)+parquetValueBytes*int64(h.values) > maxParquetPage:
			return fmt.Errorf("column %q: page %d: %d bytes uncompressed and %d values, more than a page may have read (%d bytes)", col, page, h.uncompressed, h.values, maxParquetPage)
		case maxExpansion(codec) > 0 && int64(h.uncompressed) > maxExpansion(codec)*int64(h.compressed)+64:
			return fmt.Errorf("column %q: page %d: %d bytes uncompressed, of %d %s bytes: corrupt", col, page, h.uncompressed, h.compressed, codec)
		case h.levels > int64(h.compressed):
			return fmt.Errorf("column %q: page %d: levels of %d bytes, of %d: corrupt", col, page, h.levels, h.compressed)
		}
		if data {
			values += int64(h.values)
		}
		w.skip(int(h.compressed))
	}
	return nil
}

// chunkStart is where parquet-go starts reading a column chunk: at its
// dictionary page, if it says it has one.
func chunkStart(md *format.ColumnMetaData) int64 {
	if md.DictionaryPageOffset != 0 {
		return md.DictionaryPageOffset
	}
	return md.DataPageOffset
}
