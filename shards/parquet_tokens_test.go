package shards

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"
	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/corpus"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

// tokRow32 is a row of a Hugging Face tokenized dataset: list<int32>.
type tokRow32 struct {
	Text     string  `parquet:"text"`
	InputIDs []int32 `parquet:"input_ids,list"`
}

// tokRow64 is one with list<int64>.
type tokRow64 struct {
	InputIDs []int64 `parquet:"input_ids,list"`
}

// tokRowOpt has a list of optional tokens.
type tokRowOpt struct {
	InputIDs []*int32 `parquet:"input_ids,list"`
}

// tokRowsRandom returns n documents of 0 to maxLen tokens (some empty),
// tokens below vocab.
func tokRowsRandom(seed uint64, n, maxLen int, vocab int32) [][]int64 {
	r := rand.New(rand.NewPCG(seed, 1))
	docs := make([][]int64, n)
	for i := range docs {
		l := r.IntN(maxLen + 1)
		if i%13 == 5 {
			l = 0
		}
		docs[i] = make([]int64, l)
		for k := range docs[i] {
			docs[i][k] = int64(r.Int32N(vocab))
		}
	}
	return docs
}

func writeTok32(t testing.TB, path string, docs [][]int64, perGroup int) {
	t.Helper()
	rows := make([]tokRow32, len(docs))
	for i, d := range docs {
		rows[i].Text = "doc"
		rows[i].InputIDs = make([]int32, len(d))
		for k, v := range d {
			rows[i].InputIDs[k] = int32(v)
		}
	}
	writeParquet(t, path, rows, perGroup)
}

func writeTok64(t testing.TB, path string, docs [][]int64, perGroup int) {
	t.Helper()
	rows := make([]tokRow64, len(docs))
	for i, d := range docs {
		rows[i].InputIDs = d
	}
	writeParquet(t, path, rows, perGroup)
}

// requireSameDocs checks every token of every document.
func requireSameDocs(t *testing.T, want [][]int64, got corpus.Documents) {
	t.Helper()
	require.Equal(t, len(want), got.NumDocuments())
	for i, w := range want {
		require.Equal(t, len(w), got.DocumentLen(i), "document %d", i)
		dst := make([]int64, len(w))
		require.NoError(t, got.ReadDocument(i, 0, dst))
		if len(w) == 0 {
			continue
		}
		require.Equal(t, w, dst, "document %d", i)
		if len(w) > 2 { // a read from an offset
			dst = make([]int64, len(w)-2)
			require.NoError(t, got.ReadDocument(i, 1, dst))
			require.Equal(t, w[1:len(w)-1], dst, "document %d from 1", i)
		}
	}
}

func TestParquetDocumentsInt32(t *testing.T) {
	dir := t.TempDir()
	var all [][]int64
	for f := range 3 {
		docs := tokRowsRandom(uint64(f), 200, 300, 50000)
		writeTok32(t, filepath.Join(dir, "train-"+string(rune('0'+f))+".parquet"), docs, 37)
		all = append(all, docs...)
	}
	d, err := ParquetDocuments(context.Background(), filepath.Join(dir, "train-{0..2}.parquet"), ParquetDocsConfig{})
	require.NoError(t, err)
	requireSameDocs(t, all, d)
	require.Len(t, d.Files(), 3)
	pf, err := os.Open(filepath.Join(dir, "train-0.parquet"))
	require.NoError(t, err)
	defer pf.Close()
	fi, err := pf.Stat()
	require.NoError(t, err)
	file, err := parquet.OpenFile(pf, fi.Size())
	require.NoError(t, err)
	require.Len(t, file.RowGroups(), 6) // several row groups
	require.Equal(t, []string{"input_ids", "list", "element"}, file.Schema().Columns()[1])
	first, end := d.FileDocuments(1)
	require.Equal(t, [2]int{200, 400}, [2]int{first, end})
	var n int64
	for _, doc := range all {
		n += int64(len(doc))
	}
	require.Equal(t, n, d.NumTokens())
	require.Nil(t, d.t64)
	require.Error(t, d.ReadDocument(0, 0, make([]int64, d.DocumentLen(0)+1)))
	require.Error(t, d.ReadDocument(len(all), 0, nil))
}

func TestParquetDocumentsInt64(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.parquet")
	docs := tokRowsRandom(7, 300, 100, 1000)
	docs[3] = append(docs[3], math.MaxInt32+5, -3) // fine as int64
	writeTok64(t, p, docs, 64)

	d, err := ParquetDocuments(context.Background(), p, ParquetDocsConfig{Int64: true})
	require.NoError(t, err)
	requireSameDocs(t, docs, d)

	// Without Int64 they are errors naming file, column and which.
	_, err = ParquetDocuments(context.Background(), p, ParquetDocsConfig{})
	require.ErrorContains(t, err, p)
	require.ErrorContains(t, err, `column "input_ids"`)
	require.ErrorContains(t, err, "above math.MaxInt32")
	require.ErrorContains(t, err, "row 3")

	docs[3] = docs[3][:len(docs[3])-2]
	docs[3] = append(docs[3], -3)
	writeTok64(t, p, docs, 64)
	_, err = ParquetDocuments(context.Background(), p, ParquetDocsConfig{})
	require.ErrorContains(t, err, p)
	require.ErrorContains(t, err, "negative")

	// In range, int64 files read as int32.
	docs[3] = docs[3][:len(docs[3])-1]
	writeTok64(t, p, docs, 64)
	d, err = ParquetDocuments(context.Background(), p, ParquetDocsConfig{})
	require.NoError(t, err)
	requireSameDocs(t, docs, d)
}

// A packed epoch over ParquetDocs holds every token exactly once, and
// the tokens of the sequences are the documents'.
func TestParquetDocumentsPack(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.parquet")
	docs := tokRowsRandom(3, 500, 400, 32000)
	writeTok32(t, p, docs, 50)
	d, err := ParquetDocuments(context.Background(), p, ParquetDocsConfig{})
	require.NoError(t, err)
	const seqLen = 256
	packed, err := corpus.Pack(d, corpus.PackConfig{SeqLen: seqLen})
	require.NoError(t, err)
	seen := make([][]int, len(docs))
	for i, doc := range docs {
		seen[i] = make([]int, len(doc))
	}
	var total int64
	for i := range packed.Len() {
		s := packedTokens(t, packed, i)
		at := 0
		for _, pc := range packed.Pieces(i) {
			for k := range pc.Len {
				seen[pc.Document][pc.Offset+k]++
				require.Equal(t, docs[pc.Document][pc.Offset+k], s[at+k])
			}
			at += pc.Len
			total += int64(pc.Len)
		}
	}
	for i := range seen {
		for k, n := range seen[i] {
			require.Equal(t, 1, n, "token %d of document %d", k, i)
		}
	}
	require.Equal(t, d.NumTokens(), total)
	require.Equal(t, d.NumTokens(), packed.NumTokens())
}

// packedTokens fills sample i of p and returns its tokens.
func packedTokens(t *testing.T, p *corpus.PackedDataset, i int) []int64 {
	t.Helper()
	layout, err := engine.NewLayout(p.Schema(), 1)
	require.NoError(t, err)
	s := enginetest.NewSlot(0, 0, i, layout, make([]byte, layout.Size()), 0)
	require.NoError(t, p.Fill(context.Background(), s))
	return collate.As[int64](s.Tensor("tokens"))
}

func TestParquetDocumentsRemote(t *testing.T) {
	dir := t.TempDir()
	var all [][]int64
	for f := range 2 {
		docs := tokRowsRandom(uint64(10+f), 150, 200, 50000)
		writeTok32(t, filepath.Join(dir, "part-"+string(rune('0'+f))+".parquet"), docs, 40)
		all = append(all, docs...)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	o := &Opener{}
	d, err := ParquetDocuments(context.Background(), srv.URL+"/part-{0..1}.parquet", ParquetDocsConfig{Opener: o})
	require.NoError(t, err)
	requireSameDocs(t, all, d)
	require.Positive(t, o.Requests())

	_, err = ParquetDocuments(context.Background(), srv.URL+"/part-0.parquet", ParquetDocsConfig{Opener: o, MaxParquetBytes: 100})
	require.ErrorContains(t, err, "part-0.parquet")
	require.ErrorContains(t, err, "MaxParquetBytes")

	_, err = ParquetDocuments(context.Background(), srv.URL+"/missing.parquet", ParquetDocsConfig{Opener: o})
	require.ErrorContains(t, err, "missing.parquet")
}

func TestParquetDocumentsErrors(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	good := filepath.Join(dir, "good.parquet")
	docs := tokRowsRandom(5, 100, 100, 1000)
	writeTok32(t, good, docs, 30)

	t.Run("missing column", func(t *testing.T) {
		_, err := ParquetDocuments(ctx, good, ParquetDocsConfig{Column: "tokens"})
		require.ErrorContains(t, err, good)
		require.ErrorContains(t, err, `no column "tokens"`)
		require.ErrorContains(t, err, "input_ids")
	})
	t.Run("not a list", func(t *testing.T) {
		_, err := ParquetDocuments(ctx, good, ParquetDocsConfig{Column: "text"})
		require.ErrorContains(t, err, good)
		require.ErrorContains(t, err, `column "text"`)
		require.ErrorContains(t, err, "not a list of integers")
	})
	t.Run("list of strings", func(t *testing.T) {
		type row struct {
			InputIDs []string `parquet:"input_ids,list"`
		}
		p := filepath.Join(dir, "strings.parquet")
		writeParquet(t, p, []row{{InputIDs: []string{"a"}}}, 10)
		_, err := ParquetDocuments(ctx, p, ParquetDocsConfig{})
		require.ErrorContains(t, err, p)
		require.ErrorContains(t, err, "not a list of integers")
		require.ErrorContains(t, err, "BYTE_ARRAY")
	})
	t.Run("list of floats", func(t *testing.T) {
		type row struct {
			InputIDs []float32 `parquet:"input_ids,list"`
		}
		p := filepath.Join(dir, "floats.parquet")
		writeParquet(t, p, []row{{InputIDs: []float32{1}}}, 10)
		_, err := ParquetDocuments(ctx, p, ParquetDocsConfig{})
		require.ErrorContains(t, err, "not a list of integers")
	})
	t.Run("nested list", func(t *testing.T) {
		type row struct {
			InputIDs [][]int32 `parquet:"input_ids,list"`
		}
		p := filepath.Join(dir, "nested.parquet")
		writeParquet(t, p, []row{{InputIDs: [][]int32{{1}}}}, 10)
		_, err := ParquetDocuments(ctx, p, ParquetDocsConfig{})
		require.ErrorContains(t, err, "not a list of integers")
	})
	t.Run("null token", func(t *testing.T) {
		one := int32(1)
		p := filepath.Join(dir, "nulls.parquet")
		writeParquet(t, p, []tokRowOpt{{InputIDs: []*int32{&one}}, {InputIDs: []*int32{&one, nil}}}, 10)
		_, err := ParquetDocuments(ctx, p, ParquetDocsConfig{})
		require.ErrorContains(t, err, p)
		require.ErrorContains(t, err, "row 1: token 1 is null")
	})
	t.Run("optional tokens", func(t *testing.T) {
		one, two := int32(1), int32(2)
		p := filepath.Join(dir, "opt.parquet")
		writeParquet(t, p, []tokRowOpt{{InputIDs: []*int32{&one}}, {}, {InputIDs: []*int32{&two, &one}}}, 10)
		d, err := ParquetDocuments(ctx, p, ParquetDocsConfig{})
		require.NoError(t, err)
		requireSameDocs(t, [][]int64{{1}, {}, {2, 1}}, d)
	})
	t.Run("max tokens", func(t *testing.T) {
		_, err := ParquetDocuments(ctx, good, ParquetDocsConfig{MaxTokens: 10})
		require.ErrorContains(t, err, good)
		require.ErrorContains(t, err, "MaxTokens (10)")
	})
	t.Run("truncated", func(t *testing.T) {
		data, err := os.ReadFile(good)
		require.NoError(t, err)
		for _, cut := range []int{len(data) - 1, len(data) / 2, 10, 3} {
			p := filepath.Join(dir, "cut.parquet")
			require.NoError(t, os.WriteFile(p, data[:cut], 0o644))
			_, err := ParquetDocuments(ctx, p, ParquetDocsConfig{})
			require.ErrorContains(t, err, p, "cut at %d", cut)
		}
	})
	t.Run("corrupt pages", func(t *testing.T) {
		data, err := os.ReadFile(good)
		require.NoError(t, err)
		// Overwrite the data between the header and the footer.
		bad := append([]byte(nil), data...)
		for k := 4; k < len(bad)/2; k++ {
			bad[k] ^= 0x5a
		}
		p := filepath.Join(dir, "corrupt.parquet")
		require.NoError(t, os.WriteFile(p, bad, 0o644))
		_, err = ParquetDocuments(ctx, p, ParquetDocsConfig{})
		require.ErrorContains(t, err, p)
	})
	t.Run("cut inside, footer kept", func(t *testing.T) {
		data, err := os.ReadFile(good)
		require.NoError(t, err)
		footer := int(binary.LittleEndian.Uint32(data[len(data)-8:])) + 8
		cut := append(append([]byte(nil), data[:len(data)/3]...), data[len(data)-footer:]...)
		p := filepath.Join(dir, "cutinside.parquet")
		require.NoError(t, os.WriteFile(p, cut, 0o644))
		_, err = ParquetDocuments(ctx, p, ParquetDocsConfig{})
		require.ErrorContains(t, err, p)
		require.ErrorContains(t, err, "corrupt")
	})
	t.Run("bare repeated field", func(t *testing.T) {
		type row struct {
			InputIDs []int64 `parquet:"input_ids"`
		}
		p := filepath.Join(dir, "repeated.parquet")
		writeParquet(t, p, []row{{InputIDs: []int64{4, 5}}, {}, {InputIDs: []int64{6}}}, 2)
		d, err := ParquetDocuments(ctx, p, ParquetDocsConfig{})
		require.NoError(t, err)
		requireSameDocs(t, [][]int64{{4, 5}, {}, {6}}, d)
		require.Equal(t, []int64{6}, d.Document(2))
	})
	t.Run("unsigned above int32", func(t *testing.T) {
		type row struct {
			InputIDs []uint32 `parquet:"input_ids,list"`
		}
		p := filepath.Join(dir, "uint32.parquet")
		writeParquet(t, p, []row{{InputIDs: []uint32{1, math.MaxUint32}}}, 10)
		_, err := ParquetDocuments(ctx, p, ParquetDocsConfig{})
		require.ErrorContains(t, err, p)
		require.ErrorContains(t, err, "token 1 is 4294967295, above math.MaxInt32")
		d, err := ParquetDocuments(ctx, p, ParquetDocsConfig{Int64: true})
		require.NoError(t, err)
		requireSameDocs(t, [][]int64{{1, math.MaxUint32}}, d)
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := ParquetDocuments(ctx, filepath.Join(dir, "nope.parquet"), ParquetDocsConfig{})
		require.ErrorContains(t, err, "nope.parquet")
	})
	t.Run("bad pattern", func(t *testing.T) {
		_, err := ParquetDocuments(ctx, filepath.Join(dir, "x-{0..1.parquet"), ParquetDocsConfig{})
		require.Error(t, err)
	})
	t.Run("cancelled", func(t *testing.T) {
		c, cancel := context.WithCancel(ctx)
		cancel()
		_, err := ParquetDocuments(c, good, ParquetDocsConfig{})
		require.ErrorIs(t, err, context.Canceled)
	})
}

// The conformance suite passes on ParquetDocuments packed (corpus.Pack),
// the file written again in a new folder each time the suite asks.
// Other is the same documents' lengths with other tokens: as many
// sequences, so only the fingerprint refuses New's state, for its
// parquet_docs.tokens.
func TestParquetDocumentsConform(t *testing.T) {
	packed := func(delta int64) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			docs := tokRowsRandom(3, 120, 100, 32000)
			for _, doc := range docs {
				for k := range doc {
					doc[k] += delta
				}
			}
			p := filepath.Join(t.TempDir(), "t.parquet")
			writeTok32(t, p, docs, 50)
			d, err := ParquetDocuments(context.Background(), p, ParquetDocsConfig{})
			require.NoError(t, err)
			packed, err := corpus.Pack(d, corpus.PackConfig{SeqLen: 128, AddEOD: true, EOD: 0})
			require.NoError(t, err)
			return packed
		}
	}
	enginetest.TestDataset(t, enginetest.Case{New: packed(0), Other: packed(1)})
}

// ParquetDocs' fingerprint is its tokens and offsets in memory, its
// column and Int64: the same documents read from a copy elsewhere, or
// cut into other files, keep it; other tokens, other document
// boundaries, or Int64 change it, each under its key, and a packed
// dataset's State is refused for them.
func TestParquetDocumentsFingerprint(t *testing.T) {
	ctx := context.Background()
	docs := tokRowsRandom(4, 200, 100, 32000)
	read := func(cfg ParquetDocsConfig, files ...[][]int64) *ParquetDocs {
		dir := t.TempDir()
		for f, part := range files {
			writeTok32(t, filepath.Join(dir, "part-"+string(rune('0'+f))+".parquet"), part, 40)
		}
		d, err := ParquetDocuments(ctx, filepath.Join(dir, "part-{0.."+string(rune('0'+len(files)-1))+"}.parquet"), cfg)
		require.NoError(t, err)
		return d
	}
	base := read(ParquetDocsConfig{}, docs)
	f := base.Fingerprint()
	for _, k := range []string{"parquet_docs.tokens", "parquet_docs.offsets", "parquet_docs.column", "parquet_docs.int64"} {
		require.Contains(t, f, k)
	}
	require.Equal(t, "input_ids", f["parquet_docs.column"])
	require.Equal(t, f, read(ParquetDocsConfig{}, docs).Fingerprint(), "a copy elsewhere")
	require.Equal(t, f, read(ParquetDocsConfig{}, docs[:70], docs[70:]).Fingerprint(), "cut into two files")

	shifted := make([][]int64, len(docs))
	for i, doc := range docs {
		shifted[i] = make([]int64, len(doc))
		for k, v := range doc {
			shifted[i][k] = v + 1
		}
	}
	moved := make([][]int64, len(docs)) // one token moved to the next document
	copy(moved, docs)
	moved[0], moved[1] = moved[0][:len(moved[0])-1], append([]int64{moved[0][len(moved[0])-1]}, moved[1]...)
	for _, tc := range []struct {
		key string
		now *ParquetDocs
	}{
		{"parquet_docs.tokens", read(ParquetDocsConfig{}, shifted)},
		{"parquet_docs.offsets", read(ParquetDocsConfig{}, moved)},
		{"parquet_docs.int64", read(ParquetDocsConfig{Int64: true}, docs)},
	} {
		require.NotEqual(t, f[tc.key], tc.now.Fingerprint()[tc.key], tc.key)
		pack := func(d *ParquetDocs) *corpus.PackedDataset {
			p, err := corpus.Pack(d, corpus.PackConfig{SeqLen: 4096})
			require.NoError(t, err)
			return p
		}
		was, now := pack(base), pack(tc.now)
		require.Equal(t, was.Len(), now.Len())
		cfg := engine.Config{BatchSize: 1, WorldSize: 1, Backend: "cpu"}
		l, err := engine.New(was, cfg)
		require.NoError(t, err)
		st := l.State()
		require.NoError(t, l.Close())
		cfg.Resume = &st
		_, err = engine.New(now, cfg)
		require.ErrorContains(t, err, "Config.Resume: Dataset", tc.key)
		require.ErrorContains(t, err, "dataset.pack.documents."+tc.key+":", tc.key)
	}
}
