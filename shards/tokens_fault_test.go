package shards

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// TestTokensFileCutWhileMapped: a token file truncated, or rewritten
// shorter, while mapped gives an error naming the file and the first
// window it no longer holds, never a SIGBUS: cut to nothing, inside a
// page (whose tail reads zeros, no fault) and at a page boundary; through
// the loader (FillBatch, on the consumer's goroutine and on workers) and
// through Fill.
func TestTokensFileCutWhileMapped(t *testing.T) {
	const ntok, ctx = 1 << 16, 63 // uint16 tokens: 128 KiB; windows of 64 tokens, 63 apart
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
		firstBad := 0 // the first window past the cut
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
						assert.Contains(t, err.Error(), fmt.Sprintf("window %d (tokens %d to", firstBad, firstBad*ctx))
						assert.Contains(t, err.Error(), "cut short or rewritten while mapped")
						break
					}
					n += b.Len()
				}
				assert.Equal(t, firstBad/16*16, n, "the batches before the cut")

				// Fill, window by window.
				layout, err := collate.NewLayout(d.Schema(), 1)
				require.NoError(t, err)
				buf := make([]byte, layout.Size())
				for _, i := range []int{0, firstBad - 1, firstBad, firstBad + 1, 600, d.Len() - 1} {
					if i < 0 {
						continue
					}
					err := d.Fill(context.Background(), engine.NewSlot(0, 0, i, layout, buf, 0))
					if i < firstBad {
						assert.NoError(t, err, "window %d", i)
						continue
					}
					require.Error(t, err, "window %d", i)
					assert.Contains(t, err.Error(), fmt.Sprintf("%s: window %d (tokens %d to", path, i, int64(i)*ctx))
				}
			})
		}
	}
}
