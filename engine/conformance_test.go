package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

// The conformance suite passes on every dataset the engine ships:
// DatasetFunc, Tensors, Concat, Subset, RandomSplit and an
// IterableDataset.
func TestDatasetsConform(t *testing.T) {
	fn := func(n int) func(testing.TB) engine.Dataset { // a fill that checks its index, as the suite wants
		return func(testing.TB) engine.Dataset {
			return engine.DatasetFunc(n, indexSchema, func(ctx context.Context, s *engine.Slot) error {
				if s.Index() < 0 || s.Index() >= n {
					return fmt.Errorf("index %d out of range", s.Index())
				}
				return fillIndex(ctx, s)
			})
		}
	}
	tensors := func(offset int64) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			idx := make([]int64, 30)
			x := make([]float32, 30*60)
			for i := range idx {
				idx[i] = int64(i) + offset
				x[i*60] = float32(offset)
			}
			a, err := collate.FromSlice(idx)
			require.NoError(t, err)
			b, err := collate.FromSlice(x, 30, 3, 4, 5)
			require.NoError(t, err)
			ds, err := engine.Tensors([]string{"index", "x"}, a, b)
			require.NoError(t, err)
			return ds
		}
	}
	concat := func(parts ...func(testing.TB) engine.Dataset) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			var ds []engine.Dataset
			for _, p := range parts {
				ds = append(ds, p(t))
			}
			c, err := engine.Concat(ds...)
			require.NoError(t, err)
			return c
		}
	}
	subset := func(idx ...int) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			s, err := engine.Subset(engine.DatasetFunc(20, indexSchema, fillIndex), idx)
			require.NoError(t, err)
			return s
		}
	}
	split := func(seed uint64) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			parts, err := engine.RandomSplit(engine.DatasetFunc(40, indexSchema, fillIndex), seed, 0.5, 0.5)
			require.NoError(t, err)
			return parts[1]
		}
	}
	iterable := func(sc engine.IterableConfig, counts ...int) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			d, err := engine.FromIterable(context.Background(), newMemStream(counts...), sc)
			require.NoError(t, err)
			return d
		}
	}
	for _, tc := range []struct {
		name       string
		new, other func(testing.TB) engine.Dataset
	}{
		{"DatasetFunc", fn(23), fn(24)},
		{"Tensors", tensors(0), tensors(100)},
		{"Concat", concat(fn(7), tensors(0)), concat(tensors(0), fn(7))},
		{"Subset", subset(3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7), subset(2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5, 9, 0)},
		{"RandomSplit", split(1), split(2)},
		{"Iterable", iterable(engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 5}, 5, 0, 7, 3), iterable(engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 6}, 5, 0, 7, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enginetest.TestDataset(t, enginetest.Case{New: tc.new, Other: tc.other})
		})
	}
}
