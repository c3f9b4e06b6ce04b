package corpus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// MegatronConfig configures a Megatron-LM / NeMo indexed dataset
// (Megatron).
type MegatronConfig struct {
	// SeqLength is Megatron's sequence_length: each sample is
	// SeqLength+1 consecutive tokens of the concatenated documents (its
	// add_extra_token_to_sequence), the inputs [0, SeqLength) and the
	// labels [1, SeqLength+1); the last token of a sample is the first of
	// the next.
	SeqLength int
	// Seed seeds the per-epoch document order and sample order. The
	// loader's Config.Seed is a different seed, for its own sampler.
	Seed uint64
	// Out is the field's element type: 0 means the .bin's own (uint8,
	// int8, int16, uint16, int32 or int64) and each run of tokens is
	// copied as is; collate.Int32 or collate.Int64 widen the tokens while
	// copying (Megatron's .long()); an int64 token that Int32 cannot hold
	// is an error naming it.
	Out collate.DType
	// Field names the schema's one field, of shape [SeqLength+1]; ""
	// means "tokens".
	Field string
}

// MegatronDataset is a map-style engine.Dataset over a Megatron-LM
// indexed dataset (the prefix.idx and prefix.bin that Megatron's
// preprocess_data.py and NeMo write), serving samples as Megatron's
// GPTDataset builds them for one epoch of the documents:
//
//   - the document order: every document (Megatron's GPTDataset calls a
//     sequence of the .idx a document; preprocess_data writes one per
//     document) once, shuffled;
//   - the sample index (Megatron's helpers.cpp build_sample_idx, with
//     add_extra_token_to_sequence and drop_last_partial_sequence): the
//     documents in that order as one stream of tokens, cut every
//     SeqLength tokens into (position in the order, offset) pairs, sample
//     k being the SeqLength+1 tokens from pair k, so that it shares its
//     last token with sample k+1; (tokens-1)/SeqLength samples;
//   - the sample order (shuffle_idx): a permutation of the samples, so
//     that Fill of index i writes sample shuffle[i].
//
// The file format, the sample construction and the tokens of sample k
// given the same document order are Megatron's. The orders are not:
// one math/rand/v2 PCG stream seeded from (MegatronConfig.Seed, epoch)
// shuffles the documents and then the samples, where Megatron shuffles
// with numpy's RandomState(seed), and each loader epoch is a fresh
// shuffle of one pass over the documents, where Megatron shuffles
// num_epochs passes together once. The same Seed gives the same samples
// on every machine, for any Workers, and a loader resumes from its State
// as for any map-style dataset. Leave the loader's Config.Shuffle off:
// the samples are already shuffled.
//
// The .bin is memory-mapped where the OS allows (unix) and read with
// ReadAt elsewhere; the .idx is read and checked once, at open, against
// both files' sizes. It is safe for concurrent Fills; Close it after the
// loaders that use it. The first Fill of an epoch starts building the next
// epoch's order on a goroutine of its own, which Close stops.
type MegatronDataset struct {
	prefix  string
	cfg     MegatronConfig
	idx     *megatronIndex
	bin     tokenFile
	all     []byte // the .bin's mapping; nil when it is read with ReadAt
	binSize int64
	ntok    int64 // tokens in all sequences
	n       int   // samples an epoch
	schema  collate.Schema
	fp      engine.Fingerprint
	closed  atomic.Bool

	mu       sync.Mutex
	epochs   map[int]*megatronEpoch // at most two, the latest built
	building sync.WaitGroup         // the builds ahead
}

// MegatronOrder is one epoch's indices, as Megatron's GPTDataset keeps
// them (its document_index, sample_index and shuffle_index).
type MegatronOrder struct {
	// Documents is the epoch's document order: sequence numbers of the
	// .idx.
	Documents []int32
	// Samples holds Len()+1 (position in Documents, token offset) pairs,
	// flat: sample k starts at token Samples[2k+1] of document
	// Documents[Samples[2k]].
	Samples []int64
	// Shuffle maps a dataset index to a sample: Fill of index i writes
	// sample Shuffle[i].
	Shuffle []int64
}

// megatronEpoch is one epoch's order, and the same again laid out for
// Fill: the runs of tokens that each sample copies, in dataset order, so
// that a batch of consecutive indices reads them in one sequential sweep
// where the order's own indices take four dependent reads at random
// (Shuffle, Samples, Documents, then the .idx's lengths and pointers)
// and a branch a document. The build pays those reads once, ahead of the
// epoch (use); the runs take 16 bytes each, about one a document plus
// one a sample.
type megatronEpoch struct {
	once  sync.Once
	order MegatronOrder
	err   error
	next  atomic.Bool // the next epoch's build has started (use)
	// first[i] is the first run of the sample of index i, and first[i+1]
	// one past its last; Len()+1 entries.
	first []int64
	// runs are the runs of tokens of the samples, as bytes of the .bin:
	// a sample's, in turn, fill its row (when Out is the .bin's type).
	runs []byteSpan
}

// megatronIndex is the parsed .idx file.
type megatronIndex struct {
	dtype    collate.DType // of the tokens
	lengths  []int32       // tokens per sequence
	pointers []int64       // byte offset of each sequence in the .bin
	docs     []int64       // sequence indices where documents start, then the count
}

// megatronMagic opens every .idx file.
var megatronMagic = []byte("MMIDIDX\x00\x00")

// megatronDTypes maps the .idx dtype codes to collate's types; codes 6
// and 7 (float64, float32) are not token ids.
var megatronDTypes = map[uint8]collate.DType{
	1: collate.Uint8, 2: collate.Int8, 3: collate.Int16, 4: collate.Int32,
	5: collate.Int64, 8: collate.Uint16,
}

// megatronCode is the .idx dtype code of each token type.
func megatronCode(dt collate.DType) (uint8, bool) {
	for c, t := range megatronDTypes {
		if t == dt {
			return c, true
		}
	}
	return 0, false
}

// megatronHeaderBytes is a Megatron .idx's header: its magic, version,
// dtype code and the sequence and document counts.
const megatronHeaderBytes = 9 + 8 + 1 + 8 + 8

// megatronHeader checks the header at the start of head, a .idx of size
// bytes, and returns its dtype and counts: the counts must fill the file
// exactly (see parseMegatronIndex), so that its size is checked before
// the rest is read.
func megatronHeader(name string, head []byte, size int64) (dt collate.DType, nseq, ndoc uint64, err error) {
	const header = megatronHeaderBytes
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s", name, field, fmt.Sprintf(format, args...))
	}
	if len(head) < header {
		if len(head) >= 9 && !bytes.Equal(head[:9], megatronMagic) {
			return 0, 0, 0, bad("magic", "%q, want %q (not a Megatron indexed dataset)", head[:9], megatronMagic)
		}
		return 0, 0, 0, bad("header", "%d bytes, want %d", size, header)
	}
	if !bytes.Equal(head[:9], megatronMagic) {
		return 0, 0, 0, bad("magic", "%q, want %q (not a Megatron indexed dataset)", head[:9], megatronMagic)
	}
	if v := binary.LittleEndian.Uint64(head[9:]); v != 1 {
		return 0, 0, 0, bad("version", "%d, want 1", v)
	}
	code := head[17]
	dt, ok := megatronDTypes[code]
	if !ok {
		what := "unknown"
		if code == 6 || code == 7 {
			what = "a float type, not token ids"
		}
		return 0, 0, 0, bad("dtype", "code %d (%s), want 1-5 or 8", code, what)
	}
	nseq = binary.LittleEndian.Uint64(head[18:])
	ndoc = binary.LittleEndian.Uint64(head[26:])
	rest := uint64(size - header)
	if nseq > rest/12 || nseq > math.MaxInt32 {
		return 0, 0, 0, bad("sequence count", "%d: the file holds %d bytes after the header, room for %d sequences", nseq, rest, rest/12)
	}
	if ndoc > (rest-12*nseq)/8 {
		return 0, 0, 0, bad("document count", "%d: the file holds %d bytes after the sequences, room for %d", ndoc, rest-12*nseq, (rest-12*nseq)/8)
	}
	if ndoc == 0 {
		return 0, 0, 0, bad("document count", "0, want at least 1 (the document indices start with 0)")
	}
	// The tables end the file; a multimodal index (Megatron's
	// multimodal=True) follows them with a byte a sequence, its modes.
	if after := rest - 12*nseq; after != 8*ndoc && after != 8*ndoc+nseq {
		return 0, 0, 0, bad("document count", "%d: the file holds %d bytes after the sequences, want %d (or %d with a multimodal index's sequence modes)", ndoc, after, 8*ndoc, 8*ndoc+nseq)
	}
	return dt, nseq, ndoc, nil
}

// readMegatronIndexFile reads the .idx at path whole, once its header
// has been checked against its size: a file whose counts do not fill it
// is refused before the rest of it is read.
func readMegatronIndexFile(path string) ([]byte, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	head := make([]byte, megatronHeaderBytes)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, _, _, err := megatronHeader(path, head[:n], fi.Size()); err != nil {
		return nil, err
	}
	return regfile.ReadFile(path, min(fi.Size(), maxMegatronIndexBytes))
}

// parseMegatronIndex parses the .idx bytes data of file name, checking
// every count against len(data) and every sequence against a .bin of
// binSize bytes before using it, and the invariants of Megatron's format:
// the tables fill the file (a multimodal index adds a byte a sequence);
// the sequences lie back to back from the .bin's start to its end; the
// document indices run from 0 to the sequence count, never decreasing.
// An error names the file, the table and the entry.
func parseMegatronIndex(name string, data []byte, binSize int64) (*megatronIndex, error) {
	dt, nseq, ndoc, err := megatronHeader(name, data, int64(len(data)))
	if err != nil {
		return nil, err
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s", name, field, fmt.Sprintf(format, args...))
	}
	const header = megatronHeaderBytes
	es := int64(dt.Size())
	x := &megatronIndex{dtype: dt, lengths: make([]int32, nseq), pointers: make([]int64, nseq), docs: make([]int64, ndoc)}
	off := header
	for i := range x.lengths {
		x.lengths[i] = int32(binary.LittleEndian.Uint32(data[off+4*i:]))
		if x.lengths[i] < 0 {
			return nil, bad("sequence lengths", "sequence %d has length %d", i, x.lengths[i])
		}
	}
	off += 4 * int(nseq)
	// The .bin holds the sequences back to back, as Megatron's writer
	// puts them (its pointers are the lengths' running sum), and nothing
	// else: a pointer is where the sequence before it ends.
	var end int64 // where sequence i-1 ends
	for i := range x.pointers {
		p := int64(binary.LittleEndian.Uint64(data[off+8*i:]))
		x.pointers[i] = p
		n := int64(x.lengths[i]) * es
		if p < 0 || p > binSize || n > binSize-p {
			return nil, bad("sequence pointers", "sequence %d at byte %d, %d tokens (%d bytes): past the end of the .bin (%d bytes)", i, p, x.lengths[i], n, binSize)
		}
		if p%es != 0 {
			return nil, bad("sequence pointers", "sequence %d at byte %d, not a multiple of the %v token size", i, p, dt)
		}
		if p != end && i == 0 {
			return nil, bad("sequence pointers", "sequence 0 at byte %d, want 0 (the .bin holds the sequences back to back from its start)", p)
		}
		if p != end {
			return nil, bad("sequence pointers", "sequence %d at byte %d, want %d, where sequence %d ends", i, p, end, i-1)
		}
		end = p + n
	}
	if end != binSize {
		return nil, bad("sequence pointers", "the last sequence ends at byte %d, but the .bin holds %d bytes (a .bin written for another .idx?)", end, binSize)
	}
	off += 8 * int(nseq)
	for i := range x.docs {
		v := int64(binary.LittleEndian.Uint64(data[off+8*i:]))
		x.docs[i] = v
		switch {
		case i == 0 && v != 0:
			return nil, bad("document indices", "the first is %d, want 0", v)
		case v < 0 || uint64(v) > nseq:
			return nil, bad("document indices", "entry %d is %d, outside the %d sequences", i, v, nseq)
		case i > 0 && v < x.docs[i-1]:
			return nil, bad("document indices", "entry %d is %d, less than entry %d (%d)", i, v, i-1, x.docs[i-1])
		}
	}
	if last := x.docs[ndoc-1]; uint64(last) != nseq {
		return nil, bad("document indices", "entry %d, the last, is %d, want %d (the sequence count)", ndoc-1, last, nseq)
	}
	return x, nil
}

// Megatron opens the indexed dataset prefix.idx and prefix.bin (prefix
// as Megatron's data_path / path_prefix, without the extension) as
// samples configured by cfg.
func Megatron(prefix string, cfg MegatronConfig) (*MegatronDataset, error) {
	if cfg.Field == "" {
		cfg.Field = "tokens"
	}
	if cfg.SeqLength <= 0 {
		return nil, fmt.Errorf("corpus: Megatron: MegatronConfig.SeqLength %d, want > 0", cfg.SeqLength)
	}
	idxPath, binPath := prefix+".idx", prefix+".bin"
	bin, binSize, err := openTokenFile(binPath)
	if err != nil {
		return nil, fmt.Errorf("corpus: Megatron: %w", err)
	}
	opened := false
	defer func() {
		if !opened {
			bin.close()
		}
	}()
	data, err := readMegatronIndexFile(idxPath)
	if err != nil {
		return nil, fmt.Errorf("corpus: Megatron: %w", err)
	}
	x, err := parseMegatronIndex(idxPath, data, binSize)
	if err != nil {
		return nil, fmt.Errorf("corpus: Megatron: %w", err)
	}
	if cfg.Out == 0 {
		cfg.Out = x.dtype
	}
	if cfg.Out != x.dtype && cfg.Out != collate.Int32 && cfg.Out != collate.Int64 {
		return nil, fmt.Errorf("corpus: Megatron: MegatronConfig.Out %v, want %v (the file's), int32 or int64", cfg.Out, x.dtype)
	}
	var ntok int64
	for _, n := range x.lengths {
		ntok += int64(n)
	}
	sequence := int64(cfg.SeqLength) + 1
	if ntok < sequence {
		return nil, fmt.Errorf("corpus: Megatron: %s: %d tokens, fewer than one sample of SeqLength+1 = %d", idxPath, ntok, sequence)
	}
	n := (ntok - 1) / int64(cfg.SeqLength)
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("corpus: Megatron: %s: %d samples an epoch, too many", idxPath, n)
	}
	binID, err := fileIdentity(bin, binSize)
	if err != nil {
		return nil, fmt.Errorf("corpus: Megatron: %s: %w", binPath, err)
	}
	opened = true
	return &MegatronDataset{
		prefix: prefix, cfg: cfg, idx: x, bin: bin, all: bin.view(0, binSize), binSize: binSize, ntok: ntok, n: int(n),
		schema: collate.Schema{{Name: cfg.Field, DType: cfg.Out, Shape: []int{cfg.SeqLength + 1}}},
		fp: engine.Fingerprint{"megatron.idx": wholeIdentity(data), "megatron.bin": binID,
			"megatron.seq_length": strconv.Itoa(cfg.SeqLength), "megatron.seed": strconv.FormatUint(cfg.Seed, 10),
			"megatron.out": cfg.Out.String()},
		epochs: map[int]*megatronEpoch{},
	}, nil
}

// Fingerprint returns what determines the dataset's samples besides Len
// and Schema (engine.Fingerprinter), so that a loader's State is refused
// for another corpus or configuration:
//
//   - megatron.idx: the .idx's size and a hash of all of its bytes (the
//     token type, every sequence's length and pointer, the document
//     indices), taken at open, where it is read whole anyway (SHA-256,
//     a pass linear in the .idx's size);
//   - megatron.bin: the .bin's identity, its size and a hash of its
//     content (engine.FingerprintData: all of it up to 256 KiB, else 64
//     blocks of 4 KiB spread evenly over it), taken at open;
//   - megatron.seq_length, megatron.seed and megatron.out.
//
// No path and no time: the same files copied to another folder or
// machine keep it. The limit: a .bin of more than 256 KiB edited in
// place between the sampled blocks, its size kept, with the same .idx,
// is not told apart.
func (d *MegatronDataset) Fingerprint() engine.Fingerprint { return maps.Clone(d.fp) }

// documentsFingerprint is the part of the Fingerprint that its documents
// depend on (ReadDocument): the files', not SeqLength, Seed or Out.
func (d *MegatronDataset) documentsFingerprint() engine.Fingerprint {
	return engine.Fingerprint{"megatron.idx": d.fp["megatron.idx"], "megatron.bin": d.fp["megatron.bin"]}
}

// wholeIdentity is "size:hash" of all of data, in the form of
// engine.FingerprintBytes, which hashes samples of data past 256 KiB.
func wholeIdentity(data []byte) string {
	sum := sha256.Sum256(data)
	return strconv.Itoa(len(data)) + ":" + hex.EncodeToString(sum[:8])
}

// Len returns the samples of an epoch: (tokens-1)/SeqLength.
func (d *MegatronDataset) Len() int { return d.n }

// Schema returns the one field, [SeqLength+1] tokens of
// MegatronConfig.Out.
func (d *MegatronDataset) Schema() collate.Schema { return d.schema }

// NumTokens returns the tokens in all the sequences.
func (d *MegatronDataset) NumTokens() int64 { return d.ntok }

// NumSequences returns the sequences of the .idx: the documents that
// the samples are cut from.
func (d *MegatronDataset) NumSequences() int { return len(d.idx.lengths) }

// DType returns the type of the tokens in the .bin.
func (d *MegatronDataset) DType() collate.DType { return d.idx.dtype }

// Order returns the indices of epoch, built on first use and shared:
// read them, never write them.
func (d *MegatronDataset) Order(epoch int) (MegatronOrder, error) {
	e, err := d.epoch(epoch)
	return e.order, err
}

// epoch returns epoch's order and tables, built on first use.
func (d *MegatronDataset) epoch(epoch int) (*megatronEpoch, error) {
	d.mu.Lock()
	e, _ := d.entry(epoch)
	d.mu.Unlock()
	e.once.Do(func() { e.err = d.build(e, epoch) })
	return e, e.err
}

// entry returns epoch's entry, made (not built) if there is none, and
// whether it was made. Called with d.mu held.
func (d *MegatronDataset) entry(epoch int) (e *megatronEpoch, made bool) {
	if e = d.epochs[epoch]; e != nil {
		return e, false
	}
	e = &megatronEpoch{}
	for len(d.epochs) >= 2 { // keep two: loaders run one epoch at a time
		far := epoch // of the others, the farthest from epoch
		for k := range d.epochs {
			if far == epoch || abs(k-epoch) > abs(far-epoch) {
				far = k
			}
		}
		delete(d.epochs, far)
	}
	d.epochs[epoch] = e
	return e, true
}

func abs(x int) int { return max(x, -x) }

// use returns epoch's tables for a Fill; the first Fill of an epoch
// starts building the next one's in the background (ahead), so that a
// loader going through the epochs in turn finds them built.
func (d *MegatronDataset) use(epoch int) (*megatronEpoch, error) {
	e, err := d.epoch(epoch)
	if err == nil && !e.next.Load() && !e.next.Swap(true) {
		d.ahead(epoch + 1)
	}
	return e, err
}

// ahead builds epoch's order and tables on a goroutine of their own,
// unless they are built or being built already; Close stops it (build
// looks between its steps) and waits for it.
func (d *MegatronDataset) ahead(epoch int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return
	}
	e, made := d.entry(epoch)
	if !made {
		return
	}
	d.building.Add(1)
	go func() {
		defer d.building.Done()
		if hook := megatronAhead.Load(); hook != nil {
			(*hook)(d, epoch)
		}
		e.once.Do(func() { e.err = d.build(e, epoch) })
	}()
}

// megatronAhead, when set (by tests), runs first on the goroutine of
// ahead.
var megatronAhead atomic.Pointer[func(d *MegatronDataset, epoch int)]

// stopped is the error of a build ahead that Close stopped between its
// steps, nil while the dataset is open.
func (d *MegatronDataset) stopped() error {
	if d.closed.Load() {
		return fmt.Errorf("corpus: Megatron: %s: closed", d.prefix)
	}
	return nil
}

// build makes epoch's order and its runs, into e.
func (d *MegatronDataset) build(e *megatronEpoch, epoch int) error {
	o, lengths, err := d.buildOrder(epoch)
	if err == nil {
		err = d.stopped()
	}
	if err != nil {
		return err
	}
	e.first, e.runs, err = d.sampleRuns(o, lengths)
	e.order = o
	return err
}

// buildOrder makes epoch's order, Megatron's three indices (what
// BenchmarkMegatronSampleIndex compares with numpy), and returns it with
// the lengths of the documents in its document order.
func (d *MegatronDataset) buildOrder(epoch int) (MegatronOrder, []int32, error) {
	rng := rand.NewPCG(d.cfg.Seed, uint64(epoch))
	docs := make([]int32, len(d.idx.lengths))
	for i := range docs {
		docs[i] = int32(i)
	}
	shuffle(rng, docs)
	if err := d.stopped(); err != nil {
		return MegatronOrder{}, nil, err
	}
	lengths := gather(d.idx.lengths, docs) // in the epoch's order
	samples, err := buildSampleIndex(lengths, d.cfg.SeqLength, d.ntok)
	if err != nil {
		return MegatronOrder{}, nil, fmt.Errorf("corpus: Megatron: %s: epoch %d: %w", d.prefix, epoch, err)
	}
	if err := d.stopped(); err != nil {
		return MegatronOrder{}, nil, err
	}
	order := make([]int64, len(samples)/2-1)
	for i := range order {
		order[i] = int64(i)
	}
	shuffle(rng, order)
	return MegatronOrder{Documents: docs, Samples: samples, Shuffle: order}, lengths, nil
}

// sampleRuns lists the runs of tokens of o's samples in dataset order
// (megatronEpoch), given the lengths of the documents in o's document
// order. It walks the samples in sample order, so that its
// reads of the documents follow that order, and writes each sample's
// runs where its dataset index puts them, having counted them first:
// walked in dataset order, each sample's first read is a cache miss,
// which dominates a profile of BenchmarkMegatronSampleIndex. Its passes run in chunks
// (inChunks).
func (d *MegatronDataset) sampleRuns(o MegatronOrder, lengths []int32) (first []int64, runs []byteSpan, err error) {
	es, seq := int64(d.idx.dtype.Size()), int64(d.cfg.SeqLength)+1
	pointers := gather(d.idx.pointers, o.Documents) // in the epoch's order
	n := len(o.Shuffle)
	at := make([]int64, n) // sample k's runs: counted, then where they go
	var past atomic.Int64  // 1 + a sample that runs past the last document
	inChunks(n, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			p, off := o.Samples[2*k], o.Samples[2*k+1]
			for remaining := seq; remaining > 0; p, off = p+1, 0 {
				if p >= int64(len(lengths)) {
					past.CompareAndSwap(0, int64(k)+1)
					return
				}
				if m := min(int64(lengths[p])-off, remaining); m > 0 {
					at[k]++
					remaining -= m
				}
			}
			pause(k)
		}
	})
	if k := past.Load(); k > 0 {
		return nil, nil, fmt.Errorf("corpus: Megatron: %s: sample %d runs past the last document", d.prefix, k-1)
	}
	first = make([]int64, n+1)
	for i, k := range o.Shuffle {
		first[i+1] = first[i] + at[k]
		at[k] = first[i]
	}
	runs = make([]byteSpan, first[n])
	inChunks(n, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			p, off, r := o.Samples[2*k], o.Samples[2*k+1], at[k]
			for remaining := seq; remaining > 0; p, off = p+1, 0 {
				if m := min(int64(lengths[p])-off, remaining); m > 0 {
					runs[r] = byteSpan{pointers[p] + off*es, m * es}
					r++
					remaining -= m
				}
			}
			pause(k)
		}
	})
	return first, runs, nil
}

// gather returns of[docs[i]] for each i, in chunks (inChunks).
func gather[T int32 | int64](of []T, docs []int32) []T {
	out := make([]T, len(docs))
	inChunks(len(docs), func(lo, hi int) {
		for i, doc := range docs[lo:hi] {
			out[lo+i] = of[doc]
			pause(i)
		}
	})
	return out
}

// inChunks calls f on chunks of [0, n) that cover it, on up to 8
// goroutines, but one fewer than GOMAXPROCS: an epoch's build runs
// beside the loader, and leaves it a P. Built on one goroutine, the
// next epoch of a corpus of short documents took as long as an epoch's
// copying where the CPUs are many, and the loader waited for it at each
// epoch's start (BenchmarkMegatronSequences, short-docs and tiny-docs).
func inChunks(n int, f func(lo, hi int)) {
	const chunk = 1 << 16
	g := min(runtime.GOMAXPROCS(0)-1, 8, (n+chunk-1)/chunk)
	if g <= 1 {
		f(0, n)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= n {
					return
				}
				f(lo, min(lo+chunk, n))
			}
		})
	}
	wg.Wait()
}

// shuffle permutes s as rand.New(src).Shuffle does, with the same draws
// (its Fisher-Yates from the end, one Uint64N(i+1) a position): the same
// permutation, without a call a swap, and on 64-bit machines with
// Uint64N's own steps on src itself rather than through rand.Rand's
// Source interface (TestShuffleIsRandShuffle).
func shuffle[T any](src *rand.PCG, s []T) {
	if ^uint(0)>>32 == 0 { // 32-bit: Uint64N draws differently there
		r := rand.New(src)
		for i := len(s) - 1; i > 0; i-- {
			j := r.Uint64N(uint64(i + 1))
			s[i], s[j] = s[j], s[i]
		}
		return
	}
	for i := len(s) - 1; i > 0; i-- {
		n := uint64(i + 1)
		var j uint64
		if n&(n-1) == 0 {
			j = src.Uint64() & (n - 1)
		} else {
			hi, lo := bits.Mul64(src.Uint64(), n)
			if lo < n {
				for thresh := -n % n; lo < thresh; {
					hi, lo = bits.Mul64(src.Uint64(), n)
				}
			}
			j = hi
		}
		s[i], s[j] = s[j], s[i]
		pause(i)
	}
}

// pause lets other goroutines run at every 1024th step i of a build's
// loops. A build ahead shares the CPUs with the loader's consumer and
// workers; a goroutine that never yields keeps its P until the runtime
// preempts it (10 ms), and a consumer waiting for that P leaves the
// workers blocked on a full sequence meanwhile.
func pause(i int) {
	if i&1023 == 1023 {
		runtime.Gosched()
	}
}

// buildSampleIndex is Megatron's build_sample_idx for one epoch, with
// add_extra_token_to_sequence 1 and drop_last_partial_sequence: given the
// lengths of the documents in their epoch's order, the (position in that
// order, offset) pair where each of the (tokens-1)/seqLen samples
// starts, then the pair where the last one ends, flat.
func buildSampleIndex(lengths []int32, seqLen int, tokens int64) ([]int64, error) {
	n := (tokens - 1) / int64(seqLen)
	out := make([]int64, 2*(n+1))
	var at, off int64 // position in lengths, offset in that document
	for k := int64(1); k <= n; k++ {
		remaining := int64(seqLen) + 1
		for remaining != 0 {
			length := int64(lengths[at]) - off
			remaining -= length
			if remaining <= 0 {
				off += remaining + length - 1
				remaining = 0
				break
			}
			if at == int64(len(lengths))-1 {
				if k != n {
					return nil, fmt.Errorf("sample %d: the documents end early", k)
				}
				off = int64(lengths[at]) - 1
				break
			}
			at++
			off = 0
		}
		out[2*k], out[2*k+1] = at, off
		pause(int(k))
	}
	return out, nil
}

// WritesEveryByte reports true: a sample's SeqLength+1 tokens fill its
// row (engine.FullWriter, so the loader does not zero the batch first).
func (d *MegatronDataset) WritesEveryByte() bool { return true }

// Fill writes sample Shuffle[s.Index()] of s.Epoch() into its slot.
func (d *MegatronDataset) Fill(_ context.Context, s *engine.Slot) error {
	e, err := d.use(s.Epoch())
	if err != nil {
		return err
	}
	_, err = d.fill(s.TensorAt(0).Bytes(), e, []int{s.Index()})
	return err
}

// FillBatch writes the samples of a whole batch: the same bytes as a Fill
// of each, without the loader's per-sample work, and where the .bin is
// mapped with one fault guard a batch and no system call (a stat only
// where a run of tokens ends on zeros: endsInFile).
func (d *MegatronDataset) FillBatch(_ context.Context, b *engine.BatchSlot) error {
	e, err := d.use(b.Epoch())
	if err != nil {
		return err
	}
	if at, err := d.fill(b.Tensor(d.cfg.Field).Bytes(), e, b.Indices()); err != nil {
		return &engine.SampleError{Index: b.Indices()[at], Epoch: b.Epoch(), Worker: -1, Err: err}
	}
	return nil
}

// fill writes samples o.Shuffle[indices[i]] of epoch e into row i of
// dst; on an error it returns the i it failed at.
func (d *MegatronDataset) fill(dst []byte, e *megatronEpoch, indices []int) (int, error) {
	if d.closed.Load() {
		return 0, fmt.Errorf("corpus: Megatron: %s: closed", d.prefix)
	}
	o := e.order
	row := len(dst) / max(len(indices), 1)
	if d.all == nil {
		for i, index := range indices {
			if err := d.read(dst[i*row:(i+1)*row], o, index); err != nil {
				return i, err
			}
		}
		return 0, nil
	}
	var to int64   // where the run being copied goes in dst
	inFile := true // every run read from the mapping ended inside the file
	err := guardMapped(d.bin, func() error { return d.copyBatch(dst, e, indices, &to, &inFile) })
	i := int(to) / max(row, 1)
	if f, ok := err.(fault); ok {
		if to < 0 {
			i = d.faulted(o, indices, f)
		}
		return i, d.cut(o, indices[i], f)
	}
	if err != nil || inFile {
		return i, err
	}
	// A run ended on zeros, which a file cut inside a page also reads
	// past its end, with no fault: the file's size tells.
	size, err := d.bin.size()
	if err == nil && size >= d.binSize {
		return 0, nil
	}
	for i = range indices {
		if err != nil || d.extent(o, indices[i]) > size {
			return i, d.cut(o, indices[i], fault{})
		}
	}
	return 0, nil
}

// megatronRuns is about how many runs copyBatch lists before it converts
// them: it stops after the sample that reaches it.
const megatronRuns = 512

// runLists holds copyBatch's lists of runs for reuse; a list grows to
// megatronRuns and a sample's runs more (at most SeqLength+1).
var runLists = sync.Pool{New: func() any { return new([]byteRun) }}

// copyBatch writes samples e.order.Shuffle[indices[r]] into row r of
// dst, from the mapping. Where Out is the .bin's type, it copies the
// batch with one moveSpans over its samples' runs (copySpans), one after
// the other as a plain loop of copies would, with no lookup in between;
// with the lookups and their branches interleaved (a sample spans one
// document or several) a batch took much longer than that loop
// (BenchmarkMegatronSequences' x-copy). Otherwise it lists the runs of
// samples until it has megatronRuns (listRuns), then converts them
// (convertRuns), and so on. *to is where the run being converted (or the
// sample that failed) goes, for the caller's error, or -1 while moveSpans
// copies: a fault there says where it read (faulted). *inFile is cleared
// when a run ends on a zero byte (endsInFile). Call it under guardMapped.
func (d *MegatronDataset) copyBatch(dst []byte, e *megatronEpoch, indices []int, to *int64, inFile *bool) error {
	row := int64(len(dst) / max(len(indices), 1))
	if d.cfg.Out == d.idx.dtype && littleEndian {
		return d.copySpans(dst, e, indices, row, to, inFile)
	}
	list := runLists.Get().(*[]byteRun)
	defer runLists.Put(list)
	for r := 0; r < len(indices); {
		runs, next, err := d.listRuns((*list)[:0], e, indices, r, row, to)
		*list = runs
		if err == nil {
			err = d.convertRuns(dst, e.order, indices, row, runs, to, inFile)
		}
		if err != nil {
			return err
		}
		r = next
	}
	return nil
}

// copySpans is copyBatch where Out is the .bin's type: one moveSpans for
// the batch. The runs of a stretch of consecutive indices are consecutive
// in e's list and, in turn, fill their rows: a batch that is one stretch
// (the loader's own order, Shuffle off) copies them where they lie; one
// of several (the indices of a Subset or RandomSplit part, a Blend's, the
// loader's Shuffle) gathers its stretches' runs into one list first
// (spanLists), so that moveSpans' prefetch reaches across its samples.
// Copied stretch by stretch, a batch of a RandomSplit part took about
// twice a batch of the dataset's own order (BenchmarkMegatronSubset).
func (d *MegatronDataset) copySpans(dst []byte, e *megatronEpoch, indices []int, row int64, to *int64, inFile *bool) error {
	if want := int64(d.cfg.SeqLength+1) * int64(d.idx.dtype.Size()); len(indices) > 0 && row != want {
		return fmt.Errorf("corpus: Megatron: %s: rows of %d bytes, want %d", d.prefix, row, want)
	}
	n := len(e.first) - 1
	whole := true // indices are one stretch
	for r, index := range indices {
		if index < 0 || index >= n {
			*to = int64(r) * row
			return fmt.Errorf("corpus: Megatron: %s: index %d, want [0, %d)", d.prefix, index, n)
		}
		whole = whole && (r == 0 || index == indices[r-1]+1)
	}
	if len(indices) == 0 {
		return nil
	}
	var runs []byteSpan
	if whole {
		runs = e.runs[e.first[indices[0]]:e.first[indices[len(indices)-1]+1]]
	} else {
		list := spanLists.Get().(*[]byteSpan)
		defer spanLists.Put(list)
		runs = (*list)[:0]
		for r := 0; r < len(indices); {
			j := r // the stretch is indices[r:j+1]
			for j+1 < len(indices) && indices[j+1] == indices[j]+1 {
				j++
			}
			runs = append(runs, e.runs[e.first[indices[r]]:e.first[indices[j]+1]]...)
			r = j + 1
		}
		*list = runs
	}
	out := dst[:int64(len(indices))*row]
	*to = -1
	if moveSpans(out, d.all, runs) { // a run ended on zeros: look closer
		at := int64(0)
		for _, s := range runs {
			at += s.n
			if out[at-1] == 0 && !endsInFile(d.all, s.from+s.n) {
				*inFile = false
			}
		}
	}
	return nil
}

// spanLists holds copySpans' lists of a batch's runs for reuse.
var spanLists = sync.Pool{New: func() any { return new([]byteSpan) }}

// listRuns appends to runs those of samples indices[r:], to be written
// from row r of dst on, until it holds megatronRuns or more; it returns
// them and the position of the next sample. The runs of consecutive
// indices are consecutive in e's lists, so a batch of them reads its
// runs in one sweep. It calls nothing in its loop but append and, to
// return one, an error's constructor: with a call there, the compiler
// kept the loop's variables on the stack, and finding the runs alone
// took longer (BenchmarkMegatronSequences times the batches it serves).
func (d *MegatronDataset) listRuns(runs []byteRun, e *megatronEpoch, indices []int, r int, row int64, to *int64) ([]byteRun, int, error) {
	es, ow := int64(d.idx.dtype.Size()), int64(d.cfg.Out.Size())
	for ; r < len(indices) && len(runs) < megatronRuns; r++ {
		index := indices[r]
		if index < 0 || index >= len(e.first)-1 {
			*to = int64(r) * row
			return runs, r, fmt.Errorf("corpus: Megatron: %s: index %d, want [0, %d)", d.prefix, index, len(e.first)-1)
		}
		at := int64(r) * row
		for _, s := range e.runs[e.first[index]:e.first[index+1]] {
			runs = append(runs, byteRun{s.from, s.from + s.n, at})
			at += s.n / es * ow
		}
	}
	return runs, r, nil
}

// convertRuns converts the runs that listRuns found to Out, then checks
// that each ended inside the file (endsInFile).
func (d *MegatronDataset) convertRuns(dst []byte, o MegatronOrder, indices []int, row int64, runs []byteRun, to *int64, inFile *bool) error {
	all := d.all
	// Read each run's first byte before converting any, so that their
	// cache misses overlap, as moveSpans' prefetches do on the copying path.
	*to = -1
	var heads byte
	for _, r := range runs {
		if r.from < r.end {
			heads ^= all[r.from]
		}
	}
	runtime.KeepAlive(heads) // the reads are the point
	es, ow := int64(d.idx.dtype.Size()), int64(d.cfg.Out.Size())
	for _, r := range runs {
		*to = r.to
		n := (r.end - r.from) / es
		if err := d.convert(dst[r.to:r.to+n*ow], all[r.from:r.end], 0); err != nil {
			index := indices[r.to/row]
			return d.pieces(o, index, func(seq int32, off, _, from, _ int64) error {
				if from != r.from {
					return nil
				}
				err = d.convert(dst[r.to:r.to+n*ow], all[r.from:r.end], off) // again, for the token's number in its sequence
				return fmt.Errorf("corpus: Megatron: %s.bin: sample %d, sequence %d (tokens %d to %d, bytes %d to %d): %w",
					d.prefix, o.Shuffle[index], seq, off, off+n, r.from, r.end, err)
			})
		}
	}
	for _, r := range runs {
		if !endsInFile(all, r.end) {
			*inFile = false
		}
	}
	return nil
}

// faulted returns the position in indices of the first sample that reads
// the byte of the .bin at which f faulted; 0 when none does (the fault was
// not in the mapping).
func (d *MegatronDataset) faulted(o MegatronOrder, indices []int, f fault) int {
	at := int64(f.addr) - int64(uintptr(unsafe.Pointer(unsafe.SliceData(d.all))))
	es := int64(d.idx.dtype.Size())
	for i, index := range indices {
		reads := false
		d.pieces(o, index, func(_ int32, _, n, from, _ int64) error {
			reads = reads || from <= at && at < from+n*es
			return nil
		})
		if reads {
			return i
		}
	}
	return 0
}

// pieces calls f for each run of sample o.Shuffle[index]'s tokens: n
// tokens from token off of sequence seq, at byte from of the .bin, to be
// written at byte to of the sample's row.
func (d *MegatronDataset) pieces(o MegatronOrder, index int, f func(seq int32, off, n, from, to int64) error) error {
	if index < 0 || index >= len(o.Shuffle) {
		return fmt.Errorf("corpus: Megatron: %s: index %d, want [0, %d)", d.prefix, index, len(o.Shuffle))
	}
	k := o.Shuffle[index]
	at, off := o.Samples[2*k], o.Samples[2*k+1]
	es, ow := int64(d.idx.dtype.Size()), int64(d.cfg.Out.Size())
	var to int64
	for remaining := int64(d.cfg.SeqLength) + 1; remaining > 0; at, off = at+1, 0 {
		if at >= int64(len(o.Documents)) {
			return fmt.Errorf("corpus: Megatron: %s: sample %d runs past the last document", d.prefix, k)
		}
		seq := o.Documents[at]
		if n := min(int64(d.idx.lengths[seq])-off, remaining); n > 0 {
			if err := f(seq, off, n, d.idx.pointers[seq]+off*es, to); err != nil {
				return err
			}
			to += n * ow
			remaining -= n
		}
	}
	return nil
}

// read writes sample o.Shuffle[index] into dst, read from the .bin with
// ReadAt.
func (d *MegatronDataset) read(dst []byte, o MegatronOrder, index int) error {
	es, ow := int64(d.idx.dtype.Size()), int64(d.cfg.Out.Size())
	return d.pieces(o, index, func(seq int32, off, n, from, to int64) error {
		out := dst[to : to+n*ow]
		var err error
		if d.cfg.Out == d.idx.dtype && littleEndian {
			err = d.bin.readAt(out, from)
		} else {
			buf := make([]byte, n*es)
			if err = d.bin.readAt(buf, from); err == nil {
				err = d.convert(out, buf, off)
			}
		}
		if err != nil {
			return fmt.Errorf("corpus: Megatron: %s.bin: sample %d, sequence %d (tokens %d to %d, bytes %d to %d): %w",
				d.prefix, o.Shuffle[index], seq, off, off+n, from, from+n*es, err)
		}
		return nil
	})
}

// extent returns the end of the bytes of the .bin that sample
// o.Shuffle[index] reads.
func (d *MegatronDataset) extent(o MegatronOrder, index int) int64 {
	var end int64
	es := int64(d.idx.dtype.Size())
	_ = d.pieces(o, index, func(_ int32, _, n, from, _ int64) error {
		end = max(end, from+n*es)
		return nil
	})
	return end
}

// cut is the error of sample o.Shuffle[index], which the .bin no longer
// holds.
func (d *MegatronDataset) cut(o MegatronOrder, index int, f fault) error {
	now := "cannot be read"
	if size, err := d.bin.size(); err == nil {
		now = fmt.Sprintf("is %d bytes", size)
	}
	msg := fmt.Sprintf("corpus: Megatron: %s.bin: sample %d (index %d, up to byte %d): the file %s, %d when opened: it was cut short or rewritten while mapped",
		d.prefix, o.Shuffle[index], index, d.extent(o, index), now, d.binSize)
	if f.addr != 0 {
		msg += " (" + f.Error() + ")"
	}
	return errors.New(msg)
}

// convert writes the little-endian tokens src, from token first of their
// sequence, into dst as Out.
func (d *MegatronDataset) convert(dst, src []byte, first int64) error {
	from, to := d.idx.dtype, d.cfg.Out
	if from == to && littleEndian {
		copy(dst, src)
		return nil
	}
	if littleEndian && from != collate.Int64 { // widening: a typed loop
		switch from {
		case collate.Uint8:
			widenTo(dst, to, src)
		case collate.Int8:
			widenTo(dst, to, unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(src))), len(src)))
		case collate.Int16:
			widenTo(dst, to, unsafe.Slice((*int16)(unsafe.Pointer(unsafe.SliceData(src))), len(src)/2))
		case collate.Uint16:
			widenTo(dst, to, unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(src))), len(src)/2))
		case collate.Int32:
			widenTo(dst, to, unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(src))), len(src)/4))
		}
		return nil
	}
	es := from.Size()
	for i := range len(src) / es {
		var v int64
		switch from {
		case collate.Uint8:
			v = int64(src[i])
		case collate.Int8:
			v = int64(int8(src[i]))
		case collate.Int16:
			v = int64(int16(binary.LittleEndian.Uint16(src[2*i:])))
		case collate.Uint16:
			v = int64(binary.LittleEndian.Uint16(src[2*i:]))
		case collate.Int32:
			v = int64(int32(binary.LittleEndian.Uint32(src[4*i:])))
		case collate.Int64:
			v = int64(binary.LittleEndian.Uint64(src[8*i:]))
		}
		switch to {
		case collate.Int64:
			binary.NativeEndian.PutUint64(dst[8*i:], uint64(v))
		case collate.Int32:
			if v != int64(int32(v)) {
				return fmt.Errorf("token %d is %d, more than int32 (MegatronConfig.Out) holds", first+int64(i), v)
			}
			binary.NativeEndian.PutUint32(dst[4*i:], uint32(int32(v)))
		default: // the file's own type, big-endian machine
			switch es {
			case 1:
				dst[i] = src[i]
			case 2:
				binary.NativeEndian.PutUint16(dst[2*i:], uint16(v))
			case 4:
				binary.NativeEndian.PutUint32(dst[4*i:], uint32(v))
			}
		}
	}
	return nil
}

// widenTo writes the tokens src into dst as to, collate.Int32 or Int64
// (a wider type than S, or the same), in native byte order.
func widenTo[S uint8 | int8 | int16 | uint16 | int32](dst []byte, to collate.DType, src []S) {
	switch to {
	case collate.Int64:
		widen(unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(dst))), len(src)), src)
	case collate.Int32:
		widen(unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(dst))), len(src)), src)
	}
}

// Close stops the build of an epoch ahead, if any, then unmaps and
// closes the .bin. Fills must not run during or after it.
func (d *MegatronDataset) Close() error {
	d.mu.Lock() // with ahead: no build starts once closed is set
	closed := d.closed.Swap(true)
	d.mu.Unlock()
	if closed {
		return nil
	}
	d.building.Wait()
	return d.bin.close()
}

// WriteMegatron writes documents as the indexed dataset prefix.idx and
// prefix.bin, tokens of type dtype (collate.Uint8, Int8, Int16, Uint16,
// Int32 or Int64), one sequence a document, as Megatron's
// IndexedDatasetBuilder does with add_document: for tests, examples and
// small corpora (a MegatronWriter writes one as its documents come). A
// token that dtype cannot hold is an error, and nothing is written.
func WriteMegatron(prefix string, dtype collate.DType, documents [][]int64) error {
	w, err := newMegatronWriter("corpus: WriteMegatron", prefix, dtype)
	if err != nil {
		return err
	}
	for _, doc := range documents {
		if err := w.Add(doc); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close()
}

// maxMegatronIndexBytes bounds a Megatron .idx, read whole: the largest
// one Megatron writes, for 2^31 sequences (the most the format allows),
// about 42 GiB: a 34-byte header, 12 bytes a sequence (length and
// pointer), 8 a document (at most one more than the sequences) and, in a
// multimodal index, 1 a sequence (its mode). A larger file is refused
// before anything is allocated.
const maxMegatronIndexBytes = 34 + 12*(1<<31) + 8*(1<<31+1) + 1<<31
