package engine

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
)

// reversedAccess is a third kind of access, unknown to the loader: its n
// samples in reverse order, the whole epoch on every rank, and a reader
// per epoch that counts its calls and may fail the epoch at its end.
type reversedAccess struct {
	Dataset
	waitErr            error
	begun, waits, ends atomic.Int32
	filled             atomic.Int32 // Fills that saw this source's reader
}

func (d *reversedAccess) check(cfg Config, _ RankInfo) error {
	if cfg.Shuffle {
		return configError("Shuffle", "set for a reversedAccess")
	}
	return nil
}

func (d *reversedAccess) batches(cfg Config, _ RankInfo, n, skip int) (BatchSampler, int) {
	return Batched{Sampler: reversed{n, skip}, Size: cfg.BatchSize}, -1
}

func (d *reversedAccess) position(cfg Config, _ RankInfo) (string, int) {
	return KindMap, cfg.BatchSize
}

func (d *reversedAccess) units(_ Config, _ RankInfo, _, n int) int { return n }

func (d *reversedAccess) begin(Config, RankInfo, int, batchList) epochReader {
	d.begun.Add(1)
	return reversedReader{d}
}

var _ access = (*reversedAccess)(nil) // a compile error, not a silent mapAccess, when the interface grows

func (d *reversedAccess) Report() map[string]int64 {
	return map[string]int64{"read_retries": 7, "requests": 3}
}

func (d *reversedAccess) Fill(ctx context.Context, s *Slot) error {
	if r, ok := s.reader.(reversedReader); ok && r.d == d {
		d.filled.Add(1)
	}
	return d.Dataset.Fill(ctx, s)
}

type reversedReader struct{ d *reversedAccess }

func (r reversedReader) wait(context.Context) error { r.d.waits.Add(1); return r.d.waitErr }
func (r reversedReader) end()                       { r.d.ends.Add(1) }

type reversed struct{ n, skip int }

func (s reversed) Order(int) []int {
	order := make([]int, 0, s.n)
	for i := s.n - 1; i >= 0; i-- {
		order = append(order, i)
	}
	return order[min(s.skip, s.n):]
}

// The loader drives a kind of source it does not know through the source
// interface alone: its check, order, positions, reader and counters.
func TestLoaderCallsAnySourceThroughTheInterface(t *testing.T) {
	t.Parallel()
	schema := collate.Schema{{Name: "x", DType: collate.Int64}}
	newSource := func() *reversedAccess {
		return &reversedAccess{Dataset: DatasetFunc(10, schema, func(_ context.Context, s *Slot) error {
			collate.As[int64](s.Tensor("x"))[0] = int64(s.Index())
			return nil
		})}
	}

	_, err := New(newSource(), Config{Shuffle: true})
	require.ErrorContains(t, err, "engine: Config.Shuffle: set for a reversedAccess")

	for _, workers := range []int{0, 2} {
		d := newSource()
		l, err := New(d, Config{BatchSize: 4, Workers: workers, WorldSize: 2, Rank: 1})
		require.NoError(t, err)
		var got []int
		for b, err := range l.Epoch(context.Background(), 0) {
			require.NoError(t, err)
			got = append(got, b.Indices()...)
			if len(got) == 4 {
				st := l.State()
				assert.Equal(t, 4, st.Position, "units of the source's position: BatchSize, whatever the world size")
			}
		}
		assert.Equal(t, []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, got, "workers %d", workers)
		assert.Equal(t, int32(1), d.begun.Load())
		assert.Equal(t, int32(1), d.waits.Load())
		assert.Equal(t, int32(1), d.ends.Load())
		assert.Equal(t, int32(10), d.filled.Load(), "every Fill sees the epoch's reader")
		assert.Equal(t, map[string]int64{"read_retries": 7, "requests": 3}, l.Stats().Dataset)
		assert.Equal(t, 3, l.Len())

		st := l.State()
		st.Epoch, st.Position = 1, 8
		l2, err := New(d, Config{BatchSize: 4, Workers: workers, WorldSize: 2, Rank: 1, Resume: &st})
		require.NoError(t, err)
		got = got[:0]
		for b, err := range l2.Epoch(context.Background(), 1) {
			require.NoError(t, err)
			got = append(got, b.Indices()...)
		}
		assert.Equal(t, []int{1, 0}, got, "a resumed epoch skips the source's units")
		require.NoError(t, l2.Close())

		d.waitErr = errors.New("reader failed")
		var errs []error
		for _, err := range l.Epoch(context.Background(), 1) {
			if err != nil {
				errs = append(errs, err)
			}
		}
		assert.True(t, slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, d.waitErr) }), "the reader's error ends the epoch: %v", errs)
		assert.Equal(t, int32(3), d.ends.Load(), "one end for each of the three epochs")
		require.NoError(t, l.Close())
	}
}
