package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

func tensorsDataset(t testing.TB, n int) *engine.TensorsDataset {
	x := make([]float32, n*3*4)
	for i := range x {
		x[i] = float32(i)
	}
	y := make([]int64, n)
	for i := range y {
		y[i] = int64(i * 10)
	}
	xt, err := collate.FromSlice(x, n, 3, 4)
	require.NoError(t, err)
	yt, err := collate.FromSlice(y)
	require.NoError(t, err)
	ds, err := engine.Tensors([]string{"x", "y"}, xt, yt)
	require.NoError(t, err)
	return ds
}

func TestTensorsDatasetGathersRows(t *testing.T) {
	t.Parallel()
	ds := tensorsDataset(t, 100)
	assert.Equal(t, collate.Schema{{Name: "x", DType: collate.Float32, Shape: []int{3, 4}}, {Name: "y", DType: collate.Int64, Shape: []int{}}}, ds.Schema())
	var ref [][]byte
	for _, workers := range []int{0, 1, 3} {
		l := newLoader(t, ds, engine.Config{BatchSize: 16, Shuffle: true, Seed: 3, Workers: workers})
		var all [][]byte
		batches := 0
		for b, err := range l.Epoch(context.Background(), 0) {
			require.NoError(t, err)
			x, y := collate.As[float32](b.Tensor("x")), collate.As[int64](b.Tensor("y"))
			for r, i := range b.Indices() {
				assert.Equal(t, int64(i*10), y[r])
				for k := range 12 {
					require.Equal(t, float32(i*12+k), x[r*12+k], "row %d of batch %d", r, b.IndexInEpoch())
				}
			}
			all = append(all, append([]byte(nil), b.Tensor("x").Bytes()...))
			batches++
		}
		assert.Equal(t, 7, batches)
		assert.Equal(t, int64(100*(12*4+8)), l.Stats().BytesCopied, "the gather is a copy, and is counted")
		if ref == nil {
			ref = all
		}
		assert.Equal(t, ref, all, "workers=%d", workers)
	}
}

func TestTensorsErrorsNameTheTensor(t *testing.T) {
	t.Parallel()
	a, _ := collate.FromSlice(make([]float32, 6), 3, 2)
	b, _ := collate.FromSlice(make([]int64, 4))
	_, err := engine.Tensors([]string{"a", "b"}, a, b)
	assert.EqualError(t, err, `engine: Tensors: "b" has 4 rows, "a" has 3`)
	_, err = engine.Tensors([]string{"a"}, a, b)
	assert.EqualError(t, err, "engine: Tensors: 1 names for 2 tensors")
	_, err = engine.Tensors([]string{"a", "a"}, a, a)
	assert.ErrorContains(t, err, `both named "a"`)
}

var seqSchema = collate.Schema{
	{Name: "tokens", DType: collate.Int32, Shape: []int{collate.Dynamic}, MaxLen: 10, Pad: -1},
	{Name: "frames", DType: collate.Float32, Shape: []int{collate.Dynamic, 2}, MaxLen: 4},
	{Name: "label", DType: collate.Int64},
}

// fillSeq writes index%7 tokens (capped at 10) and index%5 frames.
func fillSeq(_ context.Context, s *engine.Slot) error {
	i := s.Index()
	tok := collate.As[int32](s.Sequence("tokens", i%7))
	for k := range tok {
		tok[k] = int32(100*i + k)
	}
	fr := collate.As[float32](s.Sequence("frames", min(i%5, 4)))
	for k := range fr {
		fr[k] = float32(i) + float32(k)/10
	}
	collate.As[int64](s.Tensor("label"))[0] = int64(i)
	return nil
}

func TestDynamicFieldsArePaddedToTheLongest(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{0, 3} {
		for _, skipZero := range []bool{false, true} {
			t.Run(fmt.Sprintf("workers=%d/skipzero=%v", workers, skipZero), func(t *testing.T) {
				l := newLoader(t, engine.DatasetFunc(40, seqSchema, fillSeq), engine.Config{BatchSize: 6, Workers: workers, Shuffle: true, SkipZeroing: skipZero})
				var moved int64
				for epoch := range 2 {
					for b, err := range l.Epoch(context.Background(), epoch) {
						require.NoError(t, err)
						idx := b.Indices()
						longTok, longFr := 0, 0
						for _, i := range idx {
							longTok, longFr = max(longTok, i%7), max(longFr, min(i%5, 4))
						}
						tok, fr := b.Tensor("tokens"), b.Tensor("frames")
						require.Equal(t, []int{len(idx), longTok}, tok.Shape())
						require.Equal(t, []int{len(idx), longFr, 2}, fr.Shape())
						assert.Equal(t, []int{len(idx)}, b.Tensor("tokens_len").Shape())
						tv, fv := collate.As[int32](tok), collate.As[float32](fr)
						tl, fl := collate.As[int64](b.Tensor("tokens_len")), collate.As[int64](b.Tensor("frames_len"))
						for r := 1; r < len(idx); r++ { // rows moved down by the pad-stack
							if longTok < 10 {
								moved += 4 * tl[r]
							}
							if longFr < 4 {
								moved += 8 * fl[r]
							}
						}
						for r, i := range idx {
							require.Equal(t, int64(i%7), tl[r])
							require.Equal(t, int64(min(i%5, 4)), fl[r])
							for k := range longTok {
								want := int32(-1)
								if k < i%7 {
									want = int32(100*i + k)
								}
								require.Equal(t, want, tv[r*longTok+k], "sample %d token %d", i, k)
							}
							for k := range longFr * 2 {
								want := float32(0)
								if k < 2*min(i%5, 4) {
									want = float32(i) + float32(k)/10
								}
								require.Equal(t, want, fv[r*longFr*2+k], "sample %d frame value %d", i, k)
							}
						}
					}
				}
				assert.Positive(t, moved)
				assert.Equal(t, moved, l.Stats().BytesCopied, "pad-stack's moves are copies, and are counted")
			})
		}
	}
}

func TestDynamicFieldErrorsNameFieldAndIndex(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fill func(s *engine.Slot)
		msg  string
	}{
		{"longer than MaxLen", func(s *engine.Slot) { s.Sequence("tokens", 11) }, `field "tokens": a sequence of 11 rows, its MaxLen is 10`},
		{"dtype mismatch", func(s *engine.Slot) { collate.As[int64](s.Sequence("tokens", 3)) }, `As[int64] on field "tokens" of dtype int32`},
		{"not dynamic", func(s *engine.Slot) { s.Sequence("label", 1) }, `Slot.Sequence("label"): the field's first dimension is not Dynamic`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := engine.DatasetFunc(20, seqSchema, func(ctx context.Context, s *engine.Slot) error {
				if s.Index() == 13 {
					tc.fill(s)
				}
				return fillSeq(ctx, s)
			})
			l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: 2})
			_, err := untilError(l, 0)
			var se *engine.SampleError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, 13, se.Index)
			assert.ErrorContains(t, err, "sample 13")
			assert.ErrorContains(t, err, tc.msg)
		})
	}
	clash := append(collate.Schema{{Name: "tokens_len", DType: collate.Int64}}, seqSchema...)
	_, err := engine.New(engine.DatasetFunc(1, clash, fillSeq), engine.Config{})
	assert.ErrorIs(t, err, collate.ErrSchema)
	assert.ErrorContains(t, err, `field 0 "tokens_len" clashes with the lengths field "tokens_len" of Dynamic field 1 "tokens"`)
}

// BenchmarkTensorsLoader is the loader on an in-memory dataset: 4096 rows
// of a 3×64×64 float32 image and a label, batch 64.
func BenchmarkTensorsLoader(b *testing.B) {
	const n = 4096
	x, _ := collate.FromSlice(make([]float32, n*3*64*64), n, 3, 64, 64)
	y, _ := collate.FromSlice(make([]int64, n))
	ds, err := engine.Tensors([]string{"image", "label"}, x, y)
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range []int{0, 2} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			l, err := engine.New(ds, engine.Config{BatchSize: 64, Shuffle: true, Workers: w, SkipZeroing: true, Backend: "cpu"})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batches := loopEpochs(b, l)
			b.SetBytes(int64(n * (3*64*64*4 + 8)))
			b.ReportMetric(float64(batches)/b.Elapsed().Seconds(), "batches/s")
		})
	}
}
