package corpus

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

// TestTokensFileCutWhileMapped: a token file truncated, or rewritten
// shorter, while mapped gives an error naming the file and the first
// sequence it no longer holds, never a SIGBUS: cut to nothing, inside a
// page (whose tail reads zeros, no fault) and at a page boundary; through
// the loader (FillBatch, on the consumer's goroutine and on workers) and
// through Fill.
func TestTokensFileCutWhileMapped(t *testing.T) {
	const ntok, ctx = 1 << 16, 63 // uint16 tokens: 128 KiB; sequences of 64 tokens, 63 apart
	for _, tc := range []struct {
		name string
		cut  func(path string) error
		size int64
	}{
		{"truncated to 0", func(p string) error { return os.Truncate(p, 0) }, 0},
		{"truncated inside a page", func(p string) error { return os.Truncate(p, 40000) }, 40000},
		{"truncated at a page", func(p string) error { return os.Truncate(p, 65536) }, 65536},
		{"rewritten shorter", func(p string) error {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, data[:50000], 0o644) // O_TRUNC, then write: in place
		}, 50000},
	} {
		firstBad := 0 // the first sequence past the cut
		for (int64(firstBad)*ctx+ctx+1)*2 <= tc.size {
			firstBad++
		}
		for _, workers := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/workers %d", tc.name, workers), func(t *testing.T) {
				path, _ := writeTokens(t, ntok, 2)
				d, err := Tokens(path, TokenConfig{Context: ctx, Out: collate.Int64})
				require.NoError(t, err)
				defer d.Close()
				require.NoError(t, tc.cut(path))

				l, err := engine.New(d, engine.Config{BatchSize: 16, Workers: workers, WorldSize: 1, Backend: "cpu"})
				require.NoError(t, err)
				defer l.Close()
				n := 0
				for b, err := range l.Epoch(context.Background(), 0) {
					if err != nil {
						assert.Contains(t, err.Error(), path)
						assert.Contains(t, err.Error(), fmt.Sprintf("sequence %d (tokens %d to", firstBad, firstBad*ctx))
						assert.Contains(t, err.Error(), "cut short or rewritten while mapped")
						break
					}
					n += b.Len()
				}
				assert.Equal(t, firstBad/16*16, n, "the batches before the cut")

				// Fill, sequence by sequence.
				layout, err := collate.NewLayout(d.Schema(), 1)
				require.NoError(t, err)
				buf := make([]byte, layout.Size())
				for _, i := range []int{0, firstBad - 1, firstBad, firstBad + 1, 600, d.Len() - 1} {
					if i < 0 {
						continue
					}
					err := d.Fill(context.Background(), enginetest.NewSlot(0, 0, i, layout, buf, 0))
					if i < firstBad {
						assert.NoError(t, err, "sequence %d", i)
						continue
					}
					require.Error(t, err, "sequence %d", i)
					assert.Contains(t, err.Error(), fmt.Sprintf("%s: sequence %d (tokens %d to", path, i, int64(i)*ctx))
				}
			})
		}
	}
}

// endsInFile spares the stat only where a nonzero byte at or after a
// read's last byte, on its page, shows the file still holds it.
func TestEndsInFile(t *testing.T) {
	page := pageMask + 1
	all := make([]byte, 3*page)
	assert.True(t, endsInFile(all, 0), "nothing read")
	assert.False(t, endsInFile(all, 10), "zeros: ask")
	all[9] = 1
	assert.True(t, endsInFile(all, 10), "its last byte")
	assert.False(t, endsInFile(all, 11))
	all[9+tailProbe-1] = 1
	assert.True(t, endsInFile(all, 11), "a later byte within the probe")
	all[page] = 1
	assert.False(t, endsInFile(all, int64(page-2)), "never a byte of the next page")
	all[len(all)-1] = 1
	assert.True(t, endsInFile(all, int64(len(all))), "the mapping's last byte")
	assert.False(t, endsInFile(all[:len(all)-1], int64(len(all)-3)), "never past the mapping")
}

// A .bin of nonzero tokens cut inside a page, at a token boundary or
// inside a token, while mapped: every sample (and every document for
// Pack's ReadDocument) that the file still holds loads the same tokens
// as an intact copy, and every other is an error, never zeros: through
// Fill and through the loader's FillBatch.
func TestMegatronCutInsidePage(t *testing.T) {
	docs := make([][]int64, 64)
	for i := range docs {
		docs[i] = make([]int64, 1000+i)
		for j := range docs[i] {
			docs[i][j] = int64(1 + (i*1009+j*7)%60000)
		}
	}
	intact := megatronDocs(t, collate.Uint16, docs)
	want, err := Megatron(intact, MegatronConfig{SeqLength: 255, Seed: 3, Out: collate.Int64})
	require.NoError(t, err)
	defer want.Close()
	for _, size := range []int64{40000, 40001, 40959} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			prefix := megatronDocs(t, collate.Uint16, docs)
			d, err := Megatron(prefix, MegatronConfig{SeqLength: 255, Seed: 3, Out: collate.Int64})
			require.NoError(t, err)
			defer d.Close()
			require.NoError(t, os.Truncate(prefix+".bin", size))
			o, err := d.Order(0)
			require.NoError(t, err)
			layout, err := collate.NewLayout(d.Schema(), 1)
			require.NoError(t, err)
			got, exp := make([]byte, layout.Size()), make([]byte, layout.Size())
			firstBad := -1
			for i := range d.Len() {
				err := d.Fill(context.Background(), enginetest.NewSlot(0, 0, i, layout, got, 0))
				if d.extent(o, i) > size {
					require.Error(t, err, "sample %d", i)
					assert.Contains(t, err.Error(), "cut short or rewritten while mapped")
					if firstBad < 0 {
						firstBad = i
					}
					continue
				}
				require.NoError(t, err, "sample %d", i)
				require.NoError(t, want.Fill(context.Background(), enginetest.NewSlot(0, 0, i, layout, exp, 0)))
				require.Equal(t, exp, got, "sample %d", i)
			}
			require.GreaterOrEqual(t, firstBad, 0)
			l, err := engine.New(d, engine.Config{BatchSize: 4, WorldSize: 1, Backend: "cpu"})
			require.NoError(t, err)
			defer l.Close()
			n := 0
			for b, err := range l.Epoch(context.Background(), 0) {
				if err != nil {
					assert.Contains(t, err.Error(), "cut short or rewritten while mapped")
					break
				}
				n += b.Len()
			}
			assert.Equal(t, firstBad/4*4, n, "the batches before the first sample past the cut")
			for i := range docs {
				dst := make([]int64, len(docs[i]))
				err := d.ReadDocument(i, 0, dst)
				if d.idx.pointers[i]+2*int64(len(docs[i])) > size {
					assert.Error(t, err, "document %d", i)
					continue
				}
				require.NoError(t, err, "document %d", i)
				assert.Equal(t, docs[i], dst, "document %d", i)
			}
		})
	}
}
