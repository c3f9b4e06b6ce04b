package shards

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tarListing reads every entry of a tar, with its data (read, or
// skipped), and lists what it saw: each header's name, type and size,
// each data's digest, and how it ended.
func tarListing(next func() (*tar.Header, error), data io.Reader, read bool) []string {
	var l []string
	for {
		h, err := next()
		if err != nil {
			_, again := next() // the end sticks
			return append(l, "end: "+err.Error(), fmt.Sprint("then: ", again))
		}
		l = append(l, fmt.Sprintf("%q %q %d %v", h.Name, h.Typeflag, h.Size, h.PAXRecords))
		if n, err := data.Read(nil); n != 0 || err != nil && err != io.EOF {
			l = append(l, fmt.Sprint("empty read: ", n, err))
		}
		if read {
			b, err := io.ReadAll(data)
			l = append(l, fmt.Sprintf("data %d %x %v", len(b), sha256.Sum256(b), err))
		}
	}
}

// onlyReader hides all but Read.
type onlyReader struct{ io.Reader }

// failing reads as its reader does until at, then returns the bytes up
// to at with errFailing, once, and reads on after it: a reader whose
// failure comes with bytes, which a read buffer holds back.
type failing struct {
	r    io.Reader
	at   int
	done bool
	off  int
}

var errFailing = errors.New("failing read")

func (f *failing) Read(p []byte) (int, error) {
	if !f.done && f.off+len(p) > f.at {
		f.done = true
		n, _ := f.r.Read(p[:f.at-f.off])
		f.off += n
		return n, errFailing
	}
	n, err := f.r.Read(p)
	f.off += n
	return n, err
}

// tarSeeds are tars of every kind of header: USTAR, PAX and GNU, long
// and non-ASCII names, directories, links, global headers, base-256
// numbers, each also cut short.
func tarSeeds(t testing.TB) [][]byte {
	long := strings.Repeat("d/", 60) + "k.jpg"
	var seeds [][]byte
	for _, format := range []tar.Format{tar.FormatUSTAR, tar.FormatPAX, tar.FormatGNU} {
		var buf bytes.Buffer
		w := tar.NewWriter(&buf)
		for _, h := range []*tar.Header{
			{Name: "a.cls", Size: 1},
			{Name: "a.jpg", Size: 700},
			{Name: "big.bin", Size: directRead + 1000},
			{Name: "dir/", Typeflag: tar.TypeDir},
			{Name: "b.txt", Size: 0},
			{Name: long, Size: 3},
			{Name: "é.jpg", Size: 5},
			{Name: "l.jpg", Typeflag: tar.TypeSymlink, Linkname: "a.jpg"},
			{Name: "u.bin", Size: 2, Uid: 1 << 22},
		} {
			h.Format, h.Mode = format, 0o644
			if h.Typeflag == 0 {
				h.Typeflag = tar.TypeReg
			}
			if w.WriteHeader(h) != nil { // not in this format
				continue
			}
			_, err := w.Write(bytes.Repeat([]byte{'x'}, int(h.Size)))
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
		b := buf.Bytes()
		seeds = append(seeds, b, b[:len(b)-1024], b[:1100], b[:512+300], b[:100])
	}
	seeds = append(seeds, tarBytes(t, tarMember{typ: tar.TypeXGlobalHeader, name: "c"}, tarMember{name: "a.jpg", data: []byte("x")}),
		hugeMember(t, "k.jpg", 1<<40, 100), sparseTar(t, 1<<20), make([]byte, 1024), make([]byte, 512), []byte{})
	return seeds
}

// FuzzTarEntriesMatchArchiveTar holds tarEntries to archive/tar: for
// any bytes, the same headers, the same data and the same end, whether
// the data is read or skipped, through a read buffer, a seekable reader
// or a reader that only reads.
func FuzzTarEntriesMatchArchiveTar(f *testing.F) {
	for _, s := range tarSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, read := range []bool{true, false} {
			tr := tar.NewReader(bytes.NewReader(data))
			want := tarListing(tr.Next, tr, read)
			under := bytes.NewReader(data)
			br := bufio.NewReaderSize(under, 16)
			for _, r := range []*endTracker{
				{r: br, buf: br, under: under}, // as NewTarReader: reads of directRead and more past the buffer
				{r: bufio.NewReaderSize(bytes.NewReader(data), 16)},
				{r: bytes.NewReader(data)},
				{r: onlyReader{bytes.NewReader(data)}},
			} {
				e := &tarEntries{r: r}
				require.Equal(t, want, tarListing(e.next, e, read), "%T, buffered %v, data read: %v", r.r, r.buf != nil, read)
			}
			// A read that fails with bytes, at any place: the failure is
			// where archive/tar meets it, through the read buffer too.
			if len(data) > 0 {
				at := int(uint(len(data)*7919) % uint(len(data)))
				tr := tar.NewReader(&failing{r: bytes.NewReader(data), at: at})
				want := tarListing(tr.Next, tr, read)
				under := &failing{r: bytes.NewReader(data), at: at}
				br := bufio.NewReaderSize(under, 4096) // larger than a header: it holds failures back
				e := &tarEntries{r: &endTracker{r: br, buf: br, under: under}}
				require.Equal(t, want, tarListing(e.next, e, read), "failing at %d, data read: %v", at, read)
			}
		}
	})
}

// checksums agrees with archive/tar's byte-wise sums on every byte
// value at every place, the checksum field's included.
func TestChecksums(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for k := range 2000 {
		var b [512]byte
		switch k % 3 {
		case 0:
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
		case 1:
			b = [512]byte{}
			for i := range b {
				b[i] = 0xff
			}
		default:
			b[rng.IntN(512)] = byte(rng.IntN(256))
		}
		var unsigned, signed int64
		for i, c := range b {
			if 148 <= i && i < 156 {
				c = ' '
			}
			unsigned += int64(c)
			signed += int64(int8(c))
		}
		u, s := checksums(&b)
		require.Equal(t, [2]int64{unsigned, signed}, [2]int64{u, s}, "block %d", k)
	}
}

// A shard reader whose failure comes with bytes (the read buffer holds
// it back until it has handed those out) fails the member it fell in,
// wherever it falls: a read past the buffer must not step over it.
func TestTarReaderFailureWithBytes(t *testing.T) {
	member := bytes.Repeat([]byte{'x'}, 300<<10+100)
	data := tarBytes(t, tarMember{name: "a.bin", data: member}, tarMember{name: "b.bin", data: member[:1000]})
	for _, at := range []int{1000, 100 << 10, 200 << 10, 256 << 10, 300 << 10, 300<<10 + 600} {
		r := NewTarReader("m.tar", io.NopCloser(&failing{r: bytes.NewReader(data), at: at}), 0)
		var err error
		for err == nil {
			_, err = r.Next(context.Background())
		}
		r.Close()
		require.ErrorIs(t, err, errFailing, "failing at %d", at)
		assert.Contains(t, err.Error(), `shards: m.tar: member "a.bin"`, "failing at %d: the member it fell in", at)
	}
}
