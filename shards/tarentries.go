package shards

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"path/filepath"
	"strings"
)

// tarEntries reads a tar's entries and their data, as archive/tar's
// Reader does, header for header and byte for byte
// (FuzzTarEntriesMatchArchiveTar holds it to that). The header every
// shard writer emits for a member, a plain USTAR header of a regular
// file, it parses itself: archive/tar spends most of a small member's
// time there (a rune scan of the block, the checksum, a time, strings).
// Every other header (PAX, GNU long names, other formats or types, the
// end-of-archive blocks, anything malformed) goes to a fresh
// archive/tar Reader, which reads it and what follows until it returns
// a regular file; from there on the data and the next header are read
// here again. archive/tar reads headers block by block, unbuffered, so
// it has read nothing past the header it returns.
type tarEntries struct {
	r    *endTracker
	err  error       // sticky, as archive/tar's
	fr   *tar.Reader // archive/tar, while it reads the current entry
	left int64       // the current entry's data not yet read (fr nil)
	pad  int64       // and its padding to the next block
	hdr  tar.Header  // the last header parsed here
	blk  [512]byte
}

// next returns the next entry's header, valid until the next call. A
// header parsed here has its Typeflag, Name and Size only.
func (e *tarEntries) next() (*tar.Header, error) {
	if e.err != nil {
		return nil, e.err
	}
	h, err := e.nextEntry()
	e.err = err
	return h, err
}

func (e *tarEntries) nextEntry() (*tar.Header, error) {
	if e.fr == nil {
		if err := e.skip(); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(e.r, e.blk[:]); err != nil {
			return nil, err
		}
		if h := e.parse(); h != nil {
			e.left, e.pad = h.Size, -h.Size&511
			return h, nil
		}
		e.fr = tar.NewReader(io.MultiReader(bytes.NewReader(bytes.Clone(e.blk[:])), e.r))
	}
	h, err := e.fr.Next()
	if err == nil && (h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeCont) && !sparse(h) {
		e.fr, e.left, e.pad = nil, h.Size, -h.Size&511
	}
	return h, err
}

// Read reads the current entry's data.
func (e *tarEntries) Read(p []byte) (int, error) {
	if e.fr != nil {
		return e.fr.Read(p)
	}
	if e.left == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := e.r.Read(p[:min(int64(len(p)), e.left)])
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// skip passes over what is left of the current entry, as archive/tar
// does: data cut short is io.ErrUnexpectedEOF, padding cut short io.EOF.
func (e *tarEntries) skip() error {
	if n, err := e.r.discard(e.left); n < e.left {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	e.left = 0
	if n, err := e.r.discard(e.pad); n < e.pad {
		if err == nil {
			err = io.EOF
		}
		return err
	}
	e.pad = 0
	return nil
}

// parse returns the block's header if it is a plain USTAR header of a
// regular file that archive/tar reads the same way (a valid checksum,
// typeflag '0', no prefix, a local name, every number octal and well
// formed), else nil.
func (e *tarEntries) parse() *tar.Header {
	b := &e.blk
	if string(b[257:263]) != "ustar\x00" || string(b[508:512]) == "tar\x00" || b[156] != tar.TypeReg || b[345] != 0 {
		return nil
	}
	sum, ok := octal(b[148:156])
	if !ok {
		return nil
	}
	if unsigned, signed := checksums(b); sum != unsigned && sum != signed {
		return nil
	}
	size, ok := octal(b[124:136])
	for _, f := range [...][2]int{{100, 108}, {108, 116}, {116, 124}, {136, 148}, {329, 337}, {337, 345}} {
		if _, good := octal(b[f[0]:f[1]]); !good {
			ok = false
		}
	}
	name := b[:100]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	if !ok || !filepath.IsLocal(string(name)) {
		return nil
	}
	e.hdr = tar.Header{Typeflag: tar.TypeReg, Name: string(name), Size: size}
	return &e.hdr
}

// checksums returns a header block's checksums, its bytes summed with
// the checksum field as spaces, as unsigned and as signed bytes (tar
// writers have used both), eight bytes at a time: a byte-wise loop was
// a sixth of a 4 KiB member's time.
func checksums(b *[512]byte) (unsigned, signed int64) {
	const lo, ones = 0x00ff00ff00ff00ff, 0x0101010101010101
	var pairs, high uint64 // 16-bit lanes of byte sums; 8-bit lanes of high bits
	for i := 0; i < len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if i == 144 { // bytes 148 to 151
			x = x&0x00000000ffffffff | 0x2020202000000000
		} else if i == 152 { // 152 to 155
			x = x&0xffffffff00000000 | 0x0000000020202020
		}
		pairs += x&lo + x>>8&lo
		high += x >> 7 & ones
	}
	sum := func(lanes16 uint64) int64 { // up to 4 × 65535
		x := lanes16&0x0000ffff0000ffff + lanes16>>16&0x0000ffff0000ffff
		return int64(x&0xffffffff + x>>32)
	}
	unsigned = sum(pairs)
	return unsigned, unsigned - 256*sum(high&lo+high>>8&lo)
}

// octal parses a numeric field as archive/tar does when it is octal:
// NULs and spaces trimmed at both ends, nothing for 0. A field in
// base-256 (first bit set) or with other bytes is not ok.
func octal(f []byte) (int64, bool) {
	for len(f) > 0 && (f[0] == ' ' || f[0] == 0) {
		f = f[1:]
	}
	for len(f) > 0 && (f[len(f)-1] == ' ' || f[len(f)-1] == 0) {
		f = f[:len(f)-1]
	}
	var x int64
	for _, c := range f {
		if c < '0' || c > '7' {
			return 0, false
		}
		x = x<<3 | int64(c-'0')
	}
	return x, true
}

// sparse reports whether archive/tar reads h's data as a sparse file's.
func sparse(h *tar.Header) bool {
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// discard passes over n bytes: from the read buffer, by seeking (to
// the last byte, which is read, so that a file cut short is seen), or
// by reading. It returns how many there were.
func (e *endTracker) discard(n int64) (int64, error) {
	if n <= 0 {
		return 0, nil
	}
	if b, ok := e.r.(*bufio.Reader); ok {
		var done int64
		for done < n {
			m, err := b.Discard(int(min(n-done, 1<<30)))
			done += int64(m)
			e.n += int64(m)
			if err != nil {
				return done, err
			}
		}
		return done, nil
	}
	var sought int64
	if s, ok := e.r.(io.Seeker); ok && n > 1 {
		if from, err := s.Seek(0, io.SeekCurrent); err == nil {
			if to, err := s.Seek(n-1, io.SeekCurrent); err == nil {
				sought = to - from
				e.n += sought
			}
		}
	}
	m, err := io.CopyN(io.Discard, e, n-sought)
	return sought + m, err
}
