package shards

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/tensorbatch/tensorbatch/engine"
)

// DefaultMaxMemberBytes is the largest tar member a TarReader reads into
// memory unless told otherwise.
const DefaultMaxMemberBytes = 1 << 30

// SplitKey splits a tar member's name into its sample key and field
// extension as WebDataset does: the key is the name up to the first dot of
// its last path element ("train/n0153.seg.png" is key "train/n0153",
// extension "seg.png"), and the extension is lower-cased. ok is false for
// a name without a key: no dot in the last element, or a dot first.
func SplitKey(name string) (key, ext string, ok bool) {
	base := name[strings.LastIndexByte(name, '/')+1:]
	dot := strings.IndexByte(base, '.')
	if dot <= 0 {
		return "", "", false
	}
	cut := len(name) - len(base) + dot
	return name[:cut], strings.ToLower(name[cut+1:]), true
}

// isMeta reports whether a member is WebDataset metadata ("__meta__" at
// the top level, or under a "__x__/" directory), which is skipped.
func isMeta(name string) bool {
	first, _, _ := strings.Cut(name, "/")
	return len(first) > 4 && strings.HasPrefix(first, "__") && strings.HasSuffix(first, "__")
}

// TarReader reads the samples of one WebDataset tar shard, in order:
// consecutive members with the same key make one engine.Record, their
// bytes keyed by extension. Directories, global PAX headers and WebDataset
// metadata members are skipped; long names (PAX or GNU) are read whole. A
// member without a key, a repeated extension within a sample, a link, a
// device, a pipe or a sparse file, a member larger than the limit and a
// truncated tar (cut inside a member or before the end-of-archive blocks)
// are errors naming the shard and the member. It is an
// engine.RecordReader.
type TarReader struct {
	shard     string
	rc        io.Closer
	end       *endTracker
	tr        *tar.Reader
	maxMember int64
	buf       *bufio.Reader // from tarBuffers, returned by Close; nil if none
	bufs      *bufferPool   // where the members' bytes come from, a Source's; nil: allocated

	next    *member // read ahead: the first member of the next sample
	last    string  // name of the last member read, for errors
	members int
	dataEnd int64 // where the last member's data, padded, ends
	err     error // sticky
}

type member struct {
	key, ext string
	data     []byte
}

// NewTarReader returns a TarReader of the shard r, named shard in errors;
// Close closes r. maxMember bounds a member's size (0 means
// DefaultMaxMemberBytes).
func NewTarReader(shard string, r io.ReadCloser, maxMember int64) *TarReader {
	br := tarBuffers.Get().(*bufio.Reader)
	br.Reset(r)
	t := newTarReader(shard, br, r, maxMember)
	t.buf = br
	return t
}

// tarBuffers holds the read buffers of closed TarReaders for the next
// ones: an epoch opens shard after shard, and a buffer is 1 MiB to
// allocate, zero and collect each time.
var tarBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 1<<20) }}

// newTarReader reads tar from r and closes c. When r is an io.Seeker,
// archive/tar seeks over the member data it is not asked for.
func newTarReader(shard string, r io.Reader, c io.Closer, maxMember int64) *TarReader {
	if maxMember <= 0 {
		maxMember = DefaultMaxMemberBytes
	}
	end := &endTracker{r: r}
	return &TarReader{shard: shard, rc: c, end: end, tr: tar.NewReader(end), maxMember: maxMember}
}

// Next returns the shard's next sample, or io.EOF after the last.
func (t *TarReader) Next(ctx context.Context) (engine.Record, error) {
	if t.err != nil {
		return engine.Record{}, t.err
	}
	rec := engine.Record{Shard: t.shard}
	if m := t.next; m != nil {
		t.next = nil
		rec.Key, rec.Fields = m.key, map[string][]byte{m.ext: m.data}
	}
	for {
		if err := ctx.Err(); err != nil {
			return engine.Record{}, context.Cause(ctx)
		}
		m, err := t.member()
		if err == io.EOF {
			t.err = io.EOF
			if rec.Fields != nil {
				return rec, nil
			}
			return engine.Record{}, io.EOF
		}
		if err != nil {
			t.err = err
			return engine.Record{}, err
		}
		if rec.Fields == nil {
			rec.Key, rec.Fields = m.key, map[string][]byte{m.ext: m.data}
			continue
		}
		if m.key != rec.Key {
			t.next = m
			return rec, nil
		}
		if _, dup := rec.Fields[m.ext]; dup {
			t.err = t.errorf("member %q: sample %q already has a .%s member (it has %s)", t.last, rec.Key, m.ext, fieldList(rec.Fields))
			return engine.Record{}, t.err
		}
		rec.Fields[m.ext] = m.data
	}
}

// Count returns the samples of the shard, reading the member headers
// only, with the checks of Next (and the same errors). Call it on a new
// TarReader instead of Next.
func (t *TarReader) Count(ctx context.Context) (int, error) {
	if t.err != nil { // closed: its buffer may be another's now
		return 0, t.err
	}
	n, key, exts := 0, "", map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return 0, context.Cause(ctx)
		}
		h, err := t.header()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
		if h == nil {
			continue
		}
		if h.Size > t.maxMember {
			return 0, t.errorf("member %q: %d bytes, more than the limit of %d", h.Name, h.Size, t.maxMember)
		}
		k, ext, _ := SplitKey(h.Name)
		if n == 0 || k != key {
			n, key = n+1, k
			clear(exts)
		} else if exts[ext] {
			return 0, t.errorf("member %q: sample %q already has a .%s member", h.Name, k, ext)
		}
		exts[ext] = true
	}
}

// member returns the next regular member with its bytes.
func (t *TarReader) member() (*member, error) {
	for {
		h, err := t.header()
		if err != nil {
			return nil, err
		}
		if h == nil {
			continue
		}
		key, ext, _ := SplitKey(h.Name)
		if h.Size > t.maxMember {
			return nil, t.errorf("member %q: %d bytes, more than the limit of %d", h.Name, h.Size, t.maxMember)
		}
		data, err := t.read(h.Size)
		if err != nil {
			return nil, t.readErr(err, "member %q: truncated after %d of its %d bytes", h.Name, len(data), h.Size)
		}
		return &member{key, ext, data}, nil
	}
}

// read reads the n bytes of the current member: into one buffer (a
// recycled one of a Source's, see Source.Decode, else an allocation of
// exactly n bytes) where the read buffer already holds them, or can
// (bufio.Reader.Peek fills it from the shard: the bytes exist before
// anything is allocated for them), else growing as they arrive.
func (t *TarReader) read(n int64) ([]byte, error) {
	if t.buf == nil || n > int64(t.buf.Size()) {
		return readGrowing(t.tr, n, t.bufs)
	}
	if p, _ := t.buf.Peek(int(n)); int64(len(p)) < n {
		return readGrowing(t.tr, n, t.bufs)
	}
	// archive/tar reads headers block by block, unbuffered: the member's
	// bytes are the next n of the read buffer.
	data := t.bufs.alloc(int(n))
	m, err := io.ReadFull(t.tr, data)
	return data[:m], err
}

// firstRead is the most a read of declared size allocates before bytes
// arrive.
const firstRead = 64 << 10

// readGrowing reads n bytes of r into a buffer that grows, doubling, as
// they arrive: the size a header declares allocates nothing until the
// bytes exist, and a complete read ends with a buffer of n bytes (of
// bufs, which takes back the smaller ones, if not nil).
// Fewer bytes are io.ErrUnexpectedEOF, with the bytes read.
func readGrowing(r io.Reader, n int64, bufs *bufferPool) ([]byte, error) {
	buf := bufs.alloc(int(min(n, firstRead)))[:0]
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			grown := bufs.alloc(int(min(n, 2*int64(cap(buf)))))[:len(buf)]
			copy(grown, buf)
			bufs.put(buf)
			buf = grown
		}
		m, err := r.Read(buf[len(buf):min(int64(cap(buf)), n)])
		buf = buf[:len(buf)+m]
		if err != nil && int64(len(buf)) < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

// header returns the next member's header; nil for a member to skip.
func (t *TarReader) header() (*tar.Header, error) {
	h, err := t.tr.Next()
	if err == io.EOF {
		switch {
		case t.end.n == 0:
			return nil, t.errorf("empty file, not a tar")
		case t.end.n < t.dataEnd+512:
			return nil, t.errorf("truncated after member %q: no end-of-archive blocks", t.last)
		}
		return nil, io.EOF
	}
	if err != nil {
		if t.members == 0 {
			return nil, t.readErr(err, "not a tar, or truncated in its first header")
		}
		return nil, t.readErr(err, "after member %q: truncated or corrupt header", t.last)
	}
	t.last = h.Name
	t.members++
	t.dataEnd = t.end.n + (h.Size+511)/512*512
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeCont: // regular files, as Python's tarfile has them
	case tar.TypeDir, tar.TypeXGlobalHeader, 'V': // no data of a sample (V: a GNU volume label)
		return nil, nil
	default:
		return nil, t.errorf("member %q is %s, not a regular file: a WebDataset shard holds a sample's members as regular files", h.Name, typeName(h.Typeflag))
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			// archive/tar reads a PAX sparse file's holes as zeros that
			// no input holds: a few KB may stand for a TiB.
			return nil, t.errorf("member %q is %s, not a regular file: a WebDataset shard holds a sample's members as regular files", h.Name, typeName(tar.TypeGNUSparse))
		}
	}
	if isMeta(h.Name) {
		return nil, nil
	}
	if _, _, ok := SplitKey(h.Name); !ok {
		return nil, t.errorf("member %q has no sample key: want key.extension, as WebDataset names members", h.Name)
	}
	return h, nil
}

// typeName names a tar member type.
func typeName(typ byte) string {
	switch typ {
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeSymlink:
		return "a symbolic link"
	case tar.TypeChar, tar.TypeBlock:
		return "a device"
	case tar.TypeFifo:
		return "a named pipe"
	case tar.TypeGNUSparse:
		return "a sparse file"
	}
	return fmt.Sprintf("of type %q", typ)
}

func (t *TarReader) errorf(format string, args ...any) error {
	return fmt.Errorf("shards: %s: %s", t.shard, fmt.Errorf(format, args...))
}

// Close closes the shard and gives its read buffer back for the next
// TarReader: it must not run concurrently with Next or Count.
func (t *TarReader) Close() error {
	if t.err == nil || t.err == io.EOF {
		t.err = fmt.Errorf("shards: %s: read after Close", t.shard)
	}
	err := t.rc.Close()
	if t.buf != nil { // the records hold copies: nothing refers to it
		t.buf.Reset(nil)
		tarBuffers.Put(t.buf)
		t.buf = nil
	}
	return err
}

// readErr is the error of a read that failed with err: a remote read
// that gave up (which says why) or, for anything else, what the format
// says (a bare io.EOF becomes io.ErrUnexpectedEOF).
func (t *TarReader) readErr(err error, format string, args ...any) error {
	where := fmt.Sprintf(format, args...)
	var re *readError
	if errors.As(err, &re) {
		where, _, _ = strings.Cut(where, ": truncated")
		return fmt.Errorf("shards: %s: %s: %w", t.shard, where, re.err)
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("shards: %s: %s: %w", t.shard, where, err)
}

func fieldList(f map[string][]byte) string {
	ks := slices.Sorted(maps.Keys(f))
	return "." + strings.Join(ks, ", .")
}

// endTracker is the reader under archive/tar: it counts the bytes
// archive/tar consumed, so that the reader can tell a tar that ends with
// its end-of-archive blocks from one cut at a member boundary, which
// archive/tar reports as a plain io.EOF.
type endTracker struct {
	r io.Reader
	n int64 // bytes consumed
}

func (e *endTracker) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.n += int64(n)
	return n, err
}

// Seek passes a seek through when the reader can (a local file, when
// counting), so that archive/tar skips member data without reading it.
func (e *endTracker) Seek(off int64, whence int) (int64, error) {
	s, ok := e.r.(io.Seeker)
	if !ok {
		return 0, errors.New("not seekable")
	}
	pos, err := s.Seek(off, whence)
	if err == nil {
		e.n = pos
	}
	return pos, err
}
