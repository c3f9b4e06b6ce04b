package engine

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
)

// scaleStream is an Iterable of shards held as counts alone: record j of
// shard i is generated on Next, its key the global id. No I/O.
type scaleStream struct {
	counts []int
	first  []int
}

func newScaleStream(counts []int) *scaleStream {
	s := &scaleStream{counts: counts, first: make([]int, len(counts))}
	total := 0
	for i, n := range counts {
		s.first[i] = total
		total += n
	}
	return s
}

var scaleSchema = collate.Schema{{Name: "id", DType: collate.Int64}}

func (s *scaleStream) Schema() collate.Schema { return scaleSchema }

func (s *scaleStream) Shards(context.Context) ([]ShardInfo, error) {
	out := make([]ShardInfo, len(s.counts))
	for i, n := range s.counts {
		out[i] = ShardInfo{Name: "mem://" + strconv.Itoa(i), Samples: n}
	}
	return out, nil
}

func (s *scaleStream) Open(_ context.Context, sh ShardInfo) (RecordReader, error) {
	i, err := strconv.Atoi(strings.TrimPrefix(sh.Name, "mem://"))
	if err != nil {
		return nil, err
	}
	return &scaleReader{first: s.first[i], n: s.counts[i], shard: sh.Name}, nil
}

func (s *scaleStream) Decode(_ context.Context, rec Record, slot *Slot) error {
	id, err := strconv.Atoi(rec.Key)
	if err != nil {
		return err
	}
	if id != slot.Index() {
		return fmt.Errorf("record %s in the slot of %d", rec.Key, slot.Index())
	}
	collate.As[int64](slot.Tensor("id"))[0] = int64(id)
	return nil
}

type scaleReader struct {
	first, n, next int
	shard          string
}

func (r *scaleReader) Next(context.Context) (Record, error) {
	if r.next == r.n {
		return Record{}, io.EOF
	}
	r.next++
	return Record{Key: strconv.Itoa(r.first + r.next - 1), Shard: r.shard}, nil
}

func (r *scaleReader) Close() error { return nil }

// scaleCounts returns n shard sizes from 0 to 200, a deterministic
// function of i (a Weyl sequence, so sizes are spread, zeros included).
func scaleCounts(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = int(uint64(i)*0x9E3779B97F4A7C15>>32) % 201
	}
	return out
}

// splitStats is what checkSplit found of an epoch's split.
type splitStats struct {
	per                  int // samples per rank
	pad                  int // samples read twice (padding) or dropped (DropUneven)
	minShards, maxShards int // shards a rank reads part or all of
}

// checkSplit checks plan for every rank of world: every rank reads the
// same number of samples, ceil(n/world) (floor with DropUneven); every
// sample is read by exactly one rank but the padding, which repeats the
// epoch's first samples (or, DropUneven, drops its last ones), fewer than
// world of them; each rank's order through the shuffle buffer is a
// permutation of its reads; a span is contiguous in the epoch's sequence.
func checkSplit(t *testing.T, d *IterableDataset, epoch int, seed uint64, world int) splitStats {
	t.Helper()
	n := d.total
	seqOrder := d.shardOrder(epoch, seed)
	var epochSeq []int // the epoch's sequence of ids, shards in order
	for _, s := range seqOrder {
		for j := range d.shards[s].Samples {
			epochSeq = append(epochSeq, d.first[s]+j)
		}
	}
	require.Len(t, epochSeq, n)

	times := make([]int32, n)
	diff := make([]int32, n) // of a rank's reads and order: all zero when one is a permutation of the other
	st := splitStats{minShards: n + 1}
	var all []int
	for r := range world {
		reads, order := d.plan(epoch, seed, RankInfo{Rank: r, WorldSize: world})
		if r == 0 {
			st.per = len(reads)
		}
		require.Len(t, reads, st.per, "rank %d of %d", r, world)
		ids := make([]int, len(reads))
		shards := map[int]bool{}
		for k, rd := range reads {
			ids[k] = d.first[rd.shard] + rd.offset
			times[ids[k]]++
			shards[rd.shard] = true
		}
		st.minShards, st.maxShards = min(st.minShards, len(shards)), max(st.maxShards, len(shards))
		all = append(all, ids...)
		require.Len(t, order, len(ids))
		for _, id := range ids {
			diff[id]++
		}
		for _, id := range order {
			diff[id]--
		}
		for _, id := range ids {
			if diff[id] != 0 {
				require.Zero(t, diff[id], "rank %d of %d: the shuffled order is not a permutation of the reads (sample %d)", r, world, id)
			}
		}
	}
	// The ranks' spans, one after the other, are the epoch's sequence
	// (then, padding, its first samples again), or its first world×per.
	if d.sc.DropUneven {
		require.True(t, slices.Equal(epochSeq[:st.per*world], all), "world %d: the spans in rank order are the epoch's sequence, cut", world)
		st.pad = n - st.per*world
		require.Less(t, st.pad, world)
		for _, id := range epochSeq[st.per*world:] {
			require.Zero(t, times[id], "a dropped sample was read")
		}
	} else {
		st.pad = st.per*world - n
		require.GreaterOrEqual(t, st.pad, 0)
		require.Less(t, st.pad, world)
		padded := append(slices.Clone(epochSeq), epochSeq[:st.pad]...)
		require.True(t, slices.Equal(padded, all), "world %d: the spans in rank order are the epoch's sequence, padded", world)
	}
	wantTimes := make([]int32, n)
	for i, id := range epochSeq {
		switch {
		case d.sc.DropUneven && i >= st.per*world:
		case !d.sc.DropUneven && i < st.pad:
			wantTimes[id] = 2
		default:
			wantTimes[id] = 1
		}
	}
	for id, k := range times {
		if want := wantTimes[id]; k != want {
			require.Equal(t, want, k, "sample %d read %d times", id, k)
		}
	}
	return st
}

// TestScaleSplit10kShards64Ranks checks, by computation alone, the split
// that the loader makes of 10,000 shards of 0 to 200 samples over 64
// ranks (plan, which each rank's reader and loader use), and that every
// sample is loaded exactly once on a rank by 8 workers.
func TestScaleSplit10kShards64Ranks(t *testing.T) {
	t.Parallel()
	const nShards, world, workers = 10_000, 64, 8
	counts := scaleCounts(nShards)
	ctx := context.Background()

	for _, sc := range []IterableConfig{
		{ShuffleShards: true, ShuffleBuffer: 1000},
		{ShuffleShards: true, ShuffleBuffer: 1000, DropUneven: true},
		{},
	} {
		d, err := FromIterable(ctx, newScaleStream(counts), sc)
		require.NoError(t, err)
		for epoch := range 2 {
			st := checkSplit(t, d, epoch, 7, world)
			t.Logf("%+v epoch %d: %d samples, %d a rank, %d padded/dropped, %d to %d shards a rank", sc, epoch, d.total, st.per, st.pad, st.minShards, st.maxShards)
		}
	}

	// Equal shards: the shards a rank reads part or all of differ by at
	// most one between ranks.
	for _, size := range []int{1, 7, 100, 137} {
		eq := make([]int, nShards)
		for i := range eq {
			eq[i] = size
		}
		d, err := FromIterable(ctx, newScaleStream(eq), IterableConfig{ShuffleShards: true})
		require.NoError(t, err)
		st := checkSplit(t, d, 0, 7, world)
		assert.LessOrEqual(t, st.maxShards-st.minShards, 1, "shards of %d samples: %d to %d shards a rank", size, st.minShards, st.maxShards)
		t.Logf("shards of %d: %d samples a rank, %d to %d shards a rank", size, st.per, st.minShards, st.maxShards)
	}

	// A new world size re-splits an epoch exactly: at an epoch boundary,
	// any world size (more ranks than shards included).
	d, err := FromIterable(ctx, newScaleStream(counts), IterableConfig{ShuffleShards: true, ShuffleBuffer: 1000})
	require.NoError(t, err)
	for _, w := range []int{1, 3, 48, 100, 128} {
		checkSplit(t, d, 1, 7, w)
	}
	small, err := FromIterable(ctx, newScaleStream(counts[:40]), IterableConfig{})
	require.NoError(t, err)
	checkSplit(t, small, 0, 7, 4096) // fewer samples than ranks: padding cycles

	// Mid-epoch, a State resumes only on its own world size: another is
	// refused by New, naming Resume.
	err = d.check(Config{Resume: &State{WorldSize: world}}, RankInfo{Rank: 0, WorldSize: 32})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Resume")

	// The workers: 8 workers of a rank's loader share its cursor over the
	// rank's order; they deliver each of its samples exactly once, in the
	// order plan gives, whatever rank. A State saved mid-epoch resumes on
	// the same world size with exactly the rest.
	for _, rank := range []int{0, 31, 63} {
		cfg := Config{BatchSize: 64, Seed: 7, Workers: workers, Rank: rank, WorldSize: world, Backend: "cpu"}
		_, order := d.plan(0, cfg.Seed, RankInfo{Rank: rank, WorldSize: world})
		l, err := New(d, cfg)
		require.NoError(t, err)
		var got []int
		var st State
		for b, err := range l.Epoch(ctx, 0) {
			require.NoError(t, err)
			assert.Equal(t, int64(b.Indices()[0]), collate.As[int64](b.Tensor("id"))[0])
			got = append(got, b.Indices()...)
			if len(got) == 100*cfg.BatchSize {
				st = l.State()
			}
		}
		require.NoError(t, l.Close())
		assert.Equal(t, order, got, "rank %d: every sample once, in plan's order", rank)

		cfg.Resume = &st
		l, err = New(d, cfg)
		require.NoError(t, err)
		var rest []int
		for b, err := range l.Epoch(ctx, st.Epoch) {
			require.NoError(t, err)
			rest = append(rest, b.Indices()...)
		}
		require.NoError(t, l.Close())
		assert.Equal(t, order[100*cfg.BatchSize:], rest, "rank %d: resumed with the rest", rank)
	}
}
