package corpus

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
	"github.com/tensorbatch/tensorbatch/pinned"
)

// tokenFile writes n tokens of size bytes (2 or 4), token i being
// i*7 mod 65521 (times 70001 for uint32), as numpy's tofile does.
func writeTokens(t testing.TB, n, size int) (string, []uint32) {
	toks := make([]uint32, n)
	buf := make([]byte, n*size)
	for i := range toks {
		if size == 2 {
			toks[i] = uint32(i*7) % 65521
			binary.LittleEndian.PutUint16(buf[2*i:], uint16(toks[i]))
		} else {
			toks[i] = uint32(i*7%65521) * 70001
			binary.LittleEndian.PutUint32(buf[4*i:], toks[i])
		}
	}
	p := filepath.Join(t.TempDir(), "train.bin")
	require.NoError(t, os.WriteFile(p, buf, 0o644))
	return p, toks
}

// sequences loads an epoch of d and returns its sequences as uint32s.
func sequences(t *testing.T, d engine.Dataset, cfg engine.Config, epoch int) ([][]uint32, []int) {
	cfg.WorldSize, cfg.Backend = 1, "cpu"
	l, err := engine.New(d, cfg)
	require.NoError(t, err)
	defer l.Close()
	var out [][]uint32
	var idx []int
	f := d.Schema()[0]
	for b, err := range l.Epoch(context.Background(), epoch) {
		require.NoError(t, err)
		idx = append(idx, b.Indices()...)
		w := f.Shape[0]
		for i := range b.Len() {
			row := make([]uint32, w)
			for j := range w {
				switch f.DType {
				case collate.Uint16:
					row[j] = uint32(collate.As[uint16](b.Tensor(f.Name))[i*w+j])
				case collate.Uint32:
					row[j] = collate.As[uint32](b.Tensor(f.Name))[i*w+j]
				case collate.Int32:
					row[j] = uint32(collate.As[int32](b.Tensor(f.Name))[i*w+j])
				case collate.Int64:
					row[j] = uint32(collate.As[int64](b.Tensor(f.Name))[i*w+j])
				}
			}
			out = append(out, row)
		}
	}
	return out, idx
}

func TestTokensSequentialSequences(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size     int
		dtype    collate.DType
		out      collate.DType
		ctx, str int
	}{
		{2, 0, 0, 16, 0},
		{2, collate.Uint16, collate.Int64, 16, 0},
		{2, collate.Uint16, collate.Int32, 5, 3},
		{4, collate.Uint32, 0, 8, 0},
		{4, collate.Uint32, collate.Int64, 8, 20},
	} {
		path, toks := writeTokens(t, 1001, tc.size)
		d, err := Tokens(path, TokenConfig{Context: tc.ctx, DType: tc.dtype, Out: tc.out, Stride: tc.str})
		require.NoError(t, err)
		stride := tc.str
		if stride == 0 {
			stride = tc.ctx
		}
		assert.Equal(t, (1001-tc.ctx-1)/stride+1, d.Len())
		assert.EqualValues(t, 1001, d.NumTokens())
		f := d.Schema()[0]
		assert.Equal(t, "tokens", f.Name)
		assert.Equal(t, []int{tc.ctx + 1}, f.Shape)
		got, idx := sequences(t, d, engine.Config{BatchSize: 7, Shuffle: true, Workers: 2}, 0)
		require.Len(t, got, d.Len())
		for k, i := range idx {
			assert.Equal(t, toks[i*stride:i*stride+tc.ctx+1], got[k], "sequence %d, %+v", i, tc)
		}
		// The ReadAt fallback, as on an OS without mmap, gives the same.
		file, err := os.Open(path)
		require.NoError(t, err)
		fb := &TokenDataset{path: d.path, cfg: d.cfg, file: readAtFile{file}, ntok: d.ntok, n: d.n, schema: d.schema}
		got2, idx2 := sequences(t, fb, engine.Config{BatchSize: 7, Shuffle: true}, 0)
		assert.Equal(t, idx, idx2)
		assert.Equal(t, got, got2, "ReadAt fallback")
		require.NoError(t, fb.Close())
		require.NoError(t, d.Close())
		require.NoError(t, d.Close())
	}
}

func TestTokensRandomSequences(t *testing.T) {
	t.Parallel()
	path, toks := writeTokens(t, 5000, 2)
	d, err := Tokens(path, TokenConfig{Context: 64, Random: true, Out: collate.Int64})
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, (5000-1)/64, d.Len())
	e0, _ := sequences(t, d, engine.Config{BatchSize: 8, Seed: 1, Workers: 2}, 0)
	again, _ := sequences(t, d, engine.Config{BatchSize: 8, Seed: 1, Workers: 0}, 0)
	e1, _ := sequences(t, d, engine.Config{BatchSize: 8, Seed: 1, Workers: 2}, 1)
	assert.Equal(t, e0, again, "sequences are a function of (Seed, epoch, index)")
	assert.NotEqual(t, e0, e1, "and change with the epoch")
	starts := map[uint32]bool{}
	for _, w := range e0 {
		start := -1
		for s := 0; s+65 <= len(toks); s++ { // find the sequence in the file
			if toks[s] == w[0] && toks[s+1] == w[1] && toks[s+64] == w[64] {
				start = s
				break
			}
		}
		require.GreaterOrEqual(t, start, 0, "a sequence of the file")
		assert.Equal(t, toks[start:start+65], w)
		starts[uint32(start)] = true
	}
	assert.Greater(t, len(starts), len(e0)/2, "spread over the file")

	d2, err := Tokens(path, TokenConfig{Context: 64, Random: true, Sequences: 10})
	require.NoError(t, err)
	defer d2.Close()
	assert.Equal(t, 10, d2.Len())
}

func TestTokensErrors(t *testing.T) {
	t.Parallel()
	path, _ := writeTokens(t, 100, 2)
	odd := filepath.Join(t.TempDir(), "odd.bin")
	require.NoError(t, os.WriteFile(odd, make([]byte, 101), 0o644))
	for _, tc := range []struct {
		path string
		cfg  TokenConfig
		want string
	}{
		{path, TokenConfig{}, "TokenConfig.Context 0, want > 0"},
		{path, TokenConfig{Context: 4, DType: collate.Float32}, "TokenConfig.DType float32, want uint16 or uint32"},
		{path, TokenConfig{Context: 4, Out: collate.Float32}, "TokenConfig.Out float32, want uint16 (the file's), int32 or int64"},
		{path, TokenConfig{Context: 4, Sequences: 3}, "Sequences set without Random"},
		{path, TokenConfig{Context: 4, Stride: -1}, "Stride -1"},
		{path, TokenConfig{Context: 100}, "100 tokens, fewer than one sequence of Context+1 = 101"},
		{odd, TokenConfig{Context: 4}, "odd.bin: 101 bytes, not a whole number of uint16 tokens"},
		{filepath.Join(t.TempDir(), "none.bin"), TokenConfig{Context: 4}, "none.bin: no such file"},
	} {
		_, err := Tokens(tc.path, tc.cfg)
		assert.ErrorContains(t, err, tc.want)
	}
	d, err := Tokens(path, TokenConfig{Context: 4})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	layout, err := collate.NewLayout(d.Schema(), 1)
	require.NoError(t, err)
	s := enginetest.NewSlot(0, 0, 0, layout, make([]byte, layout.Size()), 0)
	assert.ErrorContains(t, d.Fill(context.Background(), s), "closed")
}

// The loader fills whole batches (FillBatch); each sequence must be the one
// a Fill of that sample alone writes, random draws included.
func TestTokensFillBatchMatchesFill(t *testing.T) {
	t.Parallel()
	path, _ := writeTokens(t, 5000, 2)
	for _, random := range []bool{false, true} {
		d, err := Tokens(path, TokenConfig{Context: 64, Random: random, Out: collate.Int64})
		require.NoError(t, err)
		got, idx := sequences(t, d, engine.Config{BatchSize: 8, Seed: 3, Shuffle: true, Workers: 2}, 2)
		layout, err := collate.NewLayout(d.Schema(), 1)
		require.NoError(t, err)
		buf := make([]byte, layout.Size())
		for k, index := range idx {
			require.NoError(t, d.Fill(context.Background(), enginetest.NewSlot(3, 2, index, layout, buf, 0)))
			want := make([]uint32, 65)
			for j, v := range collate.As[int64](layout.Sample(buf, 0, 0)) {
				want[j] = uint32(v)
			}
			require.Equal(t, want, got[k], "sequence %d (random %v)", index, random)
		}
		require.NoError(t, d.Close())
	}
}

// BenchmarkTokens loads shuffled token sequences (context 1024, batch 32)
// through the loader and, epoch by epoch in turn (the side that goes
// first alternating), copies the same sequences
// in the same order with a plain loop on as many goroutines (the limit):
// from the file's mapping, as the dataset reads them, into one batch buffer
// per goroutine. An iteration is a batch of each; the metrics are each
// side's time a batch and the loader's throughput over the loop's (the
// target is 0.8 or more). Epoch 0 runs both sides untimed first
// (warmUp).
func BenchmarkTokens(b *testing.B) {
	const ctx, batch = 1024, 32
	path, _ := writeTokens(b, 1<<24, 2)
	wbytes := 2 * (ctx + 1)
	for _, workers := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			d, err := Tokens(path, TokenConfig{Context: ctx})
			require.NoError(b, err)
			defer d.Close()
			l, err := engine.New(d, engine.Config{BatchSize: batch, Shuffle: true, Seed: 1, Workers: workers, WorldSize: 1, Backend: "cpu"})
			require.NoError(b, err)
			defer l.Close()
			src := d.file.view(0, 2*d.NumTokens())
			dsts := make([][]byte, max(workers, 1))
			for i := range dsts {
				dsts[i], err = pinned.CPU{}.HostAlloc(batch * wbytes)
				require.NoError(b, err)
			}
			var loader, copied time.Duration
			per := (d.Len() + batch - 1) / batch
			order := engine.Shuffled{N: d.Len(), Seed: 1}.Order(0)
			warmUp(b, l, per, func() { copySequences(dsts, src, order, ctx, batch) })
			b.SetBytes(int64(2 * batch * wbytes))
			b.ResetTimer()
			for n, e := 0, 1; n < b.N; e++ {
				m := min(b.N-n, (d.Len()+batch-1)/batch) // batches this epoch
				b.StopTimer()
				order := engine.Shuffled{N: d.Len(), Seed: 1}.Order(e)
				order = order[:min(m*batch, len(order))]
				b.StartTimer()
				epochVsCopy(b, l, e, m, func() { copySequences(dsts, src, order, ctx, batch) }, &loader, &copied)
				n += m
			}
			reportVsCopy(b, loader, copied)
		})
	}
}

// epochVsCopy is one epoch of a sequences-against-memcpy benchmark: the
// first m batches of epoch e through l, and ref, the memcpy, timed
// into loader and copied, the side that goes first alternating by epoch.
func epochVsCopy(b *testing.B, l *engine.Loader, e, m int, ref func(), loader, copied *time.Duration) {
	load := func() {
		start := time.Now()
		loadBatches(b, l, e, m)
		*loader += time.Since(start)
	}
	loop := func() {
		start := time.Now()
		ref()
		*copied += time.Since(start)
	}
	if e%2 == 0 {
		load()
		loop()
	} else {
		loop()
		load()
	}
}

// warmUp runs epoch 0 of a sequences-against-memcpy benchmark, untimed: all
// per batches through l, then ref. Whichever side reads the file's
// mapping first takes its page faults, and the loader builds and
// allocates what it keeps (its buffers; a Megatron epoch's tables, the
// next one's then built ahead): timed, that first epoch fell to the
// loader, the side that went first, and its ratio then moved with the
// number of batches a run timed (BenchmarkMegatronSequences' x-copy at
// -benchtime 3000x against 20000x).
func warmUp(b *testing.B, l *engine.Loader, per int, ref func()) {
	loadBatches(b, l, 0, per)
	ref()
}

// loadBatches runs the first m batches of epoch e through l.
func loadBatches(b *testing.B, l *engine.Loader, e, m int) {
	k := 0
	for _, err := range l.Epoch(context.Background(), e) {
		if err != nil {
			b.Fatal(err)
		}
		if k++; k == m {
			break
		}
	}
}

// reportVsCopy reports a loader's and a copy loop's time over b.N
// batches (epochVsCopy's, or BenchmarkMegatronSequences').
func reportVsCopy(b *testing.B, loader, copied time.Duration) {
	b.ReportMetric(float64(loader.Nanoseconds())/float64(b.N), "loader-ns/batch")
	b.ReportMetric(float64(copied.Nanoseconds())/float64(b.N), "copy-ns/batch")
	b.ReportMetric(copied.Seconds()/loader.Seconds(), "x-copy")
}

// copySequences copies the sequences of order, batch by batch, from the
// tokens src into dsts[g] on goroutine g, which copies batches g,
// g+len(dsts), and so on.
func copySequences(dsts [][]byte, src []byte, order []int, ctx, batch int) {
	var wg sync.WaitGroup
	for g, dst := range dsts {
		wg.Go(func() {
			w := 2 * (ctx + 1)
			for k := g * batch; k < len(order); k += len(dsts) * batch {
				for j, idx := range order[k:min(k+batch, len(order))] {
					copy(dst[j*w:(j+1)*w], src[2*idx*ctx:])
				}
			}
		})
	}
	wg.Wait()
}

// A uint32 token that int32 cannot hold (a file of another DType, most
// likely) is an error naming the file and token, through Fill and
// FillBatch, never a negative token id.
func TestTokensOutOfRangeForInt32(t *testing.T) {
	t.Parallel()
	buf := make([]byte, 4*40)
	for i := range 40 {
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(i))
	}
	binary.LittleEndian.PutUint32(buf[4*13:], 1<<31)
	path := filepath.Join(t.TempDir(), "big.bin")
	require.NoError(t, os.WriteFile(path, buf, 0o644))
	d, err := Tokens(path, TokenConfig{Context: 4, DType: collate.Uint32, Out: collate.Int32})
	require.NoError(t, err)
	defer d.Close()
	for _, w := range []int{0, 2} {
		l, err := engine.New(d, engine.Config{BatchSize: 2, Workers: w, WorldSize: 1, Backend: "cpu"})
		require.NoError(t, err)
		var got error
		for _, err := range l.Epoch(context.Background(), 0) {
			if err != nil {
				got = err
				break
			}
		}
		require.NoError(t, l.Close())
		assert.ErrorContains(t, got, "big.bin: token 13 is 2147483648, more than int32 (TokenConfig.Out) holds", "workers %d", w)
	}
	wide, err := Tokens(path, TokenConfig{Context: 4, DType: collate.Uint32, Out: collate.Int64})
	require.NoError(t, err)
	defer wide.Close()
	rows, _ := sequences(t, wide, engine.Config{BatchSize: 2}, 0)
	assert.Equal(t, []uint32{12, 1 << 31, 14, 15, 16}, rows[3], "int64 holds it")
}
