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
// device, a pipe or a sparse file, a member larger than the limit, a
// truncated tar (cut inside a member or before the end-of-archive blocks)
// and anything but zeros (64 MiB at most) after the end-of-archive blocks
// (zeroed blocks inside the shard read as its end) are errors naming the
// shard and the member. It is an
// engine.RecordReader.
type TarReader struct {
	shard     string
	rc        io.Closer
	end       *endTracker
	tr        tarEntries
	maxMember int64
	buf       *bufio.Reader // from tarBuffers, returned by Close; nil if none
	bufs      *bufferPool   // where the members' bytes come from, a Source's; nil: allocated

	next    member // read ahead: the first member of the next sample, if data is not nil
	last    string // name of the last member read, for errors
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
	t.end.buf, t.end.under = br, r
	return t
}

// tarBuffers holds the read buffers of closed TarReaders for the next
// ones: an epoch opens shard after shard. Headers and small members are
// read through a buffer, in few reads of the shard; a member's bytes
// past what the buffer holds, from directRead bytes on, are read
// straight into the member (endTracker.Read), so that they are copied
// once, not twice.
var tarBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 256<<10) }}

// directRead is the least a read asks for that an empty read buffer
// passes to the shard's reader.
const directRead = 32 << 10

// newTarReader reads tar from r and closes c. When r is an io.Seeker,
// the reader seeks over the member data it is not asked for.
func newTarReader(shard string, r io.Reader, c io.Closer, maxMember int64) *TarReader {
	if maxMember <= 0 {
		maxMember = DefaultMaxMemberBytes
	}
	end := &endTracker{r: r}
	return &TarReader{shard: shard, rc: c, end: end, tr: tarEntries{r: end}, maxMember: maxMember}
}

// Next returns the shard's next sample, or io.EOF after the last.
func (t *TarReader) Next(ctx context.Context) (engine.Record, error) {
	if t.err != nil {
		return engine.Record{}, t.err
	}
	rec := engine.Record{Shard: t.shard}
	if m := t.next; m.data != nil {
		t.next = member{}
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

// member returns the next regular member with its bytes (not nil).
func (t *TarReader) member() (member, error) {
	for {
		h, err := t.header()
		if err != nil {
			return member{}, err
		}
		if h == nil {
			continue
		}
		key, ext, _ := SplitKey(h.Name)
		if h.Size > t.maxMember {
			return member{}, t.errorf("member %q: %d bytes, more than the limit of %d", h.Name, h.Size, t.maxMember)
		}
		data, err := t.read(h.Size)
		if err != nil {
			return member{}, t.readErr(err, "member %q: truncated after %d of its %d bytes", h.Name, len(data), h.Size)
		}
		if data == nil {
			data = []byte{}
		}
		return member{key, ext, data}, nil
	}
}

// read reads the n bytes of the current member into one buffer (a
// recycled one of a Source's, see Source.Decode, else an allocation of
// exactly n bytes). Up to firstRead the buffer is allocated before the
// bytes arrive; a larger member grows its buffer as they do, so that a
// size a header declares allocates little until the bytes exist.
func (t *TarReader) read(n int64) ([]byte, error) {
	if n > firstRead {
		return readGrowing(&t.tr, n, t.bufs)
	}
	data := t.bufs.alloc(int(n))
	m, err := io.ReadFull(&t.tr, data)
	return data[:m], err
}

// firstRead is the most a read of declared size allocates before bytes
// arrive.
const firstRead = 1 << 20

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
	h, err := t.tr.next()
	if err == io.EOF {
		switch {
		case t.end.n == 0:
			return nil, t.errorf("empty file, not a tar")
		case t.end.n < t.dataEnd+512:
			return nil, t.errorf("truncated after member %q: no end-of-archive blocks", t.last)
		}
		if err := t.trailer(); err != nil {
			return nil, err
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
	if sparse(h) {
		// archive/tar reads a PAX sparse file's holes as zeros that no
		// input holds: a few KB may stand for a TiB.
		return nil, t.errorf("member %q is %s, not a regular file: a WebDataset shard holds a sample's members as regular files", h.Name, typeName(tar.TypeGNUSparse))
	}
	if isMeta(h.Name) {
		return nil, nil
	}
	if _, _, ok := SplitKey(h.Name); !ok {
		return nil, t.errorf("member %q has no sample key: want key.extension, as WebDataset names members", h.Name)
	}
	return h, nil
}

// maxTrailer is the most a tar may hold after its end-of-archive blocks:
// zeros to the end of its last record (10 KiB by default; GNU tar takes
// blocking factors of 20480 and more, 10 MiB records).
const maxTrailer = 64 << 20

// trailer checks what follows the end-of-archive blocks: zeros, and at
// most maxTrailer of them. Anything else is a shard whose end came too
// soon (blocks of zeros inside it read as the end: a disk or copy fault)
// or one with other bytes after it, which would otherwise lose its
// samples without a word.
func (t *TarReader) trailer() error {
	end := t.end.n
	var buf [4096]byte
	for {
		n, err := t.end.Read(buf[:])
		if i := slices.IndexFunc(buf[:n], func(c byte) bool { return c != 0 }); i >= 0 {
			return t.errorf("a byte that is not zero at byte %d, after the end-of-archive blocks (which end at byte %d): zeroed blocks inside the shard cut it short, or something follows it", t.end.n-int64(n)+int64(i), end)
		}
		if t.end.n-end > maxTrailer {
			return t.errorf("more than %d bytes after the end-of-archive blocks (which end at byte %d)", maxTrailer, end)
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return t.readErr(err, "after the end-of-archive blocks")
		}
	}
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

// endTracker is the reader under the tar's entries: it counts the bytes
// they consumed, so that the reader can tell a tar that ends with
// its end-of-archive blocks from one cut at a member boundary, which
// archive/tar reports as a plain io.EOF.
type endTracker struct {
	r     io.Reader
	n     int64         // bytes consumed
	buf   *bufio.Reader // r, where it is a read buffer of under: nil, or
	under io.Reader     // its reader, read from directly when buf is empty
}

func (e *endTracker) Read(p []byte) (int, error) {
	r := e.r
	if e.buf != nil && len(p) >= directRead && e.buf.Buffered() == 0 {
		// An error the buffer holds (its reader returned bytes with it)
		// comes first: an empty read returns it.
		if _, err := e.buf.Read(p[:0]); err != nil {
			return 0, err
		}
		r = e.under
	}
	n, err := r.Read(p)
	e.n += int64(n)
	return n, err
}
