package corpus

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// Documents is a corpus of tokenized documents, read by index: what Pack
// packs. A MegatronDataset is one (its sequences), and DocumentSlice
// holds documents in memory. ReadDocument must be safe for concurrent
// calls.
type Documents interface {
	// NumDocuments returns the number of documents.
	NumDocuments() int
	// DocumentLen returns the tokens of document i.
	DocumentLen(i int) int
	// ReadDocument writes tokens [off, off+len(dst)) of document i into
	// dst.
	ReadDocument(i, off int, dst []int64) error
}

// DocumentSlice is a Documents held in memory: document i is
// DocumentSlice[i].
type DocumentSlice [][]int64

// NumDocuments returns len(d).
func (d DocumentSlice) NumDocuments() int { return len(d) }

// DocumentLen returns len(d[i]).
func (d DocumentSlice) DocumentLen(i int) int { return len(d[i]) }

// ReadDocument copies d[i][off:off+len(dst)] into dst.
func (d DocumentSlice) ReadDocument(i, off int, dst []int64) error {
	if i < 0 || i >= len(d) || off < 0 || off+len(dst) > len(d[i]) {
		return fmt.Errorf("corpus: DocumentSlice: tokens [%d, %d) of document %d are out of range", off, off+len(dst), i)
	}
	copy(dst, d[i][off:])
	return nil
}

// Fingerprint returns the documents' identity (engine.Fingerprinter),
// which Pack records in its own:
//
//   - document_slice.lengths: the number of documents and a hash of all
//     their lengths;
//   - document_slice.tokens: the tokens' identity, as
//     engine.FingerprintData gives it for the documents back to back,
//     8 little-endian bytes a token: all of them up to 32 Ki tokens, else
//     64 runs of 512 tokens spread evenly over them.
//
// It reads the lengths of all the documents, 64 runs of tokens at most,
// at each call (Pack calls it once). The limit: a corpus of more than 32
// Ki tokens edited between the runs sampled, its lengths kept, is not
// told apart.
func (d DocumentSlice) Fingerprint() engine.Fingerprint {
	ends := make([]int64, len(d)) // ends[i]: the tokens of documents [0, i]
	lengths := make([]byte, 0, 8*len(d))
	var n int64
	for i, doc := range d {
		n += int64(len(doc))
		ends[i] = n
		lengths = binary.LittleEndian.AppendUint64(lengths, uint64(len(doc)))
	}
	tokens, _ := engine.FingerprintData(sliceReader{d, ends}, 8*n) // reads memory: no error
	return engine.Fingerprint{
		"document_slice.lengths": strconv.Itoa(len(d)) + " " + engine.FingerprintHash(unsafe.String(unsafe.SliceData(lengths), len(lengths))),
		"document_slice.tokens":  tokens,
	}
}

// sliceReader reads a DocumentSlice's tokens back to back, 8
// little-endian bytes a token (an io.ReaderAt); ends[i] is the tokens of
// documents [0, i].
type sliceReader struct {
	d    DocumentSlice
	ends []int64
}

func (r sliceReader) ReadAt(p []byte, off int64) (int, error) {
	var b [8]byte
	n := 0
	for n < len(p) {
		t := (off + int64(n)) / 8 // the token that byte off+n is of
		i, _ := slices.BinarySearch(r.ends, t+1)
		if i == len(r.ends) {
			return n, io.EOF
		}
		doc := r.d[i]
		for j := int(t - (r.ends[i] - int64(len(doc)))); j < len(doc) && n < len(p); j++ {
			binary.LittleEndian.PutUint64(b[:], uint64(doc[j]))
			n += copy(p[n:], b[(off+int64(n))%8:])
		}
	}
	return n, nil
}

// NumDocuments returns the sequences of the .idx, the documents that
// Pack packs: NumSequences.
func (d *MegatronDataset) NumDocuments() int { return len(d.idx.lengths) }

// DocumentLen returns the tokens of sequence i of the .idx.
func (d *MegatronDataset) DocumentLen(i int) int { return int(d.idx.lengths[i]) }

// ReadDocument writes tokens [off, off+len(dst)) of sequence i of the
// .idx into dst, whatever the .bin's type (MegatronConfig.Out does not
// apply). A .bin cut short while mapped is an error, not a crash.
func (d *MegatronDataset) ReadDocument(i, off int, dst []int64) error {
	if i < 0 || i >= len(d.idx.lengths) || off < 0 || off+len(dst) > int(d.idx.lengths[i]) {
		return fmt.Errorf("corpus: Megatron: %s: tokens [%d, %d) of sequence %d are out of range", d.prefix, off, off+len(dst), i)
	}
	if d.closed.Load() {
		return fmt.Errorf("corpus: Megatron: %s: closed", d.prefix)
	}
	es := int64(d.idx.dtype.Size())
	from := d.idx.pointers[i] + int64(off)*es
	n := int64(len(dst)) * es
	var err error
	if d.all != nil {
		err = guardMapped(d.bin, func() error {
			decodeTokens(dst, d.all[from:from+n], d.idx.dtype)
			if endsInFile(d.all, from+n) {
				return nil
			}
			if size, err := d.bin.size(); err != nil || size < from+n {
				return fmt.Errorf("the file is cut short or cannot be read (%v bytes, %d when opened)", size, d.binSize)
			}
			return nil
		})
	} else {
		buf := make([]byte, n)
		if err = d.bin.readAt(buf, from); err == nil {
			decodeTokens(dst, buf, d.idx.dtype)
		}
	}
	if err != nil {
		return fmt.Errorf("corpus: Megatron: %s.bin: sequence %d (tokens %d to %d, bytes %d to %d): %w", d.prefix, i, off, off+len(dst), from, from+n, err)
	}
	return nil
}

// decodeTokens writes the little-endian tokens src, of type dt, into dst.
func decodeTokens(dst []int64, src []byte, dt collate.DType) {
	switch dt {
	case collate.Uint8:
		for i := range dst {
			dst[i] = int64(src[i])
		}
	case collate.Int8:
		for i := range dst {
			dst[i] = int64(int8(src[i]))
		}
	case collate.Int16:
		src = src[:2*len(dst)]
		for i := range dst {
			dst[i] = int64(int16(binary.LittleEndian.Uint16(src[2*i:])))
		}
	case collate.Uint16:
		src = src[:2*len(dst)]
		for i := range dst {
			dst[i] = int64(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case collate.Int32:
		src = src[:4*len(dst)]
		for i := range dst {
			dst[i] = int64(int32(binary.LittleEndian.Uint32(src[4*i:])))
		}
	case collate.Int64:
		src = src[:8*len(dst)]
		for i := range dst {
			dst[i] = int64(binary.LittleEndian.Uint64(src[8*i:]))
		}
	}
}

// LongDocuments says what Pack does with a document longer than
// PackConfig.SeqLen.
type LongDocuments uint8

const (
	// SplitLong cuts a long document into pieces of SeqLen tokens and a
	// last, shorter piece; each piece is packed as a document of its
	// own (positions restart at 0, attention stays inside it).
	SplitLong LongDocuments = iota
	// DropLong leaves long documents out.
	DropLong
)

// PackConfig configures the packing of documents into sequences (Pack).
type PackConfig struct {
	// SeqLen is the tokens of a packed sequence.
	SeqLen int
	// Long says what to do with a document longer than SeqLen (after
	// its EOD): SplitLong (the default) or DropLong.
	Long LongDocuments
	// AddEOD appends the token EOD to each document whose last token is
	// not EOD (Megatron's preprocess_data.py --append-eod appends it to
	// every document). Off by default: the documents are packed as they
	// are.
	AddEOD bool
	// EOD is the end-of-document token that AddEOD appends.
	EOD int64
	// PadToken fills the tokens after a sequence's last document.
	PadToken int64
}

// piece is n tokens from token off of a document.
type piece struct {
	doc    int
	off, n int32
}

// PackedDataset is a map-style engine.Dataset of documents packed into
// sequences of SeqLen tokens, for fine-tuning with variable-length
// ("varlen") attention (Pack).
type PackedDataset struct {
	docs   Documents
	cfg    PackConfig
	eod    []bool  // eod[d]: document d gets an appended EOD; nil without AddEOD
	pieces []piece // every sequence's pieces, in order
	starts []int   // sequence i is pieces[starts[i]:starts[i+1]]
	real   int64   // tokens packed, EODs included
	drop   int     // documents dropped
	schema collate.Schema
	fp     engine.Fingerprint
	// filled counts the Fills: sequences, their tokens and slots
	// (Report).
	filled struct{ samples, tokens, slots atomic.Int64 }
}

// Pack packs the documents of docs, whole, into sequences of cfg.SeqLen
// tokens, first-fit in document order: each document (or piece of a
// split one) goes into the first sequence with room for it, and opens a
// new sequence when none has. First-fit keeps the documents of a
// sequence in corpus order and packs within 1.7× the fewest sequences
// possible (in practice much closer; see Efficiency); it runs in
// O(pieces × log pieces) with a tree of the sequences' free space, once,
// here, and keeps 16 bytes a piece. Empty documents are left out. A
// packing with no sequence is an error that says why: no documents, all
// of them empty, or dropped by DropLong (also where only the EOD that
// AddEOD appends makes them longer than SeqLen), with the counts. So is
// a NumDocuments below 0 or above 2^31−1, and a DocumentLen below 0 or
// above 2^31−2, naming the document.
//
// Each sample has the fields
//
//	tokens        int64[SeqLen]    the documents, back to back, then PadToken
//	position_ids  int64[SeqLen]    0, 1, ... from the start of each document, and of the padding
//	cu_seqlens    int32[SeqLen+1]  the offsets where documents start, then where the last ends;
//	                               with padding, then SeqLen, so the padding is a segment of its own;
//	                               the rest is SeqLen (flash-attn's cu_seqlens, per row)
//	loss_mask     float32[SeqLen]  1 on the tokens of documents, 0 on padding and on each
//	                               document's first token
//	num_docs      int32            the documents (pieces) in the sequence
//	max_seqlen    int32            the longest segment of cu_seqlens (flash-attn's max_seqlen)
//
// loss_mask follows Hugging Face's packing collator (labels = tokens,
// shifted inside the model): loss_mask[t] weighs the prediction of
// tokens[t] from the tokens before it, which a document's first token
// does not have. With Megatron's convention (labels = tokens[1:]) use
// loss_mask[1:]. For a batch of B rows as one varlen sequence, add
// b×SeqLen to row b's cu_seqlens and take the unique values.
//
// The sequences are in packing order: shuffle them with the loader's
// Config.Shuffle. The dataset is map-style, so resume and bit-identical
// batches for any Workers hold as for any dataset. Fill reads docs: keep
// it open (Close a MegatronDataset after the loaders that use the packed
// dataset).
func Pack(docs Documents, cfg PackConfig) (*PackedDataset, error) {
	if docs == nil {
		return nil, fmt.Errorf("corpus: Pack: documents are nil")
	}
	if cfg.SeqLen <= 0 || cfg.SeqLen > math.MaxInt32-1 {
		return nil, fmt.Errorf("corpus: Pack: PackConfig.SeqLen is %d, want 1 to %d", cfg.SeqLen, math.MaxInt32-1)
	}
	if cfg.Long > DropLong {
		return nil, fmt.Errorf("corpus: Pack: PackConfig.Long is %d, want SplitLong or DropLong", cfg.Long)
	}
	p := &PackedDataset{docs: docs, cfg: cfg, schema: collate.Schema{
		{Name: "tokens", DType: collate.Int64, Shape: []int{cfg.SeqLen}},
		{Name: "position_ids", DType: collate.Int64, Shape: []int{cfg.SeqLen}},
		{Name: "cu_seqlens", DType: collate.Int32, Shape: []int{cfg.SeqLen + 1}},
		{Name: "loss_mask", DType: collate.Float32, Shape: []int{cfg.SeqLen}},
		{Name: "num_docs", DType: collate.Int32},
		{Name: "max_seqlen", DType: collate.Int32},
	}}
	// The documents, pieces and sequences are indexed with int32s (piece,
	// bin), and the tables grow with the documents read, not with what
	// NumDocuments claims.
	nd := docs.NumDocuments()
	if nd < 0 || nd > math.MaxInt32 {
		return nil, fmt.Errorf("corpus: Pack: NumDocuments is %d, want >= 0 and at most %d", nd, math.MaxInt32)
	}
	// The pieces, in document order.
	var last [1]int64
	var all []piece
	empty, byEOD := 0, 0 // documents left out: empty, dropped only for their EOD
	for d := range nd {
		n := docs.DocumentLen(d)
		if n < 0 || n > math.MaxInt32-1 {
			return nil, fmt.Errorf("corpus: Pack: document %d: DocumentLen is %d, want >= 0 and at most %d", d, n, math.MaxInt32-1)
		}
		if cfg.AddEOD {
			p.eod = append(p.eod, false)
		}
		if n == 0 {
			empty++
			continue
		}
		if cfg.AddEOD {
			if err := docs.ReadDocument(d, n-1, last[:]); err != nil {
				return nil, fmt.Errorf("corpus: Pack: document %d: %w", d, err)
			}
			if last[0] != cfg.EOD {
				p.eod[d] = true
				n++
			}
		}
		if n > cfg.SeqLen && cfg.Long == DropLong {
			p.drop++
			if p.eod != nil && p.eod[d] && n == cfg.SeqLen+1 {
				byEOD++
			}
			continue
		}
		if pieces := 1 + (n-1)/cfg.SeqLen; pieces > math.MaxInt32-len(all) {
			return nil, fmt.Errorf("corpus: Pack: document %d: more than %d pieces in all, want at most that", d, math.MaxInt32)
		}
		for off := 0; off < n; off += cfg.SeqLen {
			all = append(all, piece{doc: d, off: int32(off), n: int32(min(cfg.SeqLen, n-off))})
		}
		p.real += int64(n)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("corpus: Pack: %s: no sequence to pack", p.nothing(nd, empty, byEOD))
	}
	// First-fit: free[size+j] is sequence j's free space, free[k] the
	// most of its subtree's; sequences not opened yet are empty.
	size := 1
	for size < len(all) {
		size *= 2
	}
	free := make([]int32, 2*size)
	for k := range free {
		free[k] = int32(cfg.SeqLen)
	}
	bin := make([]int32, len(all))
	nseq := 0
	for i, pc := range all {
		k := 1
		for k < size {
			if k = 2 * k; free[k] < pc.n {
				k++
			}
		}
		j := k - size
		bin[i] = int32(j)
		nseq = max(nseq, j+1)
		for free[k] -= pc.n; k > 1; {
			k /= 2
			free[k] = max(free[2*k], free[2*k+1])
		}
	}
	// Group the pieces by sequence, keeping document order.
	p.starts = make([]int, nseq+1)
	for _, j := range bin {
		p.starts[j+1]++
	}
	for j := range nseq {
		p.starts[j+1] += p.starts[j]
	}
	next := append([]int(nil), p.starts[:nseq]...)
	p.pieces = make([]piece, len(all))
	for i, pc := range all {
		p.pieces[next[bin[i]]] = pc
		next[bin[i]]++
	}
	p.fp = p.fingerprint()
	return p, nil
}

// Fingerprint returns what determines the packed sequences besides Len
// and Schema (engine.Fingerprinter), so that a loader's State is refused
// for other documents or another packing:
//
//   - pack.seq_len, pack.long ("split" or "drop"), pack.add_eod, with
//     AddEOD pack.eod, and pack.pad_token;
//   - pack.documents: the Documents' type, and under it their own parts:
//     a DocumentSlice's, a shards.ParquetDocs', any Documents that is an
//     engine.Fingerprinter; of a MegatronDataset, only its files' parts
//     (pack.documents.megatron.idx and .bin: its SeqLength, Seed and Out
//     do not change its documents).
//
// It is taken when Pack packs. The limit: of Documents that are not an
// engine.Fingerprinter, only the type is recorded, so a State resumes on
// other documents of the same type that pack into as many sequences.
func (p *PackedDataset) Fingerprint() engine.Fingerprint { return maps.Clone(p.fp) }

// fingerprint makes the Fingerprint.
func (p *PackedDataset) fingerprint() engine.Fingerprint {
	c := p.cfg
	f := engine.Fingerprint{"pack.seq_len": strconv.Itoa(c.SeqLen), "pack.long": [...]string{SplitLong: "split", DropLong: "drop"}[c.Long],
		"pack.add_eod": strconv.FormatBool(c.AddEOD), "pack.pad_token": strconv.FormatInt(c.PadToken, 10),
		"pack.documents": fmt.Sprintf("%T", p.docs)}
	if c.AddEOD {
		f["pack.eod"] = strconv.FormatInt(c.EOD, 10)
	}
	docs := engine.FingerprintOf(p.docs)
	if m, ok := p.docs.(interface{ documentsFingerprint() engine.Fingerprint }); ok {
		docs = m.documentsFingerprint()
	}
	return f.Nest("pack.documents", docs)
}

// nothing says why the nd documents, of which empty are empty, p.drop
// dropped and byEOD of those only for their appended EOD, leave nothing
// to pack.
func (p *PackedDataset) nothing(nd, empty, byEOD int) string {
	if nd == 0 {
		return "no documents (NumDocuments is 0)"
	}
	if p.drop == 0 {
		if nd == 1 {
			return "the only document is empty"
		}
		return fmt.Sprintf("all %d documents are empty", nd)
	}
	long := fmt.Sprintf("longer than PackConfig.SeqLen %d", p.cfg.SeqLen)
	switch {
	case byEOD == 0:
	case byEOD == p.drop && byEOD == 1:
		long += " (only with the EOD that AddEOD appends)"
	case byEOD == p.drop:
		long += fmt.Sprintf(" (all %d only with the EOD that AddEOD appends)", byEOD)
	default:
		long += fmt.Sprintf(" (%d of them only with the EOD that AddEOD appends)", byEOD)
	}
	switch {
	case empty > 0:
		are := "are"
		if empty == 1 {
			are = "is"
		}
		return fmt.Sprintf("of %d documents, %d %s empty and DropLong drops %d, %s", nd, empty, are, p.drop, long)
	case nd == 1:
		return "DropLong drops the only document, " + long
	default:
		return fmt.Sprintf("DropLong drops all %d documents, %s", nd, long)
	}
}

// Len returns the packed sequences.
func (p *PackedDataset) Len() int { return len(p.starts) - 1 }

// Schema returns the fields listed at Pack.
func (p *PackedDataset) Schema() collate.Schema { return p.schema }

// Efficiency returns the share of the sequences' token slots that hold
// documents' tokens (EODs included) rather than padding: tokens ÷
// (Len × SeqLen), over all the sequences. A loader's Stats.Dataset
// counts the same over the sequences filled (Report).
func (p *PackedDataset) Efficiency() float64 {
	if p.Len() == 0 {
		return 0
	}
	return float64(p.real) / (float64(p.Len()) * float64(p.cfg.SeqLen))
}

// Report returns the counts of the sequences filled so far, by every
// loader, for a loader's Stats.Dataset (engine.Reporter):
// packed_samples, the sequences; packed_tokens, their tokens (EODs
// included); packed_slots, their token slots (SeqLen each). After one
// epoch of one loader, packed_tokens ÷ packed_slots is Efficiency.
func (p *PackedDataset) Report() map[string]int64 {
	return map[string]int64{"packed_samples": p.filled.samples.Load(), "packed_tokens": p.filled.tokens.Load(), "packed_slots": p.filled.slots.Load()}
}

// NumTokens returns the tokens packed, EODs included.
func (p *PackedDataset) NumTokens() int64 { return p.real }

// Dropped returns the documents that DropLong left out.
func (p *PackedDataset) Dropped() int { return p.drop }

// PackedPiece is a run of a document's tokens in a packed sequence.
type PackedPiece struct {
	// Document is the document's index in the Documents.
	Document int
	// Offset is the run's first token in the document; a document split
	// by SplitLong has runs at 0, SeqLen, 2×SeqLen, ...
	Offset int
	// Len is the run's tokens, an appended EOD included.
	Len int
}

// Pieces returns the runs of documents that sequence i holds, in order.
func (p *PackedDataset) Pieces(i int) []PackedPiece {
	out := make([]PackedPiece, 0, p.starts[i+1]-p.starts[i])
	for _, pc := range p.pieces[p.starts[i]:p.starts[i+1]] {
		out = append(out, PackedPiece{Document: pc.doc, Offset: int(pc.off), Len: int(pc.n)})
	}
	return out
}

// WritesEveryByte reports true: Fill writes every field, padding
// included (engine.FullWriter, so the loader does not zero the batch
// first).
func (p *PackedDataset) WritesEveryByte() bool { return true }

// Fill writes sequence s.Index().
func (p *PackedDataset) Fill(_ context.Context, s *engine.Slot) error {
	i := s.Index()
	if i < 0 || i >= p.Len() {
		return fmt.Errorf("corpus: Pack: index %d is out of range [0, %d)", i, p.Len())
	}
	tokens := collate.As[int64](s.TensorAt(0))
	pos := collate.As[int64](s.TensorAt(1))
	cu := collate.As[int32](s.TensorAt(2))
	mask := collate.As[float32](s.TensorAt(3))
	pieces := p.pieces[p.starts[i]:p.starts[i+1]]
	t, longest := 0, 0
	for j, pc := range pieces {
		n := int(pc.n)
		real := n // tokens read from the document; the rest is its EOD
		if p.eod != nil && p.eod[pc.doc] {
			real = min(n, p.docs.DocumentLen(pc.doc)-int(pc.off))
		}
		if err := p.docs.ReadDocument(pc.doc, int(pc.off), tokens[t:t+real]); err != nil {
			return fmt.Errorf("corpus: Pack: sequence %d, document %d: %w", i, pc.doc, err)
		}
		if real < n {
			tokens[t+real] = p.cfg.EOD
		}
		cu[j] = int32(t)
		for x := range n {
			pos[t+x] = int64(x)
			mask[t+x] = 1
		}
		mask[t] = 0
		t += n
		longest = max(longest, n)
	}
	cu[len(pieces)] = int32(t)
	for x := range p.cfg.SeqLen - t {
		tokens[t+x] = p.cfg.PadToken
		pos[t+x] = int64(x)
		mask[t+x] = 0
	}
	longest = max(longest, p.cfg.SeqLen-t)
	for j := len(pieces) + 1; j < len(cu); j++ {
		cu[j] = int32(p.cfg.SeqLen)
	}
	collate.As[int32](s.TensorAt(4))[0] = int32(len(pieces))
	collate.As[int32](s.TensorAt(5))[0] = int32(longest)
	p.filled.samples.Add(1)
	p.filled.tokens.Add(int64(t))
	p.filled.slots.Add(int64(p.cfg.SeqLen))
	return nil
}
