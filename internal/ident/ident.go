// Package ident computes the identity of data a dataset reads, for the
// fingerprints that a resumed loader checks (engine.Fingerprint): a short
// hash of a list of values, of bytes in memory or of a file's size and
// content. Large data is sampled, not read whole: the size and 64 blocks
// of 4 KiB spread evenly over it, so an identity costs at most 256 KiB of
// reading, yet two different corpora, or a file rewritten with other
// content, differ. Content rather than a modification time: a dataset
// copied to another node (cp, rsync, a download) keeps its identity, so
// a job resumed there is not refused.
package ident

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// Blocks and BlockBytes say how much of large data is hashed.
const (
	Blocks     = 64
	BlockBytes = 4 << 10
)

// Of returns the hash of parts, in order: 16 hex digits.
func Of(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		io.WriteString(h, p)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Ints returns the hash of a list of integers.
func Ints(v []int) string {
	var b strings.Builder
	for _, x := range v {
		fmt.Fprintf(&b, "%d,", x)
	}
	return Of(b.String())
}

// Bytes returns "size:hash" of data: all of it up to Blocks×BlockBytes,
// else its size and Blocks sampled blocks.
func Bytes(data []byte) string {
	s, _ := Reader(sliceReader(data), int64(len(data)))
	return s
}

// Reader returns "size:hash" of the size bytes r reads, sampled as Bytes
// does.
func Reader(r io.ReaderAt, size int64) (string, error) {
	h := sha256.New()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(size))
	h.Write(n[:])
	buf := make([]byte, BlockBytes)
	if size <= Blocks*BlockBytes {
		if _, err := io.Copy(h, io.NewSectionReader(r, 0, size)); err != nil {
			return "", err
		}
	} else {
		step := (size - BlockBytes) / (Blocks - 1)
		for i := range int64(Blocks) {
			if _, err := r.ReadAt(buf, i*step); err != nil && err != io.EOF {
				return "", err
			}
			h.Write(buf)
		}
	}
	return fmt.Sprintf("%d:%s", size, hex.EncodeToString(h.Sum(nil)[:8])), nil
}

type sliceReader []byte

func (s sliceReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(s)) {
		return 0, io.EOF
	}
	n := copy(p, s[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
