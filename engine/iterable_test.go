package engine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

// memStream is an Iterable of in-memory shards: record j of shard i holds
// the bytes of its global id (8 bytes, little endian) and a payload.
type memStream struct {
	counts  []int
	payload int
	failAt  string // "shard/record" whose Next fails
	stallAt string // "shard/record" whose Next waits for its ctx to end
	short   int    // shard index that ends early, or -1
	long    int    // shard index with a record more than listed, or -1

	mu                 sync.Mutex
	read, decoded, max int // records read and decoded, and the most in between
	opened             atomic.Int32
}

func newMemStream(counts ...int) *memStream {
	return &memStream{counts: counts, payload: 64, short: -1, long: -1}
}

func (m *memStream) Schema() collate.Schema { return indexSchema }

func (m *memStream) Shards(context.Context) ([]engine.ShardInfo, error) {
	var out []engine.ShardInfo
	for i, n := range m.counts {
		out = append(out, engine.ShardInfo{Name: fmt.Sprintf("mem://shard-%d", i), Samples: n})
	}
	return out, nil
}

func (m *memStream) Open(_ context.Context, sh engine.ShardInfo) (engine.RecordReader, error) {
	var i int
	fmt.Sscanf(sh.Name, "mem://shard-%d", &i)
	first := 0
	for _, n := range m.counts[:i] {
		first += n
	}
	m.opened.Add(1)
	return &memReader{m: m, shard: i, first: first, n: sh.Samples}, nil
}

func (m *memStream) Decode(_ context.Context, rec engine.Record, s *engine.Slot) error {
	id := int64(binary.LittleEndian.Uint64(rec.Fields["id"]))
	if id != int64(s.Index()) {
		return fmt.Errorf("record %s has id %d, slot index %d", rec.Key, id, s.Index())
	}
	collate.As[int64](s.Tensor("index"))[0] = id
	x := collate.As[float32](s.Tensor("x"))
	for i := range x {
		x[i] = float32(rec.Fields["payload"][i%len(rec.Fields["payload"])]) + float32(s.Rand().NormFloat64())
	}
	m.mu.Lock()
	m.decoded++
	m.mu.Unlock()
	return nil
}

type memReader struct {
	m               *memStream
	shard, first, n int
	off             int
}

func (r *memReader) Next(ctx context.Context) (engine.Record, error) {
	n := r.n
	if r.shard == r.m.long {
		n++
	}
	if r.off == n || (r.shard == r.m.short && r.off == r.n/2) {
		return engine.Record{}, io.EOF
	}
	switch fmt.Sprintf("%d/%d", r.shard, r.off) {
	case r.m.failAt:
		return engine.Record{}, errors.New("connection reset")
	case r.m.stallAt:
		<-ctx.Done()
		return engine.Record{}, ctx.Err()
	}
	id := make([]byte, 8)
	binary.LittleEndian.PutUint64(id, uint64(r.first+r.off))
	payload := make([]byte, r.m.payload)
	for i := range payload {
		payload[i] = byte(r.first + r.off + i)
	}
	rec := engine.Record{Key: fmt.Sprintf("%06d", r.off), Shard: fmt.Sprint(r.shard), Fields: map[string][]byte{"id": id, "payload": payload}}
	r.off++
	r.m.mu.Lock()
	r.m.read++
	r.m.max = max(r.m.max, r.m.read-r.m.decoded)
	r.m.mu.Unlock()
	return rec, nil
}

func (r *memReader) Close() error { return nil }

func streamDataset(t *testing.T, m *memStream, sc engine.IterableConfig) *engine.IterableDataset {
	d, err := engine.FromIterable(context.Background(), m, sc)
	require.NoError(t, err)
	return d
}

func TestStreamLoadsEverySampleOnceInShardOrder(t *testing.T) {
	t.Parallel()
	d := streamDataset(t, newMemStream(5, 0, 7, 3), engine.IterableConfig{})
	assert.Equal(t, 15, d.Len())
	for _, workers := range []int{0, 1, 3} {
		l := newLoader(t, d, engine.Config{BatchSize: 4, Workers: workers})
		idx, mem := collect(t, l, 0)
		assert.Equal(t, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14}}, idx)
		assert.Equal(t, idx, mem, "each record decoded into its own slot")
		assert.Equal(t, 4, l.Len())
	}
}

func TestStreamBatchesAreBitIdenticalForAnyWorkers(t *testing.T) {
	t.Parallel()
	sc := engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 16}
	var want []step
	for _, workers := range []int{0, 1, 2, 4} {
		for _, pf := range []int{1, 3} {
			d := streamDataset(t, newMemStream(9, 13, 4, 11, 6), sc)
			l := newLoader(t, d, engine.Config{BatchSize: 5, Workers: workers, PrefetchFactor: pf, Seed: 3})
			got, _ := runSteps(t, l, 0, 2, -1)
			if want == nil {
				want = got
				continue
			}
			require.Equal(t, want, got, "workers %d, prefetch %d", workers, pf)
		}
	}
	// Shuffled: not the shard order, and another order at another epoch.
	var ids [2][]int
	for e, s := range []int{0, len(want) / 2} {
		for _, st := range want[s : s+len(want)/2] {
			ids[e] = append(ids[e], st.Indices...)
		}
	}
	assert.ElementsMatch(t, ids[0], ids[1])
	assert.NotEqual(t, ids[0], ids[1])
}

// rankIDs loads epoch of a stream of shards of counts as each rank of
// world and returns the ids each saw, failing unless every rank has as
// many batches as its Len.
func rankIDs(t *testing.T, counts []int, world int, sc engine.IterableConfig, cfg engine.Config, epoch int) [][]int {
	t.Helper()
	var out [][]int
	for rank := range world {
		c := cfg
		c.Rank, c.WorldSize = rank, world
		l := newLoader(t, streamDataset(t, newMemStream(counts...), sc), c)
		idx, mem := collect(t, l, epoch)
		require.Equal(t, idx, mem, "each record decoded into its own slot")
		require.Len(t, idx, l.Len(), "rank %d", rank)
		out = append(out, flat(idx))
	}
	return out
}

func TestStreamSplitsAcrossRanksAsDistributedSampler(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		counts []int
		world  int
	}{
		{"uneven shards", []int{9, 13, 4, 11, 6, 8, 2}, 3},
		{"one shard much larger", []int{100, 1}, 2},
		{"one shard", []int{10}, 4},
		{"more ranks than shards", []int{3, 4}, 5},
		{"more ranks than samples", []int{1, 0, 2}, 5},
		{"empty shards", []int{0, 5, 0, 0, 7, 0}, 4},
		{"all empty", []int{0, 0}, 2},
		{"one rank", []int{5, 6}, 1},
	} {
		for _, drop := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/drop=%v", tc.name, drop), func(t *testing.T) {
				sc := engine.IterableConfig{ShuffleShards: true, DropUneven: drop}
				cfg := engine.Config{BatchSize: 3, Workers: 2, Seed: 7}
				// One process reads the epoch's whole sequence, in shard order.
				seq := rankIDs(t, tc.counts, 1, sc, cfg, 2)[0]
				n := len(seq)
				per := (n + tc.world - 1) / tc.world
				padded := slices.Clone(seq)
				for i := 0; len(padded) < per*tc.world; i++ {
					padded = append(padded, seq[i%n]) // DistributedSampler pads from the start
				}
				if drop {
					per = n / tc.world
				}
				ranks := rankIDs(t, tc.counts, tc.world, sc, cfg, 2)
				for r, ids := range ranks {
					assert.Len(t, ids, per, "rank %d: equal counts", r)
				}
				assert.Equal(t, append([]int(nil), padded[:per*tc.world]...), slices.Concat(ranks...),
					"ranks take contiguous spans of the padded (or cut) sequence, in rank order")

				// Through a shuffle buffer: the same samples, in another order.
				sc.ShuffleBuffer = 5
				for r, ids := range rankIDs(t, tc.counts, tc.world, sc, cfg, 2) {
					assert.ElementsMatch(t, ranks[r], ids, "rank %d", r)
				}
			})
		}
	}
}

func TestStreamShardOrderIsPureFunctionOfSeedAndEpoch(t *testing.T) {
	t.Parallel()
	counts := []int{3, 5, 2, 4, 1, 6}
	sc := engine.IterableConfig{ShuffleShards: true}
	seq := func(seed uint64, epoch, world int) []int {
		return slices.Concat(rankIDs(t, counts, world, sc, engine.Config{BatchSize: 2, Seed: seed, Workers: 1}, epoch)...)
	}
	want := seq(1, 3, 1)
	assert.Equal(t, want, seq(1, 3, 1), "the same (Seed, epoch)")
	assert.Equal(t, want, seq(1, 3, 3), "any world size: its ranks' spans, in rank order")
	assert.NotEqual(t, want, seq(1, 4, 1), "another epoch")
	assert.NotEqual(t, want, seq(2, 3, 1), "another seed")
	sorted := slices.Sorted(slices.Values(want))
	assert.Equal(t, sorted, slices.Sorted(slices.Values(seq(2, 3, 1))))
	first := 0
	for i, c := range counts { // whole shards, each in record order
		at := slices.Index(want, first)
		require.GreaterOrEqual(t, at, 0)
		for j := range c {
			assert.Equal(t, first+j, want[at+j], "shard %d, record %d", i, j)
		}
		first += c
	}
}

func TestStreamReadAheadIsBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bytes       int64
		buffer, pad int // the records the bound allows
	}{
		{20_000, 10, 20},
		{1, 10, 0}, // less than a record: the reader reads what a Fill waits for
		{1, 0, 0},
		{5_000, 40, 5},
	} {
		t.Run(fmt.Sprintf("%d bytes, buffer %d", tc.bytes, tc.buffer), func(t *testing.T) {
			m := newMemStream(200, 200)
			m.payload = 1000 // about 1 KB a record
			d := streamDataset(t, m, engine.IterableConfig{ShuffleBuffer: tc.buffer, ReadAheadBytes: tc.bytes})
			l := newLoader(t, d, engine.Config{BatchSize: 4, Workers: 2, PrefetchFactor: 2})
			for _, err := range l.Epoch(context.Background(), 0) {
				require.NoError(t, err)
			}
			// The bound, the shuffle buffer, the window of batches, and a record.
			assert.LessOrEqual(t, m.max, tc.pad+tc.buffer+4*4+1, "records read ahead of their decoding")
			assert.Equal(t, 400, m.read)
		})
	}
}

func TestStreamReadErrorsNameTheShardAndEndTheEpoch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		set    func(m *memStream)
		msgErr string
	}{
		{"read error", func(m *memStream) { m.failAt = "1/3" }, `engine: stream: shard "mem://shard-1", record 3: connection reset`},
		{"short shard", func(m *memStream) { m.short = 1 }, `engine: stream: shard "mem://shard-1" ended after 4 records, listed with 8`},
		{"long shard", func(m *memStream) { m.long = 1 }, `engine: stream: shard "mem://shard-1", after record 7: more records than the 8 listed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemStream(8, 8, 8)
			tc.set(m)
			l := newLoader(t, streamDataset(t, m, engine.IterableConfig{}), engine.Config{BatchSize: 4, Workers: 2})
			numbers, err := untilError(l, 0)
			assert.Equal(t, []int{0, 1, 2, 3}[:len(numbers)], numbers, "the batches before the bad record")
			assert.Len(t, numbers, map[string]int{"read error": 2, "short shard": 3, "long shard": 4}[tc.name])
			assert.ErrorContains(t, err, tc.msgErr)
		})
	}
}

func TestStreamCancelMidShardEndsTheEpoch(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{0, 2} {
		m := newMemStream(8, 8)
		m.stallAt = "1/3" // a read that waits, as a slow server's
		l := newLoader(t, streamDataset(t, m, engine.IterableConfig{}), engine.Config{BatchSize: 4, Workers: workers})
		ctx, cancel := context.WithCancel(context.Background())
		var err error
		n := 0
		for _, err = range l.Epoch(ctx, 0) {
			if err != nil {
				break
			}
			if n++; n == 2 { // the shard's first batch is loaded: cancel inside it
				cancel()
			}
		}
		cancel()
		assert.ErrorIs(t, err, context.Canceled, "workers %d", workers)
		// goleak (TestMain) checks the reader ended.
	}
}

func TestStreamResumesBitIdentically(t *testing.T) {
	t.Parallel()
	sc := engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 7}
	cfg := engine.Config{BatchSize: 3, Seed: 5, Workers: 2}
	want, _ := runSteps(t, newLoader(t, streamDataset(t, newMemStream(10, 7, 12), sc), cfg), 0, 2, -1)
	for _, cut := range []int{1, 5, 10, 13} {
		first := newLoader(t, streamDataset(t, newMemStream(10, 7, 12), sc), cfg)
		got, st := runSteps(t, first, 0, 2, cut)
		require.NoError(t, first.Close())
		c := cfg
		c.Workers, c.Resume = 1, roundTrip(t, st)
		rest, _ := runSteps(t, newLoader(t, streamDataset(t, newMemStream(10, 7, 12), sc), c), st.Epoch, 2, -1)
		assert.Equal(t, want, append(got, rest...), "cut after %d", cut)
	}
	c := cfg
	c.Resume, c.WorldSize = &engine.State{Len: 29, Schema: "", Seed: 5, WorldSize: 1}, 2
	_, err := engine.New(streamDataset(t, newMemStream(10, 7, 12), sc), c)
	assert.ErrorContains(t, err, "engine: Config.Resume: WorldSize: an IterableDataset resumes with the world size it was saved with (1), not 2")
}

func TestIterableConfigErrors(t *testing.T) {
	t.Parallel()
	d := streamDataset(t, newMemStream(4, 4), engine.IterableConfig{})
	for _, tc := range []struct {
		cfg  engine.Config
		want string
	}{
		{engine.Config{Shuffle: true}, "engine: Config.Shuffle: set for an IterableDataset"},
		{engine.Config{Sampler: engine.Sequential{N: 8}}, "engine: Config.Sampler: set for an IterableDataset"},
		{engine.Config{DropUneven: true}, "engine: Config.DropUneven: set for an IterableDataset: use IterableConfig.DropUneven"},
	} {
		_, err := engine.New(d, tc.cfg)
		assert.ErrorContains(t, err, tc.want)
	}
	_, err := engine.FromIterable(context.Background(), newMemStream(1), engine.IterableConfig{ShuffleBuffer: -1})
	assert.ErrorContains(t, err, "engine: IterableConfig.ShuffleBuffer: -1")
	_, err = engine.FromIterable(context.Background(), newMemStream(1), engine.IterableConfig{ReadAheadBytes: -1})
	assert.ErrorContains(t, err, "engine: IterableConfig.ReadAheadBytes: -1, want >= 0")
	assert.ErrorContains(t, d.Fill(context.Background(), enginetest.NewSlot(0, 0, 0, nil, nil, 0)), "only inside an epoch")
}

func TestIterableDatasetServesTwoLoadersAtOnce(t *testing.T) {
	t.Parallel()
	sc := engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 5}
	counts := []int{10, 7, 12, 3}
	cfg := engine.Config{BatchSize: 3, Seed: 5}
	want, _ := runSteps(t, newLoader(t, streamDataset(t, newMemStream(counts...), sc), cfg), 0, 2, -1)
	for _, workers := range [][2]int{{0, 0}, {1, 2}, {3, 0}, {2, 2}} {
		t.Run(fmt.Sprint("workers ", workers), func(t *testing.T) {
			d := streamDataset(t, newMemStream(counts...), sc) // shared by both loaders
			var ls [2]*engine.Loader
			for i := range ls {
				c := cfg
				c.Workers = workers[i]
				ls[i] = newLoader(t, d, c)
			}
			var got [2][]step
			for epoch := range 2 {
				// The two loaders' epochs run at once, interleaved batch by batch.
				var next [2]func() (*engine.Batch, error, bool)
				for i, l := range ls {
					n, stop := iter.Pull2(l.Epoch(context.Background(), epoch))
					defer stop()
					next[i] = n
				}
				for live := 2; live > 0; {
					live = 0
					for i := range 2 {
						b, err, ok := next[i]()
						if !ok {
							continue
						}
						live++
						require.NoError(t, err, "loader %d", i)
						got[i] = append(got[i], stepOf(b))
					}
				}
			}
			assert.Equal(t, want, got[0])
			assert.Equal(t, want, got[1])
		})
	}
}

func TestIterableDatasetServesLoadersOneAfterAnother(t *testing.T) {
	t.Parallel()
	sc := engine.IterableConfig{ShuffleBuffer: 4}
	cfg := engine.Config{BatchSize: 4, Seed: 9, Workers: 2}
	want, _ := runSteps(t, newLoader(t, streamDataset(t, newMemStream(9, 9), sc), cfg), 0, 1, -1)
	d := streamDataset(t, newMemStream(9, 9), sc)
	for i := range 3 {
		l, err := engine.New(d, cfg)
		require.NoError(t, err)
		if i == 1 { // dropped mid-epoch
			for range l.Epoch(context.Background(), 0) {
				break
			}
		} else {
			got, _ := runSteps(t, l, 0, 1, -1)
			assert.Equal(t, want, got, "loader %d", i)
		}
		require.NoError(t, l.Close())
	}
	// and one loader's epochs while another has one open but idle
	idle := newLoader(t, d, cfg)
	_, stop := iter.Pull2(idle.Epoch(context.Background(), 0))
	defer stop()
	got, _ := runSteps(t, newLoader(t, d, cfg), 0, 1, -1)
	assert.Equal(t, want, got)
}

// prefetchStream is a memStream that is a Prefetcher, and logs the
// Prefetch and Open calls in the order they came.
type prefetchStream struct {
	*memStream
	mu  sync.Mutex
	log []string
}

func (p *prefetchStream) Prefetch(next []engine.ShardInfo) {
	names := make([]string, len(next))
	for i, sh := range next {
		names[i] = sh.Name
	}
	p.mu.Lock()
	p.log = append(p.log, "prefetch "+strings.Join(names, " "))
	p.mu.Unlock()
}

func (p *prefetchStream) Open(ctx context.Context, sh engine.ShardInfo) (engine.RecordReader, error) {
	p.mu.Lock()
	p.log = append(p.log, "open "+sh.Name)
	p.mu.Unlock()
	return p.memStream.Open(ctx, sh)
}

// TestStreamTellsAPrefetcherWhatItOpensNext: before each shard it opens,
// a rank's reader tells a Prefetcher the shards it opens after that one
// this epoch, in their order, shuffled or not, with any world size.
func TestStreamTellsAPrefetcherWhatItOpensNext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		shuffle     bool
		rank, world int
	}{{false, 0, 1}, {true, 0, 1}, {true, 1, 2}, {true, 2, 3}} {
		p := &prefetchStream{memStream: newMemStream(5, 0, 7, 3, 9, 4, 6, 2)}
		d, err := engine.FromIterable(context.Background(), p, engine.IterableConfig{ShuffleShards: tc.shuffle, ShuffleBuffer: 5})
		require.NoError(t, err)
		l := newLoader(t, d, engine.Config{BatchSize: 3, Workers: 2, Seed: 4, Rank: tc.rank, WorldSize: tc.world})
		for epoch := range 2 {
			p.log = nil
			collect(t, l, epoch)
			var opens []string
			for _, e := range p.log {
				if name, ok := strings.CutPrefix(e, "open "); ok {
					opens = append(opens, name)
				}
			}
			require.NotEmpty(t, opens)
			if tc.world == 1 {
				assert.Len(t, opens, 7, "every shard but the empty one, once")
			}
			for k, name := range opens {
				i := slices.Index(p.log, "open "+name)
				require.Positive(t, i, "%+v epoch %d: %s opened before any Prefetch", tc, epoch, name)
				assert.Equal(t, strings.TrimSpace("prefetch "+strings.Join(opens[k+1:], " ")), strings.TrimSpace(p.log[i-1]), "%+v epoch %d: before opening %s", tc, epoch, name)
				p.log[i] = "" // a shard opened twice (the padding) is found again
			}
		}
	}
}
