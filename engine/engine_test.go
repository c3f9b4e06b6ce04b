package engine_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// indexSchema has the sample's index and some random payload.
var indexSchema = collate.Schema{
	{Name: "index", DType: collate.Int64},
	{Name: "x", DType: collate.Float32, Shape: []int{3, 4, 5}},
}

// fillIndex writes the index and draws from the sample's RNG.
func fillIndex(_ context.Context, s *engine.Slot) error {
	collate.As[int64](s.Tensor("index"))[0] = int64(s.Index())
	x := collate.As[float32](s.Tensor("x"))
	for i := range x {
		x[i] = float32(s.Rand().NormFloat64())
	}
	return nil
}

func newLoader(t *testing.T, ds engine.Dataset, cfg engine.Config) *engine.Loader {
	t.Helper()
	l, err := engine.New(ds, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// collect runs an epoch and returns each batch's indices and the index
// field read back from the batch memory.
func collect(t *testing.T, l *engine.Loader, epoch int) (indices [][]int, fromMemory [][]int) {
	t.Helper()
	for b, err := range l.Epoch(context.Background(), epoch) {
		require.NoError(t, err)
		indices = append(indices, b.Indices())
		var got []int
		for _, v := range collate.As[int64](b.Tensor("index")) {
			got = append(got, int(v))
		}
		fromMemory = append(fromMemory, got)
	}
	return indices, fromMemory
}

func TestEveryIndexOnceInSamplerOrder(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 7, 64, 101} {
		for _, workers := range []int{0, 1, 3, 8} {
			for _, shuffle := range []bool{false, true} {
				for _, dropLast := range []bool{false, true} {
					name := fmt.Sprintf("n=%d/workers=%d/shuffle=%v/droplast=%v", n, workers, shuffle, dropLast)
					t.Run(name, func(t *testing.T) {
						const bs = 8
						cfg := engine.Config{BatchSize: bs, Workers: workers, Shuffle: shuffle, DropLast: dropLast, Seed: 7}
						l := newLoader(t, engine.DatasetFunc(n, indexSchema, fillIndex), cfg)
						for epoch := range 2 {
							var order []int
							if shuffle {
								order = engine.Shuffled{N: n, Seed: 7}.Order(epoch)
							} else {
								order = engine.Sequential{N: n}.Order(epoch)
							}
							want := engine.Batched{Sampler: sliceSampler(order), Size: bs, DropLast: dropLast}.Batches(epoch)
							got, mem := collect(t, l, epoch)
							assert.Equal(t, len(want), len(got))
							for k := range want {
								assert.Equal(t, want[k], got[k], "batch %d indices", k)
								assert.Equal(t, want[k], mem[k], "batch %d memory", k)
							}
							seen := map[int]int{}
							for _, b := range got {
								for _, i := range b {
									seen[i]++
								}
							}
							wantSeen := n
							if dropLast {
								wantSeen = n / bs * bs
							}
							assert.Len(t, seen, wantSeen)
							for i, c := range seen {
								assert.Equal(t, 1, c, "index %d", i)
							}
						}
					})
				}
			}
		}
	}
}

// untilError ranges over an epoch and returns the numbers of the batches
// delivered before the first error, and that error.
func untilError(l *engine.Loader, epoch int) (numbers []int, err error) {
	for b, err := range l.Epoch(context.Background(), epoch) {
		if err != nil {
			return numbers, err
		}
		numbers = append(numbers, b.IndexInEpoch())
	}
	return numbers, nil
}

type sliceSampler []int

func (s sliceSampler) Order(int) []int { return s }

func TestShuffleIsPureFunctionOfSeedAndEpoch(t *testing.T) {
	t.Parallel()
	a := engine.Shuffled{N: 100, Seed: 1}
	assert.Equal(t, a.Order(3), a.Order(3))
	assert.NotEqual(t, a.Order(3), a.Order(4))
	assert.NotEqual(t, a.Order(3), engine.Shuffled{N: 100, Seed: 2}.Order(3))
	got := a.Order(3)
	slices.Sort(got)
	assert.Equal(t, engine.Sequential{N: 100}.Order(0), got)
}

// digest hashes every batch of an epoch: indices and all bytes.
func digest(t *testing.T, l *engine.Loader, epoch int) [][32]byte {
	t.Helper()
	var out [][32]byte
	for b, err := range l.Epoch(context.Background(), epoch) {
		require.NoError(t, err)
		h := sha256.New()
		fmt.Fprint(h, b.Indices())
		for _, f := range indexSchema {
			h.Write(b.Tensor(f.Name).Bytes())
		}
		out = append(out, [32]byte(h.Sum(nil)))
	}
	return out
}

func TestBatchesBitIdenticalAcrossWorkersPrefetchAndProcs(t *testing.T) {
	ds := engine.DatasetFunc(75, indexSchema, fillIndex)
	base := engine.Config{BatchSize: 8, Shuffle: true, Seed: 42}
	ref := newLoader(t, ds, base)
	want := [][][32]byte{digest(t, ref, 0), digest(t, ref, 1)}
	require.NotEqual(t, want[0], want[1], "epochs must differ")

	for _, procs := range []int{1, 4} {
		old := runtime.GOMAXPROCS(procs)
		for _, workers := range []int{0, 1, 2, 4, 8} {
			for _, pf := range []int{1, 2, 4} {
				cfg := base
				cfg.Workers, cfg.PrefetchFactor = workers, pf
				l := newLoader(t, ds, cfg)
				for epoch := range 2 {
					assert.Equal(t, want[epoch], digest(t, l, epoch), "procs=%d workers=%d prefetch=%d epoch=%d", procs, workers, pf, epoch)
				}
			}
		}
		runtime.GOMAXPROCS(old)
	}
}

func TestInFlightBoundedByWindowUnderSlowConsumer(t *testing.T) {
	for _, tc := range []struct{ workers, pf int }{{1, 1}, {2, 2}, {4, 1}, {3, 3}} {
		t.Run(fmt.Sprintf("workers=%d/prefetch=%d", tc.workers, tc.pf), func(t *testing.T) {
			const bs = 4
			window := tc.workers * tc.pf
			var taken, maxAhead atomic.Int64
			ds := engine.DatasetFunc(200, indexSchema, func(ctx context.Context, s *engine.Slot) error {
				// batch s.Index()/bs is in flight: started, and not yet taken.
				ahead := int64(s.Index()/bs) - taken.Load()
				for {
					m := maxAhead.Load()
					if ahead <= m || maxAhead.CompareAndSwap(m, ahead) {
						break
					}
				}
				return fillIndex(ctx, s)
			})
			l := newLoader(t, ds, engine.Config{BatchSize: bs, Workers: tc.workers, PrefetchFactor: tc.pf})
			for b, err := range l.Epoch(context.Background(), 0) {
				require.NoError(t, err)
				taken.Store(int64(b.IndexInEpoch() + 1))
				time.Sleep(time.Millisecond) // a slow consumer lets the workers run ahead
			}
			// The loader counts a batch as taken just before the loop body
			// runs, so the body's count may lag by one.
			assert.LessOrEqual(t, maxAhead.Load(), int64(window), "a batch started beyond the window")
			assert.GreaterOrEqual(t, maxAhead.Load(), int64(window-1), "the workers never filled the window")
			// Buffers: the window plus the one batch the consumer holds.
			assert.LessOrEqual(t, l.Stats().Pool.Buffers, window+1)
		})
	}
}

// With one batch per worker (PyTorch's scheme) the first sample would wait
// forever for the rest of its batch, which would sit in the same worker's
// queue. Workers cooperate on the oldest batch, so the others fill it.
func TestWorkersCooperateOnOldestBatch(t *testing.T) {
	t.Parallel()
	const bs = 4
	rest := make(chan struct{})
	var filled atomic.Int32
	ds := engine.DatasetFunc(bs*4, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		if s.Index() == 0 {
			select {
			case <-rest:
			case <-time.After(10 * time.Second):
				return errors.New("the rest of batch 0 was never filled")
			}
		} else if s.Index() < bs && filled.Add(1) == bs-1 {
			close(rest)
		}
		return fillIndex(ctx, s)
	})
	l := newLoader(t, ds, engine.Config{BatchSize: bs, Workers: bs})
	got, _ := collect(t, l, 0)
	assert.Len(t, got, 4)
}

// A slow sample delays its own batch only: the other workers go on filling
// every other sample the window allows.
func TestSlowSampleDelaysOneBatchNotAWorkersQueue(t *testing.T) {
	t.Parallel()
	const bs, workers, pf = 4, 2, 2
	window := workers * pf
	others := window*bs - 1 // every other sample in the window
	var filled atomic.Int32
	done := make(chan struct{})
	ds := engine.DatasetFunc(bs*10, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		if s.Index() == 0 {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				return fmt.Errorf("only %d of %d other samples were filled while sample 0 was slow", filled.Load(), others)
			}
		} else if int(filled.Add(1)) == others {
			close(done)
		}
		return fillIndex(ctx, s)
	})
	l := newLoader(t, ds, engine.Config{BatchSize: bs, Workers: workers, PrefetchFactor: pf})
	got, _ := collect(t, l, 0)
	assert.Len(t, got, 10)
}

func TestSampleErrorDeliveredAtItsPosition(t *testing.T) {
	t.Parallel()
	boom := errors.New("corrupt record")
	for _, workers := range []int{0, 1, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			ds := engine.DatasetFunc(100, indexSchema, func(ctx context.Context, s *engine.Slot) error {
				if s.Index() == 45 || s.Index() == 47 || s.Index() == 80 {
					return fmt.Errorf("reading %d: %w", s.Index(), boom)
				}
				return fillIndex(ctx, s)
			})
			l := newLoader(t, ds, engine.Config{BatchSize: 10, Workers: workers})
			numbers, gotErr := untilError(l, 3)
			assert.Equal(t, []int{0, 1, 2, 3}, numbers, "the batches before the failing one come first")
			var se *engine.SampleError
			require.ErrorAs(t, gotErr, &se)
			assert.Equal(t, 45, se.Index, "the lowest failing position of the batch")
			assert.Equal(t, 3, se.Epoch)
			assert.ErrorIs(t, gotErr, boom)
			assert.Nil(t, se.Stack)
			assert.Contains(t, gotErr.Error(), "sample 45 (epoch 3")
			if workers == 0 {
				assert.Equal(t, -1, se.Worker)
			} else {
				assert.True(t, se.Worker >= 0 && se.Worker < workers)
			}
			// The loader is still usable: the next epoch fails the same way.
			n := 0
			for _, err := range l.Epoch(context.Background(), 4) {
				if err != nil {
					break
				}
				n++
			}
			assert.Equal(t, 4, n)
		})
	}
}

func TestPanicInFillBecomesSampleError(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{0, 2} {
		ds := engine.DatasetFunc(20, indexSchema, func(ctx context.Context, s *engine.Slot) error {
			if s.Index() == 13 {
				var m map[string]int
				m["x"]++ // a nil map write
			}
			return fillIndex(ctx, s)
		})
		l := newLoader(t, ds, engine.Config{BatchSize: 5, Workers: workers})
		_, err := untilError(l, 0)
		var se *engine.SampleError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, 13, se.Index)
		assert.Contains(t, err.Error(), "sample 13")
		assert.Contains(t, err.Error(), "panic: assignment to entry in nil map")
		assert.Contains(t, string(se.Stack), "engine_test.go", "the stack points at the panicking Fill")
	}
}

func TestUnknownFieldNamesTheSchema(t *testing.T) {
	t.Parallel()
	ds := engine.DatasetFunc(4, indexSchema, func(ctx context.Context, s *engine.Slot) error {
		s.Tensor("label")
		return nil
	})
	l := newLoader(t, ds, engine.Config{BatchSize: 2, Workers: 1})
	for _, err := range l.Epoch(context.Background(), 0) {
		require.Error(t, err)
		assert.Contains(t, err.Error(), `Slot.Tensor("label"): no such field; the schema has ["index" "x"]`)
		assert.Contains(t, err.Error(), "sample 0")
		break
	}
}

func TestTimeoutNamesTheStuckSample(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	for _, honour := range []bool{true, false} {
		t.Run(fmt.Sprintf("fill honours ctx=%v", honour), func(t *testing.T) {
			ds := engine.DatasetFunc(40, indexSchema, func(ctx context.Context, s *engine.Slot) error {
				if s.Index() == 22 {
					if honour {
						<-ctx.Done()
						return ctx.Err()
					}
					time.Sleep(time.Second) // ignores ctx
				}
				return fillIndex(ctx, s)
			})
			l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: 3, Timeout: 200 * time.Millisecond})
			numbers, gotErr := untilError(l, 0)
			assert.Equal(t, []int{0, 1, 2, 3, 4}, numbers)
			var se *engine.SampleError
			require.ErrorAs(t, gotErr, &se)
			assert.Equal(t, 22, se.Index)
			assert.ErrorIs(t, gotErr, engine.ErrTimeout)
		})
	}
}

func TestCancelStopsPromptlyAndNextEpochWorks(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{0, 1, 4} {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("workers=%d/restart=%v", workers, restart), func(t *testing.T) {
				t.Parallel()
				ds := engine.DatasetFunc(1000, indexSchema, func(ctx context.Context, s *engine.Slot) error {
					if s.Index() >= 50 {
						select { // a slow sample that honours ctx
						case <-ctx.Done():
							return ctx.Err()
						case <-time.After(time.Millisecond):
						}
					}
					return fillIndex(ctx, s)
				})
				l := newLoader(t, ds, engine.Config{BatchSize: 10, Workers: workers, RestartWorkers: restart})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				n := 0
				var gotErr error
				for _, err := range l.Epoch(ctx, 0) {
					if err != nil {
						gotErr = err
						break
					}
					if n++; n == 3 {
						cancel()
					}
				}
				assert.ErrorIs(t, gotErr, context.Canceled)
				assert.Equal(t, 3, n)
				assert.Zero(t, l.Stats().Pool.InUse, "a cancelled epoch left buffers in use")
				// The next epoch starts from scratch; breaking out of it is fine too.
				n = 0
				for _, err := range l.Epoch(context.Background(), 1) {
					require.NoError(t, err)
					if n++; n == 6 {
						break
					}
				}
				assert.Equal(t, 6, n)
				assert.Zero(t, l.Stats().Pool.InUse, "a broken-off epoch left buffers in use")
				got, _ := collect(t, l, 2)
				assert.Len(t, got, 100)
			})
		}
	}
}
