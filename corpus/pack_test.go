package corpus

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

// zipfDocs returns n documents with Zipf-like lengths from 1 to maxLen;
// token t of document d is 1000000d+t+1 (never 0, the padding, nor -1,
// the EOD of the tests).
func zipfDocs(seed uint64, n, maxLen int) DocumentSlice {
	r := rand.New(rand.NewPCG(seed, 1))
	z := rand.NewZipf(r, 1.2, 8, uint64(maxLen-1))
	docs := make(DocumentSlice, n)
	for d := range docs {
		docs[d] = make([]int64, 1+int(z.Uint64()))
		for t := range docs[d] {
			docs[d][t] = int64(1000000*d + t + 1)
		}
	}
	return docs
}

// packedSample is one filled sequence.
type packedSample struct {
	tokens, pos []int64
	cu          []int32
	mask        []float32
	numDocs     int32
	maxLen      int32
}

func fillPacked(t *testing.T, p *PackedDataset, i int) packedSample {
	t.Helper()
	layout, err := collate.NewLayout(p.Schema(), 1)
	require.NoError(t, err)
	buf := make([]byte, layout.Size())
	for k := range buf {
		buf[k] = 0xA5 // every byte must be written
	}
	s := enginetest.NewSlot(0, 0, i, layout, buf, 0)
	require.NoError(t, p.Fill(context.Background(), s))
	return packedSample{
		tokens:  append([]int64(nil), collate.As[int64](s.Tensor("tokens"))...),
		pos:     append([]int64(nil), collate.As[int64](s.Tensor("position_ids"))...),
		cu:      append([]int32(nil), collate.As[int32](s.Tensor("cu_seqlens"))...),
		mask:    append([]float32(nil), collate.As[float32](s.Tensor("loss_mask"))...),
		numDocs: collate.As[int32](s.Tensor("num_docs"))[0],
		maxLen:  collate.As[int32](s.Tensor("max_seqlen"))[0],
	}
}

// Every sequence: position_ids restart at 0 exactly at each cu_seqlens
// boundary, no segment crosses a document, loss_mask is 0 on padding and
// first tokens; across the epoch every token of every document appears
// once (SplitLong), or every document that fits appears once, whole
// (DropLong).
func TestPackInvariants(t *testing.T) {
	t.Parallel()
	const eod, pad = -1, 0
	docs := zipfDocs(3, 400, 300)
	docs = append(docs, []int64{}, []int64{5, eod}) // an empty document, one that ends in EOD
	for _, seqLen := range []int{1, 7, 64, 256} {
		for _, long := range []LongDocuments{SplitLong, DropLong} {
			for _, addEOD := range []bool{false, true} {
				cfg := PackConfig{SeqLen: seqLen, Long: long, AddEOD: addEOD, EOD: eod, PadToken: pad}
				p, err := Pack(docs, cfg)
				if seqLen == 1 && long == DropLong && addEOD { // every document is 2 tokens or more
					assert.ErrorContains(t, err, fmt.Sprintf("of %d documents, 1 is empty and DropLong drops %d, longer than PackConfig.SeqLen 1 (", len(docs), len(docs)-1))
					continue
				}
				require.NoError(t, err)
				// effective document: its tokens and an EOD where it lacks one
				eff := func(d int) []int64 {
					out := append([]int64(nil), docs[d]...)
					if addEOD && len(out) > 0 && out[len(out)-1] != eod {
						out = append(out, eod)
					}
					return out
				}
				seen := make([][]int, len(docs)) // seen[d][t]: times token t of document d was packed
				for d := range docs {
					seen[d] = make([]int, len(eff(d)))
				}
				var real int64
				for i := range p.Len() {
					s := fillPacked(t, p, i)
					pieces := p.Pieces(i)
					require.Equal(t, int32(len(pieces)), s.numDocs)
					require.Len(t, s.cu, seqLen+1)
					assert.Equal(t, int32(0), s.cu[0])
					assert.Equal(t, int32(seqLen), s.cu[seqLen])
					longest := int32(0)
					for j := range seqLen {
						a, b := s.cu[j], s.cu[j+1]
						require.LessOrEqual(t, a, b)
						longest = max(longest, b-a)
						for x := a; x < b; x++ {
							require.Equal(t, int64(x-a), s.pos[x], "L %d seq %d: position %d in segment [%d, %d)", seqLen, i, x, a, b)
						}
					}
					assert.Equal(t, longest, s.maxLen)
					end := int(s.cu[len(pieces)])
					for j, pc := range pieces {
						a, b := int(s.cu[j]), int(s.cu[j+1])
						require.Equal(t, pc.Len, b-a)
						want := eff(pc.Document)[pc.Offset : pc.Offset+pc.Len]
						require.Equal(t, want, s.tokens[a:b], "seq %d piece %d", i, j)
						assert.Equal(t, float32(0), s.mask[a])
						for x := a + 1; x < b; x++ {
							assert.Equal(t, float32(1), s.mask[x])
						}
						for x := range pc.Len {
							seen[pc.Document][pc.Offset+x]++
						}
						real += int64(pc.Len)
					}
					for x := end; x < seqLen; x++ {
						assert.Equal(t, int64(pad), s.tokens[x])
						assert.Equal(t, float32(0), s.mask[x])
					}
					if end < seqLen {
						assert.Equal(t, int32(seqLen), s.cu[len(pieces)+1], "the padding is a segment")
					}
				}
				dropped := 0
				for d := range docs {
					n := len(eff(d))
					drop := long == DropLong && n > seqLen
					if drop {
						dropped++
					}
					for x, c := range seen[d] {
						want := 1
						if drop {
							want = 0
						}
						require.Equal(t, want, c, "L %d long %d eod %v: document %d (%d tokens), token %d", seqLen, long, addEOD, d, n, x)
					}
				}
				assert.Equal(t, dropped, p.Dropped())
				assert.Equal(t, real, p.NumTokens())
				if p.Len() > 0 {
					assert.InDelta(t, float64(real)/float64(p.Len()*seqLen), p.Efficiency(), 1e-12)
				}
			}
		}
	}
}

// Packing efficiency on Zipf-like document lengths.
func TestPackEfficiency(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ seqLen, maxLen int }{{2048, 8192}, {4096, 8192}, {1024, 4096}} {
		docs := zipfDocs(7, 20000, tc.maxLen)
		var total int
		for _, d := range docs {
			total += len(d)
		}
		for _, long := range []LongDocuments{SplitLong, DropLong} {
			p, err := Pack(docs, PackConfig{SeqLen: tc.seqLen, Long: long})
			require.NoError(t, err)
			t.Logf("SeqLen %d, 20000 documents of 1 to %d tokens (mean %.0f), long %d: %d sequences, efficiency %.4f, %d dropped",
				tc.seqLen, tc.maxLen, float64(total)/float64(len(docs)), long, p.Len(), p.Efficiency(), p.Dropped())
			assert.Greater(t, p.Efficiency(), 0.95)
		}
	}
}

// Packing efficiency on harder length distributions, for the record.
func TestPackEfficiencyUniform(t *testing.T) {
	t.Parallel()
	const seqLen = 2048
	for _, tc := range []struct {
		name     string
		min, max int
	}{{"uniform 1 to SeqLen", 1, seqLen}, {"uniform SeqLen/2 to SeqLen", seqLen / 2, seqLen}, {"uniform SeqLen/4 to SeqLen/2", seqLen / 4, seqLen / 2}} {
		r := rand.New(rand.NewPCG(1, 2))
		docs := make(DocumentSlice, 20000)
		for d := range docs {
			docs[d] = make([]int64, tc.min+r.IntN(tc.max-tc.min+1))
		}
		p, err := Pack(docs, PackConfig{SeqLen: seqLen})
		require.NoError(t, err)
		t.Logf("SeqLen %d, 20000 documents %s: %d sequences, efficiency %.4f", seqLen, tc.name, p.Len(), p.Efficiency())
		assert.Greater(t, p.Efficiency(), 0.5)
	}
}

// Through a loader, the batches are the same bytes for Workers 0 and 3,
// and the sequences are Fill's.
func TestPackDeterministic(t *testing.T) {
	t.Parallel()
	docs := zipfDocs(5, 300, 200)
	p, err := Pack(docs, PackConfig{SeqLen: 128, AddEOD: true, EOD: -1})
	require.NoError(t, err)
	cfg := engine.Config{BatchSize: 5, Seed: 2, Shuffle: true, WorldSize: 1, Backend: "cpu"}
	raw0 := blendRows(t, p, cfg, 1)
	cfg.Workers = 3
	raw3 := blendRows(t, p, cfg, 1)
	assert.Equal(t, raw0, raw3)
	cfg.Shuffle = false
	raw := blendRows(t, p, cfg, 0)
	var want []byte
	// Batches hold fields one after another: rebuild them from Fill.
	for b := 0; b*5 < p.Len(); b++ {
		n := min(5, p.Len()-b*5)
		for f := range p.Schema() {
			for i := b * 5; i < b*5+n; i++ {
				layout, err := collate.NewLayout(p.Schema(), 1)
				require.NoError(t, err)
				buf := make([]byte, layout.Size())
				s := enginetest.NewSlot(0, 0, i, layout, buf, 0)
				require.NoError(t, p.Fill(context.Background(), s))
				want = append(want, s.TensorAt(f).Bytes()...)
			}
		}
	}
	assert.Equal(t, want, raw)
}

// A MegatronDataset is a Documents: packing it gives the sequences that
// packing the same documents in memory gives, for every token type.
func TestPackMegatron(t *testing.T) {
	t.Parallel()
	docs := zipfDocs(9, 200, 100)
	for d := range docs {
		for x := range docs[d] {
			docs[d][x] %= 30000
		}
	}
	for _, dt := range []collate.DType{collate.Uint16, collate.Int32, collate.Int64} {
		prefix := filepath.Join(t.TempDir(), "corpus")
		require.NoError(t, WriteMegatron(prefix, dt, docs))
		m, err := Megatron(prefix, MegatronConfig{SeqLength: 16})
		require.NoError(t, err)
		cfg := PackConfig{SeqLen: 64, AddEOD: true, EOD: 7}
		pm, err := Pack(m, cfg)
		require.NoError(t, err)
		ps, err := Pack(docs, cfg)
		require.NoError(t, err)
		require.Equal(t, ps.Len(), pm.Len())
		for i := range ps.Len() {
			require.Equal(t, fillPacked(t, ps, i), fillPacked(t, pm, i), "%v sequence %d", dt, i)
		}
		assert.ErrorContains(t, m.ReadDocument(3, 0, make([]int64, len(docs[3])+1)), "out of range")
		require.NoError(t, m.Close())
	}
}

func TestPackErrors(t *testing.T) {
	t.Parallel()
	docs := DocumentSlice{{1, 2}}
	for _, tc := range []struct {
		docs Documents
		cfg  PackConfig
		want string
	}{
		{docs, PackConfig{}, "PackConfig.SeqLen is 0"},
		{docs, PackConfig{SeqLen: -3}, "PackConfig.SeqLen is -3"},
		{docs, PackConfig{SeqLen: 4, Long: 9}, "PackConfig.Long is 9"},
		{nil, PackConfig{SeqLen: 4}, "documents are nil"},
	} {
		_, err := Pack(tc.docs, tc.cfg)
		assert.ErrorContains(t, err, tc.want)
	}
}

// fakeDocuments reports n documents of the lengths lens (every one
// lens[0] tokens where it has one entry), tokens 1, 2, 3, ...
type fakeDocuments struct {
	n    int
	lens []int
}

func (f fakeDocuments) NumDocuments() int { return f.n }

func (f fakeDocuments) DocumentLen(i int) int {
	if len(f.lens) == 1 {
		return f.lens[0]
	}
	return f.lens[i]
}

func (f fakeDocuments) ReadDocument(i, off int, dst []int64) error {
	for x := range dst {
		dst[x] = int64(off + x + 1)
	}
	return nil
}

// Issue 35, 9: a packing with no sequence is an error from Pack that
// says why, with the counts, not a dataset of Len 0; so are a negative
// NumDocuments or DocumentLen, and a NumDocuments that would size its
// tables past what they can index.
func TestPackNoSequence(t *testing.T) {
	t.Parallel()
	const eod = -1
	for _, tc := range []struct {
		name string
		docs Documents
		cfg  PackConfig
		want string
	}{
		{"no documents", DocumentSlice{}, PackConfig{SeqLen: 4}, "corpus: Pack: no documents (NumDocuments is 0): no sequence to pack"},
		{"all empty", DocumentSlice{{}, {}, {}}, PackConfig{SeqLen: 4}, "corpus: Pack: all 3 documents are empty: no sequence to pack"},
		{"all dropped", DocumentSlice{{1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 6}}, PackConfig{SeqLen: 4, Long: DropLong},
			"corpus: Pack: DropLong drops all 2 documents, longer than PackConfig.SeqLen 4: no sequence to pack"},
		{"empty or dropped", DocumentSlice{{}, {1, 2, 3, 4, 5}, {}}, PackConfig{SeqLen: 4, Long: DropLong},
			"corpus: Pack: of 3 documents, 2 are empty and DropLong drops 1, longer than PackConfig.SeqLen 4: no sequence to pack"},
		{"dropped by their EOD", DocumentSlice{{1, 2, 3, 4}, {5, 6, 7, 8}}, PackConfig{SeqLen: 4, Long: DropLong, AddEOD: true, EOD: eod},
			"corpus: Pack: DropLong drops all 2 documents, longer than PackConfig.SeqLen 4 (all 2 only with the EOD that AddEOD appends): no sequence to pack"},
		{"some by their EOD", DocumentSlice{{1, 2, 3}, {1, 2, 3, 4, 5}, {1, 2, 3, eod}}, PackConfig{SeqLen: 3, Long: DropLong, AddEOD: true, EOD: eod},
			"corpus: Pack: DropLong drops all 3 documents, longer than PackConfig.SeqLen 3 (1 of them only with the EOD that AddEOD appends): no sequence to pack"},
		{"negative count", fakeDocuments{n: -3, lens: []int{2}}, PackConfig{SeqLen: 4}, "corpus: Pack: NumDocuments is -3, want >= 0 and at most 2147483647"},
		{"negative count, EOD", fakeDocuments{n: -3, lens: []int{2}}, PackConfig{SeqLen: 4, AddEOD: true}, "corpus: Pack: NumDocuments is -3, want >= 0 and at most 2147483647"},
		{"huge count", fakeDocuments{n: math.MaxInt, lens: []int{2}}, PackConfig{SeqLen: 4, AddEOD: true}, fmt.Sprintf("corpus: Pack: NumDocuments is %d, want >= 0 and at most %d", math.MaxInt, math.MaxInt32)},
		{"negative length", fakeDocuments{n: 3, lens: []int{2, -2, 3}}, PackConfig{SeqLen: 4}, "corpus: Pack: document 1: DocumentLen is -2, want >= 0 and at most 2147483646"},
		{"huge length", fakeDocuments{n: 3, lens: []int{2, 5, math.MaxInt32}}, PackConfig{SeqLen: 4}, fmt.Sprintf("corpus: Pack: document 2: DocumentLen is %d, want >= 0 and at most %d", math.MaxInt32, math.MaxInt32-1)},
	} {
		p, err := Pack(tc.docs, tc.cfg)
		require.Error(t, err, tc.name)
		assert.Nil(t, p, tc.name)
		assert.EqualError(t, err, tc.want, tc.name)
	}
	// One document that survives is enough.
	p, err := Pack(DocumentSlice{{}, {1, 2, 3, 4, 5}, {1, 2}}, PackConfig{SeqLen: 4, Long: DropLong})
	require.NoError(t, err)
	assert.Equal(t, 1, p.Len())
	assert.Equal(t, 1, p.Dropped())
}

// The tree's first-fit is the plain one: each piece into the first
// sequence with room, by a linear scan.
func TestPackFirstFit(t *testing.T) {
	t.Parallel()
	docs := zipfDocs(11, 3000, 700)
	for _, seqLen := range []int{50, 256, 1000} {
		p, err := Pack(docs, PackConfig{SeqLen: seqLen})
		require.NoError(t, err)
		var free []int
		var want [][]PackedPiece
		for d, doc := range docs {
			for off := 0; off < len(doc); off += seqLen {
				n := min(seqLen, len(doc)-off)
				j := 0
				for j < len(free) && free[j] < n {
					j++
				}
				if j == len(free) {
					free = append(free, seqLen)
					want = append(want, nil)
				}
				free[j] -= n
				want[j] = append(want[j], PackedPiece{Document: d, Offset: off, Len: n})
			}
		}
		require.Equal(t, len(want), p.Len(), "SeqLen %d", seqLen)
		for i := range want {
			require.Equal(t, want[i], p.Pieces(i), "SeqLen %d, sequence %d", seqLen, i)
		}
	}
}

// A .bin cut short after Megatron opened it: ReadDocument and Pack's
// Fill return an error naming the file, never crash.
func TestPackMegatronCut(t *testing.T) {
	t.Parallel()
	docs := zipfDocs(2, 50, 100)
	prefix := filepath.Join(t.TempDir(), "corpus")
	require.NoError(t, WriteMegatron(prefix, collate.Int32, docs))
	m, err := Megatron(prefix, MegatronConfig{SeqLength: 8})
	require.NoError(t, err)
	defer m.Close()
	p, err := Pack(m, PackConfig{SeqLen: 128})
	require.NoError(t, err)
	require.NoError(t, os.Truncate(prefix+".bin", 0))
	err = m.ReadDocument(len(docs)-1, 0, make([]int64, len(docs[len(docs)-1])))
	assert.ErrorContains(t, err, "corpus.bin")
	layout, err := collate.NewLayout(p.Schema(), 1)
	require.NoError(t, err)
	err = p.Fill(context.Background(), enginetest.NewSlot(0, 0, p.Len()-1, layout, make([]byte, layout.Size()), 0))
	assert.ErrorContains(t, err, "corpus: Pack: sequence")
}

// A loader over a packed dataset saved mid-epoch and resumed delivers
// exactly the rest of the epoch.
func TestPackResume(t *testing.T) {
	t.Parallel()
	docs := zipfDocs(4, 500, 300)
	pack := func() *PackedDataset {
		p, err := Pack(docs, PackConfig{SeqLen: 256, AddEOD: true, EOD: -1})
		require.NoError(t, err)
		return p
	}
	cfg := engine.Config{BatchSize: 4, Workers: 2, Seed: 8, Shuffle: true, WorldSize: 1, Backend: "cpu"}
	full := blendRows(t, pack(), cfg, 3)
	p := pack()
	l, err := engine.New(p, cfg)
	require.NoError(t, err)
	var head []byte
	n := 0
	for batch, err := range l.Epoch(context.Background(), 3) {
		require.NoError(t, err)
		for _, f := range p.Schema() {
			head = append(head, batch.Tensor(f.Name).Bytes()...)
		}
		if n++; n == 7 {
			break
		}
	}
	st := l.State()
	require.NoError(t, l.Close())
	cfg.Resume, cfg.Workers = &st, 0
	assert.Equal(t, full, append(head, blendRows(t, pack(), cfg, 3)...))
}

// A loader over a packed dataset shows the packing efficiency in its
// Stats: after an epoch, the dataset's own figure, for any Workers.
func TestPackStats(t *testing.T) {
	t.Parallel()
	docs := zipfDocs(6, 400, 300)
	for _, workers := range []int{0, 2} {
		p, err := Pack(docs, PackConfig{SeqLen: 256, AddEOD: true, EOD: -1})
		require.NoError(t, err)
		l, err := engine.New(p, engine.Config{BatchSize: 4, Workers: workers, Shuffle: true, WorldSize: 1, Backend: "cpu"})
		require.NoError(t, err)
		for _, err := range l.Epoch(context.Background(), 0) {
			require.NoError(t, err)
		}
		st := l.Stats().Dataset
		require.NoError(t, l.Close())
		assert.Equal(t, map[string]int64{"packed_samples": int64(p.Len()), "packed_tokens": p.NumTokens(), "packed_slots": int64(p.Len()) * 256}, st, "workers %d", workers)
		assert.Equal(t, p.Efficiency(), float64(st["packed_tokens"])/float64(st["packed_slots"]), "workers %d", workers)
		assert.Greater(t, p.Efficiency(), 0.5)
		assert.Contains(t, l.Stats().String(), fmt.Sprintf("packed_slots %d", p.Len()*256))
	}
}
