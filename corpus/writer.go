package corpus

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// A MegatronWriter writes a Megatron-LM indexed dataset (prefix.idx and
// prefix.bin) as its documents come, as Megatron's
// IndexedDatasetBuilder does: the tokens go to the .bin at once, and
// only the sequence lengths (4 bytes a sequence) and the document
// boundaries are kept in memory, so a corpus of any size is written in
// bounded memory.
//
// Both files are written to temporary names in the prefix's folder and
// renamed into place by Close, the .bin first, then the .idx: until
// Close returns, no prefix.idx or prefix.bin of this writer exists, and
// Abort (or a failed Close) removes the temporary files. A
// MegatronWriter is not safe for concurrent use.
type MegatronWriter struct {
	op      string // "corpus: MegatronWriter", or WriteMegatron's prefix
	prefix  string
	dtype   collate.DType
	code    uint8
	bin     *os.File // the temporary .bin
	buf     *bufio.Writer
	scratch []byte

	lengths []int32 // tokens per sequence
	docs    []int64 // the sequence where each document starts, after the first (0)
	tokens  int64
	size    int64 // bytes of the .bin
	err     error // the first error: the writer is done
	done    bool  // closed or aborted
}

// NewMegatronWriter starts the indexed dataset prefix.idx and
// prefix.bin, tokens of type dtype (collate.Uint8, Int8, Int16, Uint16,
// Int32 or Int64; Megatron writes uint16 for a vocabulary of fewer than
// 65500 tokens, int32 otherwise). Existing files of that name are
// replaced when Close succeeds, not before. A prefix that names a folder
// ("dir/", "."), a folder that does not exist, and a folder where
// prefix.idx or prefix.bin goes are errors.
func NewMegatronWriter(prefix string, dtype collate.DType) (*MegatronWriter, error) {
	return newMegatronWriter("corpus: MegatronWriter", prefix, dtype)
}

func newMegatronWriter(op, prefix string, dtype collate.DType) (*MegatronWriter, error) {
	code, ok := megatronCode(dtype)
	if !ok {
		return nil, fmt.Errorf("%s: dtype %v, want uint8, int8, int16, uint16, int32 or int64", op, dtype)
	}
	dir, base := filepath.Split(prefix)
	if base == "" || base == "." || base == ".." {
		return nil, fmt.Errorf("%s: prefix %q names a folder; want a folder and the files' name, folder/name for folder/name.idx and folder/name.bin", op, prefix)
	}
	if dir == "" {
		dir = "."
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", op, prefix, err)
	}
	if err := targetsAreFiles(op, prefix); err != nil {
		return nil, err
	}
	bin, err := os.CreateTemp(dir, "."+base+".bin.tmp-*")
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", op, prefix, err)
	}
	return &MegatronWriter{
		op: op, prefix: prefix, dtype: dtype, code: code, bin: bin,
		buf: bufio.NewWriterSize(bin, 1<<20),
	}, nil
}

// Add writes one document of one sequence, tokens (Megatron's add_item
// then end_document). A token that the dtype cannot hold is an error
// naming the document and the token; it ends the writer, as every error
// does: Close then returns it and removes the temporary files.
func (w *MegatronWriter) Add(tokens []int64) error {
	if err := w.ready(); err != nil {
		return err
	}
	if err := w.sequence(tokens); err != nil {
		return w.fail(err)
	}
	w.docs = append(w.docs, int64(len(w.lengths)))
	return nil
}

// AddDocument writes one document of the sequences given (Megatron's
// add_document, one sequence a sentence with --split-sentences). A
// document of no sequences is written as one: its entry in the document
// indices repeats the previous one, as Megatron's builder writes a
// document whose every sentence was empty.
func (w *MegatronWriter) AddDocument(sequences [][]int64) error {
	if err := w.ready(); err != nil {
		return err
	}
	for _, s := range sequences {
		if err := w.sequence(s); err != nil {
			return w.fail(err)
		}
	}
	w.docs = append(w.docs, int64(len(w.lengths)))
	return nil
}

// Documents returns the documents written so far.
func (w *MegatronWriter) Documents() int { return len(w.docs) }

// Sequences returns the sequences written so far.
func (w *MegatronWriter) Sequences() int { return len(w.lengths) }

// Tokens returns the tokens written so far.
func (w *MegatronWriter) Tokens() int64 { return w.tokens }

// Size returns the bytes of the .bin written so far.
func (w *MegatronWriter) Size() int64 { return w.size }

// ready returns the error that ended the writer, if any.
func (w *MegatronWriter) ready() error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return fmt.Errorf("%s: %s: the writer is closed", w.op, w.prefix)
	}
	return nil
}

// fail ends the writer with err.
func (w *MegatronWriter) fail(err error) error {
	w.err = err
	return err
}

// sequence writes the tokens of one sequence to the .bin.
func (w *MegatronWriter) sequence(tokens []int64) error {
	d := len(w.docs)
	if len(w.lengths) >= math.MaxInt32 {
		return fmt.Errorf("%s: document %d: more than %d sequences, the most an index holds", w.op, d, math.MaxInt32)
	}
	if len(tokens) > math.MaxInt32 {
		return fmt.Errorf("%s: document %d: %d tokens, more than a sequence holds", w.op, d, len(tokens))
	}
	es := w.dtype.Size()
	for start := 0; start < len(tokens); start += 1 << 14 {
		part := tokens[start:min(start+1<<14, len(tokens))]
		b := w.scratch[:0]
		for i, v := range part {
			var fits bool
			switch w.dtype {
			case collate.Uint8:
				fits = v >= 0 && v <= math.MaxUint8
				b = append(b, byte(v))
			case collate.Int8:
				fits = v >= math.MinInt8 && v <= math.MaxInt8
				b = append(b, byte(v))
			case collate.Int16:
				fits = v >= math.MinInt16 && v <= math.MaxInt16
				b = binary.LittleEndian.AppendUint16(b, uint16(v))
			case collate.Uint16:
				fits = v >= 0 && v <= math.MaxUint16
				b = binary.LittleEndian.AppendUint16(b, uint16(v))
			case collate.Int32:
				fits = v >= math.MinInt32 && v <= math.MaxInt32
				b = binary.LittleEndian.AppendUint32(b, uint32(v))
			case collate.Int64:
				fits = true
				b = binary.LittleEndian.AppendUint64(b, uint64(v))
			}
			if !fits {
				return fmt.Errorf("%s: document %d, token %d: %d does not fit %v", w.op, d, start+i, v, w.dtype)
			}
		}
		w.scratch = b
		if _, err := w.buf.Write(b); err != nil {
			return fmt.Errorf("%s: %w", w.op, err)
		}
	}
	w.lengths = append(w.lengths, int32(len(tokens)))
	w.tokens += int64(len(tokens))
	w.size += int64(len(tokens) * es)
	return nil
}

// Close finishes the .bin, writes the .idx, and renames both into place
// (the .bin first): then prefix.idx and prefix.bin are the corpus
// written. On an error, earlier or now, it removes the temporary files
// and returns the error. Close after Close or Abort does nothing.
func (w *MegatronWriter) Close() error {
	if w.done {
		return w.err
	}
	err := w.err
	if err == nil {
		err = w.finish()
	}
	if err != nil {
		w.Abort()
		w.err = err
		return err
	}
	w.done = true
	return nil
}

// finish writes the files and renames them into place.
func (w *MegatronWriter) finish() error {
	binTmp := w.bin.Name()
	err := w.buf.Flush()
	if err == nil {
		err = w.bin.Sync()
	}
	if cerr := w.bin.Close(); err == nil {
		err = cerr
	}
	w.bin = nil // Abort no longer removes it: from here, finish does
	if err != nil {
		os.Remove(binTmp)
		return fmt.Errorf("%s: %s: %w", w.op, binTmp, err)
	}
	if err := targetsAreFiles(w.op, w.prefix); err != nil {
		os.Remove(binTmp)
		return err
	}
	idxTmp, err := w.writeIndex()
	if err != nil {
		os.Remove(binTmp)
		return err
	}
	// The .bin first: a reader opens the .idx, and checks it against the
	// .bin's size. Should the .idx not follow, the .bin renamed goes too:
	// no PREFIX.bin of this writer stays without its PREFIX.idx.
	renamed := false
	for _, f := range [][2]string{{binTmp, w.prefix + ".bin"}, {idxTmp, w.prefix + ".idx"}} {
		err := os.Chmod(f[0], 0o644)
		if err == nil {
			err = os.Rename(f[0], f[1])
		}
		if err != nil {
			os.Remove(idxTmp)
			if renamed {
				os.Remove(w.prefix + ".bin")
			} else {
				os.Remove(binTmp)
			}
			return fmt.Errorf("%s: %w", w.op, err)
		}
		renamed = true
	}
	return nil
}

// targetsAreFiles returns an error where prefix.idx or prefix.bin is a
// folder, which the files written could not replace.
func targetsAreFiles(op, prefix string) error {
	for _, ext := range []string{".idx", ".bin"} {
		if fi, err := os.Stat(prefix + ext); err == nil && fi.IsDir() {
			return fmt.Errorf("%s: %s is a folder, not a file that the corpus may replace", op, prefix+ext)
		}
	}
	return nil
}

// writeIndex writes the .idx to a temporary file and returns its name:
// the header, the sequence lengths, their pointers (the running sum of
// the lengths in bytes) and the document indices.
func (w *MegatronWriter) writeIndex() (string, error) {
	dir, base := filepath.Split(w.prefix)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".idx.tmp-*")
	if err != nil {
		return "", fmt.Errorf("%s: %w", w.op, err)
	}
	name := f.Name()
	b := bufio.NewWriterSize(f, 1<<20)
	var n [8]byte
	u64 := func(v uint64) { binary.LittleEndian.PutUint64(n[:], v); b.Write(n[:]) }
	b.Write(megatronMagic)
	u64(1)
	b.WriteByte(w.code)
	u64(uint64(len(w.lengths)))
	u64(uint64(len(w.docs) + 1))
	for _, l := range w.lengths {
		binary.LittleEndian.PutUint32(n[:4], uint32(l))
		b.Write(n[:4])
	}
	var p uint64
	es := uint64(w.dtype.Size())
	for _, l := range w.lengths {
		u64(p)
		p += uint64(l) * es
	}
	u64(0)
	for _, d := range w.docs {
		u64(uint64(d))
	}
	err = b.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("%s: %s: %w", w.op, name, err)
	}
	return name, nil
}

// Abort removes the temporary files and ends the writer: nothing of it
// remains, and no prefix.idx or prefix.bin is written. Abort after Close
// does nothing.
func (w *MegatronWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	if w.err == nil {
		w.err = fmt.Errorf("%s: %s: aborted", w.op, w.prefix)
	}
	if w.bin == nil {
		return nil
	}
	name := w.bin.Name()
	w.bin.Close()
	w.bin = nil
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", w.op, err)
	}
	return nil
}

// MegatronIndex is the .idx of a Megatron-LM indexed dataset, read and
// checked against its .bin (ReadMegatronIndex): enough to count and
// measure a corpus, and to find the tokens of any sequence, with no
// SeqLength and no sampling.
type MegatronIndex struct {
	// DType is the type of the tokens in the .bin.
	DType collate.DType
	// Lengths holds the tokens of each sequence.
	Lengths []int32
	// Pointers holds the byte offset of each sequence in the .bin.
	Pointers []int64
	// Documents holds the sequence where each document starts, then the
	// sequence count: document d is sequences [Documents[d],
	// Documents[d+1]).
	Documents []int64
	// BinSize is the size of the .bin in bytes.
	BinSize int64
}

// ReadMegatronIndex reads prefix.idx, checked as Megatron opens it
// (every count and pointer against the bytes of prefix.idx and
// prefix.bin).
func ReadMegatronIndex(prefix string) (*MegatronIndex, error) {
	bin, err := regfile.Open(prefix + ".bin")
	if err != nil {
		return nil, fmt.Errorf("corpus: ReadMegatronIndex: %w", err)
	}
	fi, err := bin.Stat()
	bin.Close()
	if err != nil {
		return nil, fmt.Errorf("corpus: ReadMegatronIndex: %w", err)
	}
	data, err := readMegatronIndexFile(prefix + ".idx")
	if err != nil {
		return nil, fmt.Errorf("corpus: ReadMegatronIndex: %w", err)
	}
	x, err := parseMegatronIndex(prefix+".idx", data, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("corpus: ReadMegatronIndex: %w", err)
	}
	return &MegatronIndex{DType: x.dtype, Lengths: x.lengths, Pointers: x.pointers, Documents: x.docs, BinSize: fi.Size()}, nil
}
