package corpus

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

// resumeOn saves a State of a loader over was after cut batches of epoch
// 1, through JSON, and returns engine.New's error for a loader over now
// resuming it, with the same Config.
func resumeOn(t *testing.T, was, now engine.Dataset, cfg engine.Config, cut int) error {
	t.Helper()
	cfg.WorldSize, cfg.Backend = 1, "cpu"
	l, err := engine.New(was, cfg)
	require.NoError(t, err)
	n := 0
	for _, err := range l.Epoch(context.Background(), 1) {
		require.NoError(t, err)
		if n++; n == cut {
			break
		}
	}
	st := l.State()
	require.NoError(t, l.Close())
	js, err := json.Marshal(st)
	require.NoError(t, err)
	var back engine.State
	require.NoError(t, json.Unmarshal(js, &back))
	cfg.Resume = &back
	l, err = engine.New(now, cfg)
	if err == nil {
		require.NoError(t, l.Close())
	}
	return err
}

// refused checks that a State of was is refused for now, which has its
// Len and Schema, for its fingerprint, naming key.
func refused(t *testing.T, was, now engine.Dataset, cfg engine.Config, key string) {
	t.Helper()
	require.Equal(t, was.Len(), now.Len(), "the same Len")
	require.Equal(t, fmt.Sprint(was.Schema()), fmt.Sprint(now.Schema()), "the same Schema")
	err := resumeOn(t, was, now, cfg, 3)
	require.Error(t, err, "a State of one dataset resumed on another: %s", key)
	assert.ErrorContains(t, err, "Config.Resume: Dataset")
	assert.ErrorContains(t, err, "dataset."+key+":")
}

// shiftedDocs returns docs with every token moved by delta: the same
// lengths, other tokens.
func shiftedDocs(docs [][]int64, delta int64) [][]int64 {
	out := make([][]int64, len(docs))
	for i, doc := range docs {
		out[i] = make([]int64, len(doc))
		for j, v := range doc {
			out[i][j] = v + delta
		}
	}
	return out
}

// fpDocs is a corpus for the fingerprint tests: 300 documents of 1 to
// 200 tokens, 30,000 or so in all; token j of document i is
// (i*1000+j) mod 30000, plus delta.
func fpDocs(delta int64) [][]int64 {
	docs := make([][]int64, 300)
	for i := range docs {
		docs[i] = make([]int64, 1+(i*7919)%200)
		for j := range docs[i] {
			docs[i][j] = int64(i*1000+j)%30000 + delta
		}
	}
	return docs
}

// openMegatron opens the corpus at prefix, closed at the test's end.
func openMegatron(t testing.TB, prefix string, cfg MegatronConfig) *MegatronDataset {
	t.Helper()
	d, err := Megatron(prefix, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// openTokens opens the token file at path, closed at the test's end.
func openTokens(t testing.TB, path string, cfg TokenConfig) *TokenDataset {
	t.Helper()
	d, err := Tokens(path, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// Issue 35, row 1: a State of a Megatron dataset is refused for the same
// corpus with another MegatronConfig.Seed (every batch differed).
func TestFingerprintRefusesAnotherMegatronSeed(t *testing.T) {
	prefix := megatronDocs(t, collate.Uint16, fpDocs(0))
	cfg := MegatronConfig{SeqLength: 64, Seed: 1}
	was := openMegatron(t, prefix, cfg)
	cfg.Seed = 2
	refused(t, was, openMegatron(t, prefix, cfg), engine.Config{BatchSize: 4}, "megatron.seed")
}

// Issue 35, row 2: a State is refused for another corpus of the same
// length: a token file of as many tokens, a Megatron corpus of the same
// documents' lengths (the same .idx) with other tokens, and one of as
// many tokens in other documents (another .idx).
func TestFingerprintRefusesAnotherCorpus(t *testing.T) {
	t.Run("Tokens", func(t *testing.T) {
		path, _ := writeTokens(t, 30000, 2)
		other := writeShiftedTokens(t, path)
		for _, cfg := range []TokenConfig{{Context: 64}, {Context: 64, Random: true}} {
			refused(t, openTokens(t, path, cfg), openTokens(t, other, cfg), engine.Config{BatchSize: 4, Shuffle: true}, "tokens.file")
		}
	})
	t.Run("Megatron", func(t *testing.T) {
		cfg := MegatronConfig{SeqLength: 64, Seed: 1}
		was := openMegatron(t, megatronDocs(t, collate.Uint16, fpDocs(0)), cfg)
		refused(t, was, openMegatron(t, megatronDocs(t, collate.Uint16, fpDocs(1)), cfg), engine.Config{BatchSize: 4}, "megatron.bin")
		// The same tokens, cut into other documents.
		docs := fpDocs(0)
		docs[10] = append(docs[10], docs[11][:1]...)
		docs[11] = docs[11][1:]
		refused(t, was, openMegatron(t, megatronDocs(t, collate.Uint16, docs), cfg), engine.Config{BatchSize: 4}, "megatron.idx")
	})
}

// writeShiftedTokens writes a token file of path's size beside it, every
// uint16 token plus one, and returns its path.
func writeShiftedTokens(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for i := 0; i+1 < len(b); i += 2 {
		b[i]++
	}
	other := filepath.Join(t.TempDir(), "other.bin")
	require.NoError(t, os.WriteFile(other, b, 0o644))
	return other
}

// Issue 35, row 3: a State of a Blend {0.7, 0.3} of two Megatron datasets
// is refused for the Blend {0.3, 0.7} of the same size (the Blend's own
// part), and for the Blend {0.7, 0.3} of the same corpora where one has
// another Seed (its Megatron dataset's part, nested).
func TestFingerprintRefusesSwappedBlendWeights(t *testing.T) {
	cfg := MegatronConfig{SeqLength: 64, Seed: 1}
	pa, pb := megatronDocs(t, collate.Uint16, fpDocs(0)), megatronDocs(t, collate.Uint16, fpDocs(1))
	a, b := openMegatron(t, pa, cfg), openMegatron(t, pb, cfg)
	blend := func(a, b engine.Dataset, w ...float64) engine.Dataset {
		ds, err := engine.Blend(engine.BlendConfig{Weights: w, Size: 188}, a, b)
		require.NoError(t, err)
		return ds
	}
	refused(t, blend(a, b, 0.7, 0.3), blend(a, b, 0.3, 0.7), engine.Config{BatchSize: 4}, "blend.weights")
	reseeded := openMegatron(t, pb, MegatronConfig{SeqLength: 64, Seed: 2})
	refused(t, blend(a, b, 0.7, 0.3), blend(a, reseeded, 0.7, 0.3), engine.Config{BatchSize: 4}, "blend.concat.1.megatron.seed")
}

// Issue 35, row 4: a State of a packed dataset is refused for the same
// documents packed with another PadToken.
func TestFingerprintRefusesAnotherPadToken(t *testing.T) {
	docs := DocumentSlice(fpDocs(0))
	pack := func(pad int64) *PackedDataset {
		p, err := Pack(docs, PackConfig{SeqLen: 256, PadToken: pad})
		require.NoError(t, err)
		return p
	}
	refused(t, pack(0), pack(-1), engine.Config{BatchSize: 4, Shuffle: true}, "pack.pad_token")
}

// Each setting that changes a dataset's samples changes its fingerprint,
// under its key, where Len and Schema stay the same; what does not change
// them (the field's name aside, which the Schema holds) leaves it.
func TestFingerprintNamesTheConfig(t *testing.T) {
	path, _ := writeTokens(t, 30000, 2)
	tok := func(cfg TokenConfig) engine.Fingerprint { return openTokens(t, path, cfg).Fingerprint() }
	prefix := megatronDocs(t, collate.Uint16, fpDocs(0))
	meg := func(cfg MegatronConfig) engine.Fingerprint { return openMegatron(t, prefix, cfg).Fingerprint() }
	docs := DocumentSlice(fpDocs(0))
	pack := func(cfg PackConfig) engine.Fingerprint {
		p, err := Pack(docs, cfg)
		require.NoError(t, err)
		return p.Fingerprint()
	}
	for _, tc := range []struct {
		key      string
		was, now engine.Fingerprint
	}{
		{"tokens.context", tok(TokenConfig{Context: 64}), tok(TokenConfig{Context: 32})},
		{"tokens.stride", tok(TokenConfig{Context: 64}), tok(TokenConfig{Context: 64, Stride: 32})},
		{"tokens.random", tok(TokenConfig{Context: 64}), tok(TokenConfig{Context: 64, Random: true})},
		{"tokens.out", tok(TokenConfig{Context: 64}), tok(TokenConfig{Context: 64, Out: collate.Int64})},
		{"tokens.dtype", tok(TokenConfig{Context: 64}), tok(TokenConfig{Context: 64, DType: collate.Uint32})},
		{"megatron.seed", meg(MegatronConfig{SeqLength: 64, Seed: 1}), meg(MegatronConfig{SeqLength: 64, Seed: 2})},
		{"megatron.seq_length", meg(MegatronConfig{SeqLength: 64}), meg(MegatronConfig{SeqLength: 32})},
		{"megatron.out", meg(MegatronConfig{SeqLength: 64}), meg(MegatronConfig{SeqLength: 64, Out: collate.Int32})},
		{"pack.seq_len", pack(PackConfig{SeqLen: 256}), pack(PackConfig{SeqLen: 128})},
		{"pack.long", pack(PackConfig{SeqLen: 128}), pack(PackConfig{SeqLen: 128, Long: DropLong})},
		{"pack.add_eod", pack(PackConfig{SeqLen: 256}), pack(PackConfig{SeqLen: 256, AddEOD: true})},
		{"pack.eod", pack(PackConfig{SeqLen: 256, AddEOD: true, EOD: 1}), pack(PackConfig{SeqLen: 256, AddEOD: true, EOD: 2})},
		{"pack.pad_token", pack(PackConfig{SeqLen: 256}), pack(PackConfig{SeqLen: 256, PadToken: 9})},
		{"pack.documents.document_slice.tokens", pack(PackConfig{SeqLen: 256}), func() engine.Fingerprint {
			p, err := Pack(DocumentSlice(shiftedDocs(docs, 1)), PackConfig{SeqLen: 256})
			require.NoError(t, err)
			return p.Fingerprint()
		}()},
	} {
		require.Contains(t, tc.now, tc.key)
		assert.NotEqual(t, tc.was[tc.key], tc.now[tc.key], tc.key)
	}
	assert.Equal(t, tok(TokenConfig{Context: 64}), tok(TokenConfig{Context: 64, Field: "input_ids"}))
	assert.Equal(t, tok(TokenConfig{Context: 64, Random: true, Stride: 3}), tok(TokenConfig{Context: 64, Random: true}), "Random has no stride")
	assert.Equal(t, pack(PackConfig{SeqLen: 256, EOD: 1}), pack(PackConfig{SeqLen: 256, EOD: 2}), "no EOD is appended without AddEOD")
	assert.Equal(t, meg(MegatronConfig{SeqLength: 64}), meg(MegatronConfig{SeqLength: 64, Field: "input_ids"}))
}

// The same corpus copied to another folder keeps its fingerprint, so a
// job resumed there is not refused: a token file, a Megatron corpus, and
// packed documents, in memory or of a Megatron corpus. Pack over a
// Megatron corpus records its files only: its SeqLength, Seed and Out do
// not change the documents.
func TestFingerprintSameCorpusElsewhere(t *testing.T) {
	a, _ := writeTokens(t, 30000, 2)
	b, _ := writeTokens(t, 30000, 2)
	require.NotEqual(t, a, b)
	cfg := TokenConfig{Context: 64}
	assert.NoError(t, resumeOn(t, openTokens(t, a, cfg), openTokens(t, b, cfg), engine.Config{BatchSize: 4, Shuffle: true}, 3))

	pa, pb := megatronDocs(t, collate.Uint16, fpDocs(0)), megatronDocs(t, collate.Uint16, fpDocs(0))
	mc := MegatronConfig{SeqLength: 64, Seed: 3}
	ma, mb := openMegatron(t, pa, mc), openMegatron(t, pb, mc)
	assert.Equal(t, ma.Fingerprint(), mb.Fingerprint())
	assert.NoError(t, resumeOn(t, ma, mb, engine.Config{BatchSize: 4}, 3))

	packOf := func(docs Documents) *PackedDataset {
		p, err := Pack(docs, PackConfig{SeqLen: 256, AddEOD: true, EOD: 7})
		require.NoError(t, err)
		return p
	}
	pc := engine.Config{BatchSize: 4, Shuffle: true}
	assert.NoError(t, resumeOn(t, packOf(DocumentSlice(fpDocs(0))), packOf(DocumentSlice(fpDocs(0))), pc, 3))
	other := openMegatron(t, pb, MegatronConfig{SeqLength: 5, Seed: 9, Out: collate.Int64})
	assert.NoError(t, resumeOn(t, packOf(ma), packOf(other), pc, 3))
	f := packOf(ma).Fingerprint()
	assert.Equal(t, "*corpus.MegatronDataset", f["pack.documents"])
	assert.Equal(t, ma.Fingerprint()["megatron.bin"], f["pack.documents.megatron.bin"])
	assert.NotContains(t, f, "pack.documents.megatron.seed")

	// Another Megatron corpus under the pack is refused, naming its file.
	refused(t, packOf(ma), packOf(openMegatron(t, megatronDocs(t, collate.Uint16, fpDocs(1)), mc)), pc, "pack.documents.megatron.bin")
}

// A DocumentSlice's tokens are fingerprinted as engine.FingerprintData
// fingerprints its documents back to back, 8 little-endian bytes a token,
// empty documents and all: below 32 Ki tokens, where all are hashed, and
// above, where 64 runs are, read across document boundaries.
func TestDocumentSliceFingerprint(t *testing.T) {
	for _, n := range []int{0, 1, 40, 3000} {
		docs := zipfDocs(uint64(n), n, 100)
		for i := 0; i < n; i += 7 {
			docs[i] = nil
		}
		var all []byte
		for _, doc := range docs {
			for _, v := range doc {
				all = binary.LittleEndian.AppendUint64(all, uint64(v))
			}
		}
		f := docs.Fingerprint()
		assert.Equal(t, engine.FingerprintBytes(all), f["document_slice.tokens"], "%d documents", n)
		assert.True(t, strings.HasPrefix(f["document_slice.lengths"], fmt.Sprint(n)+" "), f["document_slice.lengths"])
		if n < 2 {
			continue
		}
		moved := slices.Clone(docs) // a token moved to the next document: the same tokens, other lengths
		for i := range moved {
			if len(moved[i]) > 1 && i+1 < n {
				moved[i], moved[i+1] = moved[i][:len(moved[i])-1], append([]int64{moved[i][len(moved[i])-1]}, moved[i+1]...)
				break
			}
		}
		g := moved.Fingerprint()
		assert.Equal(t, f["document_slice.tokens"], g["document_slice.tokens"])
		assert.NotEqual(t, f["document_slice.lengths"], g["document_slice.lengths"])
	}
}

// The stated limit: a file larger than FingerprintData hashes whole
// (256 KiB), edited in place between its sampled blocks, its size kept,
// keeps its fingerprint; edited in a sampled block, it does not.
func TestFingerprintLimitSampledFile(t *testing.T) {
	path, _ := writeTokens(t, 1<<18, 2) // 512 KiB
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	was := openTokens(t, path, TokenConfig{Context: 64}).Fingerprint()
	edit := func(at int) engine.Fingerprint {
		c := slices.Clone(b)
		c[at] ^= 0xff
		p := filepath.Join(t.TempDir(), "train.bin")
		require.NoError(t, os.WriteFile(p, c, 0o644))
		return openTokens(t, p, TokenConfig{Context: 64}).Fingerprint()
	}
	step := (len(b) - 4096) / 63
	assert.Equal(t, was, edit(4096+100), "between block 0 and block 1 (at %d)", step)
	assert.NotEqual(t, was["tokens.file"], edit(step + 100)["tokens.file"], "in block 1")
}

// outOfRange is a dataset whose batches ask its dataset's FillBatch for
// index Len in their last place.
type outOfRange struct{ *TokenDataset }

func (d outOfRange) FillBatch(ctx context.Context, b *engine.BatchSlot) error {
	inner := slices.Clone(b.Indices())
	inner[len(inner)-1] = d.Len()
	return engine.FillBatchAt(ctx, d.TokenDataset, b, inner)
}

// An index outside [0, Len) is an error naming it, through Fill and
// FillBatch, also for Random sequences, whose starts do not depend on it
// (the conformance suite found Random's Fill of index -1 and Len to
// succeed).
func TestTokensIndexOutOfRange(t *testing.T) {
	path, _ := writeTokens(t, 3000, 2)
	for _, random := range []bool{false, true} {
		d := openTokens(t, path, TokenConfig{Context: 32, Random: random})
		layout, err := collate.NewLayout(d.Schema(), 1)
		require.NoError(t, err)
		for _, i := range []int{-1, d.Len(), d.Len() + 1} {
			err := d.Fill(context.Background(), enginetest.NewSlot(0, 0, i, layout, make([]byte, layout.Size()), 0))
			assert.ErrorContains(t, err, fmt.Sprintf("index %d, want [0, %d)", i, d.Len()), "random %v", random)
		}
		l, err := engine.New(outOfRange{d}, engine.Config{BatchSize: 4, WorldSize: 1, Backend: "cpu"})
		require.NoError(t, err)
		for _, err := range l.Epoch(context.Background(), 0) {
			assert.ErrorContains(t, err, fmt.Sprintf("index %d, want [0, %d)", d.Len(), d.Len()), "random %v", random)
			break
		}
		require.NoError(t, l.Close())
	}
}

// A file's identity is the same read from its mapping or with ReadAt
// (the fallback where it is not mapped), whole (up to 256 KiB) or
// sampled, and is engine.FingerprintData of its bytes.
func TestFileIdentityReadAt(t *testing.T) {
	for _, n := range []int{1000, 1 << 18} {
		path, _ := writeTokens(t, n, 2)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		want, err := engine.FingerprintData(bytes.NewReader(b), int64(len(b)))
		require.NoError(t, err)
		mapped := openTokens(t, path, TokenConfig{Context: 8})
		assert.Equal(t, want, mapped.Fingerprint()["tokens.file"], "%d tokens", n)
		f, err := os.Open(path)
		require.NoError(t, err)
		got, err := fileIdentity(readAtFile{f}, int64(len(b)))
		require.NoError(t, err)
		assert.Equal(t, want, got, "%d tokens, ReadAt", n)
		require.NoError(t, f.Close())
	}
}
