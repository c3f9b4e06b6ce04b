package corpus

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// TokenConfig configures a token-sequence dataset (Tokens).
type TokenConfig struct {
	// Context is the tokens a model sees per sample (nanoGPT's
	// block_size): each sample is a sequence of Context+1 consecutive
	// tokens, the inputs [0, Context) and the targets [1, Context+1).
	Context int
	// DType is the file's element type, little-endian: collate.Uint16
	// (nanoGPT's .bin files) or collate.Uint32; 0 means Uint16.
	DType collate.DType
	// Out is the field's element type: 0 means DType, and each sequence is
	// copied as is; collate.Int32 or collate.Int64 widen the tokens while
	// copying (nanoGPT's astype(np.int64)); a uint32 token that Int32
	// cannot hold is an error naming it.
	Out collate.DType
	// Field names the schema's one field, of shape [Context+1]; "" means
	// "tokens".
	Field string
	// Random starts each sequence at a token drawn from the sample's RNG
	// (Slot.Rand), uniformly over every start, so that the sequences differ
	// from epoch to epoch, as nanoGPT's get_batch draws them. Otherwise
	// sequence i starts at token i×Stride.
	Random bool
	// Stride is the tokens between the starts of sequential sequences; 0
	// means Context, so that the last target of a sequence is the first
	// input of the next.
	Stride int
	// Sequences is the samples of an epoch with Random; 0 means as many as
	// there are sequential sequences, (tokens-1)/Context.
	Sequences int
}

// TokenDataset is a map-style engine.Dataset of sequences of a flat token
// file: the tokens alone, with no header, as nanoGPT's prepare.py writes
// them (np.uint16 ... tofile). The file is memory-mapped where the OS
// allows (unix) and read with ReadAt elsewhere, and each sequence is copied
// straight from the file's pages into its place in the batch, the only
// copy. It is safe for concurrent Fills; Close it after the loaders that
// use it. A sequence is one memcpy, so one goroutine keeps up with most
// training steps: Workers 0 loads it fastest where the workers and the
// consumer would share few CPUs (BenchmarkTokens compares each Workers
// setting with a bare copy loop).
type TokenDataset struct {
	path   string
	cfg    TokenConfig
	file   tokenFile
	ntok   int64
	n      int
	schema collate.Schema
	fp     engine.Fingerprint
	closed atomic.Bool
}

// tokenFile is the file's bytes: mapped, or read on demand.
type tokenFile interface {
	// view returns bytes [off, off+n) of the mapping, or nil when the
	// file is not mapped.
	view(off, n int64) []byte
	readAt(p []byte, off int64) error
	// contains reports whether addr is inside the mapping.
	contains(addr uintptr) bool
	// size returns the file's size now.
	size() (int64, error)
	close() error
}

// Tokens opens the token file path as sequences configured by cfg.
func Tokens(path string, cfg TokenConfig) (*TokenDataset, error) {
	if cfg.DType == 0 {
		cfg.DType = collate.Uint16
	}
	if cfg.Out == 0 {
		cfg.Out = cfg.DType
	}
	if cfg.Field == "" {
		cfg.Field = "tokens"
	}
	if cfg.Stride == 0 {
		cfg.Stride = cfg.Context
	}
	switch {
	case cfg.Context <= 0:
		return nil, fmt.Errorf("corpus: Tokens: TokenConfig.Context %d, want > 0", cfg.Context)
	case cfg.DType != collate.Uint16 && cfg.DType != collate.Uint32:
		return nil, fmt.Errorf("corpus: Tokens: TokenConfig.DType %v, want uint16 or uint32", cfg.DType)
	case cfg.Out != cfg.DType && cfg.Out != collate.Int32 && cfg.Out != collate.Int64:
		return nil, fmt.Errorf("corpus: Tokens: TokenConfig.Out %v, want %v (the file's), int32 or int64", cfg.Out, cfg.DType)
	case cfg.Stride < 0:
		return nil, fmt.Errorf("corpus: Tokens: TokenConfig.Stride %d, want > 0", cfg.Stride)
	case cfg.Sequences < 0:
		return nil, fmt.Errorf("corpus: Tokens: TokenConfig.Sequences %d, want >= 0", cfg.Sequences)
	case cfg.Sequences > 0 && !cfg.Random:
		return nil, fmt.Errorf("corpus: Tokens: TokenConfig.Sequences set without Random")
	}
	f, size, err := openTokenFile(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: Tokens: %w", err)
	}
	opened := false
	defer func() {
		if !opened {
			f.close()
		}
	}()
	es := int64(cfg.DType.Size())
	if size%es != 0 {
		return nil, fmt.Errorf("corpus: Tokens: %s: %d bytes, not a whole number of %v tokens", path, size, cfg.DType)
	}
	ntok, sequence := size/es, int64(cfg.Context)+1
	if ntok < sequence {
		return nil, fmt.Errorf("corpus: Tokens: %s: %d tokens, fewer than one sequence of Context+1 = %d", path, ntok, sequence)
	}
	n := (ntok-sequence)/int64(cfg.Stride) + 1
	if cfg.Random {
		n = (ntok - 1) / int64(cfg.Context)
		if cfg.Sequences > 0 {
			n = int64(cfg.Sequences)
		}
	}
	if n > 1<<40 {
		return nil, fmt.Errorf("corpus: Tokens: %s: %d sequences, too many", path, n)
	}
	id, err := fileIdentity(f, size)
	if err != nil {
		return nil, fmt.Errorf("corpus: Tokens: %s: %w", path, err)
	}
	fp := engine.Fingerprint{"tokens.file": id, "tokens.dtype": cfg.DType.String(), "tokens.out": cfg.Out.String(),
		"tokens.context": strconv.Itoa(cfg.Context), "tokens.random": strconv.FormatBool(cfg.Random)}
	if !cfg.Random {
		fp["tokens.stride"] = strconv.Itoa(cfg.Stride)
	}
	opened = true
	return &TokenDataset{
		path: path, cfg: cfg, file: f, ntok: ntok, n: int(n), fp: fp,
		schema: collate.Schema{{Name: cfg.Field, DType: cfg.Out, Shape: []int{cfg.Context + 1}}},
	}, nil
}

// Fingerprint returns what determines the dataset's sequences besides
// Len and Schema (engine.Fingerprinter), so that a loader's State is
// refused for another file or configuration:
//
//   - tokens.file: the file's identity, its size and a hash of its
//     content (engine.FingerprintData: all of it up to 256 KiB, else 64
//     blocks of 4 KiB spread evenly over it), taken when it is opened.
//     No path and no time: the same file copied to another folder or
//     machine keeps it;
//   - tokens.dtype, tokens.out and tokens.context;
//   - tokens.random, and tokens.stride for sequential sequences (Random
//     draws each start from the sample's RNG, which the loader's seed,
//     kept in the State, decides).
//
// The limit: a file of more than 256 KiB edited in place between the
// sampled blocks, its size kept, is not told apart.
func (d *TokenDataset) Fingerprint() engine.Fingerprint { return maps.Clone(d.fp) }

// fileIdentity is engine.FingerprintData of the size bytes of f, read
// from its mapping (guarded: a file cut short while it is read is an
// error) or with ReadAt.
func fileIdentity(f tokenFile, size int64) (id string, err error) {
	err = guardMapped(f, func() error {
		var err error
		id, err = engine.FingerprintData(tokenReader{f}, size)
		return err
	})
	if _, ok := err.(fault); ok {
		return "", fmt.Errorf("its identity: the file was cut short while it was read (%v)", err)
	}
	if err != nil {
		return "", fmt.Errorf("its identity: %w", err)
	}
	return id, nil
}

// tokenReader is an io.ReaderAt of a tokenFile.
type tokenReader struct{ f tokenFile }

func (r tokenReader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.f.readAt(p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Len returns the sequences of an epoch.
func (d *TokenDataset) Len() int { return d.n }

// Schema returns the one field, [Context+1] tokens of TokenConfig.Out.
func (d *TokenDataset) Schema() collate.Schema { return d.schema }

// NumTokens returns the tokens in the file.
func (d *TokenDataset) NumTokens() int64 { return d.ntok }

// Start returns the first token of the sequence that sample s gets: drawn
// from s.Rand with Random (this consumes the draw), else
// s.Index()×Stride.
func (d *TokenDataset) Start(s *engine.Slot) int64 {
	if d.cfg.Random {
		return s.Rand().Int64N(d.ntok - int64(d.cfg.Context))
	}
	return int64(s.Index()) * int64(d.cfg.Stride)
}

// randomStart is Start with Random for the sample whose RNG words are
// s0, s1.
func (d *TokenDataset) randomStart(s0, s1 uint64) int64 {
	return rand.New(rand.NewPCG(s0, s1)).Int64N(d.ntok - int64(d.cfg.Context))
}

// WritesEveryByte reports true: a sequence fills its row
// (engine.FullWriter, so the loader does not zero the batch first).
func (d *TokenDataset) WritesEveryByte() bool { return true }

// FillBatch writes the sequences of a whole batch, one loop of copies: the
// same bytes as a Fill a sample, without the loader's per-sample work,
// which costs as much as a sequence's copy. Where the file is mapped, a
// sequence costs its start and its copy alone, less than going through
// sequence (BenchmarkTokens).
func (d *TokenDataset) FillBatch(_ context.Context, b *engine.BatchSlot) error {
	if d.closed.Load() {
		return fmt.Errorf("corpus: Tokens: %s: closed", d.path)
	}
	dst := b.Tensor(d.cfg.Field).Bytes()
	row := len(dst) / max(len(b.Indices()), 1)
	es := int64(d.cfg.DType.Size())
	all := d.file.view(0, d.ntok*es) // nil when the file is not mapped
	var i, index int                 // the sequence being copied
	var start int64
	fail := func(err error) error {
		return &engine.SampleError{Index: index, Epoch: b.Epoch(), Worker: -1, Err: err}
	}
	inFile := true // every sequence read from the mapping ended inside the file
	err := guardMapped(d.file, func() error {
		for i, index = range b.Indices() {
			if index < 0 || index >= d.n {
				return fail(d.inRange(index))
			}
			start = int64(index) * int64(d.cfg.Stride)
			if d.cfg.Random {
				start = d.randomStart(b.Seed(i))
			}
			out := dst[i*row : (i+1)*row]
			var err error
			if end := (start + int64(d.cfg.Context) + 1) * es; all != nil && start >= 0 && end <= int64(len(all)) {
				err = d.convert(out, all[start*es:end], start)
				inFile = inFile && endsInFile(all, end)
			} else {
				err = d.sequence(out, index, start) // read from the file, or an error
			}
			if err != nil {
				return fail(err)
			}
		}
		return nil
	})
	if f, ok := err.(fault); ok {
		return fail(d.cut(index, start, f))
	}
	if err != nil || all == nil || inFile {
		return err
	}
	// A sequence ended on zeros, which a file cut inside a page also reads
	// past its end, with no fault: the file's size tells.
	size, err := d.file.size()
	if err != nil || size >= int64(len(all)) {
		return err
	}
	for i, index = range b.Indices() {
		start = int64(index) * int64(d.cfg.Stride)
		if d.cfg.Random {
			start = d.randomStart(b.Seed(i))
		}
		if (start+int64(d.cfg.Context)+1)*es > size {
			return fail(d.cut(index, start, fault{}))
		}
	}
	return nil
}

// fault is a fault of a read of the file's mapping at addr: the file was
// cut short while mapped (SIGBUS).
type fault struct{ addr uintptr }

func (f fault) Error() string { return fmt.Sprintf("fault at address %#x", f.addr) }

// guardMapped runs f, which reads the mapping of file, and returns a
// fault of those reads as an error rather than crashing the process: a
// mapped file cut short (truncated, or rewritten shorter) faults on the
// pages past its new end. debug.SetPanicOnFault is per goroutine:
// guardMapped sets it on the goroutine that reads, for the time of f only.
func guardMapped(file tokenFile, f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if e, ok := r.(interface{ Addr() uintptr }); ok && file.contains(e.Addr()) {
			err = fault{e.Addr()}
			return
		}
		panic(r) // not a read of the mapping: not ours to turn into an error
	}()
	return f()
}

// tailProbe bounds the bytes that endsInFile looks at.
const tailProbe = 16

// pageMask is the OS page size less one.
var pageMask = os.Getpagesize() - 1

// endsInFile reports whether a read of the mapping all (of a file from
// its byte 0, so page-aligned), up to byte end, that did not fault was
// certainly inside the file, with no system call: true if a byte at or
// after end-1, on the same page and at most tailProbe bytes on, is not
// zero. A file cut short while mapped faults on the pages wholly past
// its new end and reads zeros on the rest of the page that holds it (as
// POSIX requires of mmap and Linux does on truncate), so a nonzero byte
// there is before the end. False (zero tokens, or a cut) means: ask the
// file's size. Call it where a fault is guarded (guardMapped): the probe
// reads the mapping too.
func endsInFile(all []byte, end int64) bool {
	if end <= 0 {
		return true
	}
	last := int(end - 1)
	stop := min(len(all), last|pageMask+1, last+tailProbe)
	for _, c := range all[last:stop] {
		if c != 0 {
			return true
		}
	}
	return false
}

// cut is the error of sequence index, from token start, which the file no
// longer holds.
func (d *TokenDataset) cut(index int, start int64, f fault) error {
	es := int64(d.cfg.DType.Size())
	now := "cannot be read"
	if size, err := d.file.size(); err == nil {
		now = fmt.Sprintf("is %d bytes", size)
	}
	msg := fmt.Sprintf("corpus: Tokens: %s: sequence %d (tokens %d to %d, bytes %d to %d): the file %s, %d when opened: it was cut short or rewritten while mapped",
		d.path, index, start, start+int64(d.cfg.Context)+1, start*es, (start+int64(d.cfg.Context)+1)*es, now, d.ntok*es)
	if f.addr != 0 {
		msg += " (" + f.Error() + ")"
	}
	return errors.New(msg)
}

// Fill writes the sequence of sample s.Index() into its slot. An index
// outside [0, Len) is an error, also with Random, whose starts do not
// depend on it.
func (d *TokenDataset) Fill(_ context.Context, s *engine.Slot) error {
	if err := d.inRange(s.Index()); err != nil {
		return err
	}
	return d.sequence(s.TensorAt(0).Bytes(), s.Index(), d.Start(s)) // the schema's one field
}

// inRange is the error of an index outside [0, Len), nil inside.
func (d *TokenDataset) inRange(index int) error {
	if index < 0 || index >= d.n {
		return fmt.Errorf("corpus: Tokens: %s: index %d, want [0, %d)", d.path, index, d.n)
	}
	return nil
}

// sequence writes sequence index, from token start, into dst.
func (d *TokenDataset) sequence(dst []byte, index int, start int64) error {
	if d.closed.Load() {
		return fmt.Errorf("corpus: Tokens: %s: closed", d.path)
	}
	if start < 0 || start+int64(d.cfg.Context)+1 > d.ntok {
		return fmt.Errorf("corpus: Tokens: %s: sequence %d starts at token %d, past the end (%d tokens)", d.path, index, start, d.ntok)
	}
	es := int64(d.cfg.DType.Size())
	off, nbytes := start*es, (int64(d.cfg.Context)+1)*es
	if src := d.file.view(off, nbytes); src != nil {
		all := d.file.view(0, d.ntok*es)
		inFile := false
		err := guardMapped(d.file, func() error {
			err := d.convert(dst, src, start)
			inFile = endsInFile(all, off+nbytes)
			return err
		})
		if f, ok := err.(fault); ok {
			return d.cut(index, start, f)
		}
		if err != nil || inFile {
			return err
		}
		if size, err := d.file.size(); err != nil || size < off+nbytes {
			return d.cut(index, start, fault{}) // cut inside a page: zeros, no fault
		}
		return nil
	}
	if d.cfg.Out == d.cfg.DType && littleEndian {
		if err := d.file.readAt(dst, off); err != nil {
			return fmt.Errorf("corpus: Tokens: %s: sequence at token %d: %w", d.path, start, err)
		}
		return nil
	}
	buf := make([]byte, nbytes)
	if err := d.file.readAt(buf, off); err != nil {
		return fmt.Errorf("corpus: Tokens: %s: sequence at token %d: %w", d.path, start, err)
	}
	return d.convert(dst, buf, start)
}

// convert writes the sequence src, from token start, into dst as
// TokenConfig.Out; a uint32 token that Out cannot hold is an error.
func (d *TokenDataset) convert(dst, src []byte, start int64) error {
	convertTokens(dst, src, d.cfg.DType, d.cfg.Out)
	if d.cfg.DType != collate.Uint32 || d.cfg.Out != collate.Int32 {
		return nil
	}
	for i := 0; i < len(src); i += 4 {
		if v := binary.LittleEndian.Uint32(src[i:]); v > math.MaxInt32 {
			return fmt.Errorf("corpus: Tokens: %s: token %d is %d, more than int32 (TokenConfig.Out) holds: is the file's DType right?", d.path, start+int64(i/4), v)
		}
	}
	return nil
}

// Close unmaps and closes the file. Fills must not run during or after
// it.
func (d *TokenDataset) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	return d.file.close()
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// convertTokens writes the little-endian tokens src, of type from, into
// dst as type to, in native byte order.
func convertTokens(dst, src []byte, from, to collate.DType) {
	if from == to && littleEndian {
		if n := min(len(dst), len(src)); n > 0 {
			moveSpans(dst, src, []byteSpan{{0, int64(n)}})
		}
		return
	}
	if from == collate.Uint16 {
		convertFrom(dst, src, to, binary.LittleEndian.Uint16)
	} else {
		convertFrom(dst, src, to, binary.LittleEndian.Uint32)
	}
}

// convertFrom is convertTokens from tokens of type S; get reads one
// little-endian token (the big-endian path).
func convertFrom[S uint16 | uint32](dst, src []byte, to collate.DType, get func([]byte) S) {
	size := int(unsafe.Sizeof(S(0)))
	n := len(src) / size
	if !littleEndian {
		for i := range n {
			put(dst, i, uint64(get(src[size*i:])), to)
		}
		return
	}
	in := unsafe.Slice((*S)(unsafe.Pointer(unsafe.SliceData(src))), n)
	switch to {
	case collate.Int64:
		widen(unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(dst))), n), in)
	case collate.Int32:
		widen(unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(dst))), n), in)
	}
}

func widen[D int32 | int64, S uint8 | int8 | int16 | uint16 | int32 | uint32](dst []D, src []S) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = D(v)
	}
}

// put stores v as element i of dst, of type to, in native byte order
// (the big-endian path).
func put(dst []byte, i int, v uint64, to collate.DType) {
	switch to {
	case collate.Uint16:
		binary.NativeEndian.PutUint16(dst[2*i:], uint16(v))
	case collate.Uint32, collate.Int32:
		binary.NativeEndian.PutUint32(dst[4*i:], uint32(v))
	case collate.Int64:
		binary.NativeEndian.PutUint64(dst[8*i:], v)
	}
}

// readAtFile reads a token file with ReadAt: the fallback where it is not
// memory-mapped.
type readAtFile struct{ f *os.File }

func (r readAtFile) view(int64, int64) []byte { return nil }

func (r readAtFile) readAt(p []byte, off int64) error {
	_, err := r.f.ReadAt(p, off)
	return err
}

func (r readAtFile) contains(uintptr) bool { return false }

func (r readAtFile) size() (int64, error) {
	fi, err := r.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (r readAtFile) close() error { return r.f.Close() }
