package gomlx_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x448/float16"
	"go.uber.org/goleak"

	tbgomlx "github.com/tensorbatch/tensorbatch/adapters/gomlx"
	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// every is one field of each dtype; sample i holds values derived from i.
var every = collate.Schema{
	{Name: "u8", DType: collate.Uint8, Shape: []int{2}},
	{Name: "i32", DType: collate.Int32},
	{Name: "i64", DType: collate.Int64, Shape: []int{1}},
	{Name: "f16", DType: collate.Float16, Shape: []int{2}},
	{Name: "bf16", DType: collate.BFloat16, Shape: []int{2}},
	{Name: "f32", DType: collate.Float32, Shape: []int{2, 3}},
	{Name: "f64", DType: collate.Float64},
	{Name: "i8", DType: collate.Int8},
	{Name: "i16", DType: collate.Int16},
	{Name: "u16", DType: collate.Uint16},
	{Name: "u32", DType: collate.Uint32},
	{Name: "ok", DType: collate.Bool, Shape: []int{2}},
}

func fillEvery(_ context.Context, s *engine.Slot) error {
	i := s.Index()
	u8 := collate.As[uint8](s.Tensor("u8"))
	u8[0], u8[1] = uint8(i), uint8(i+100)
	collate.As[int32](s.Tensor("i32"))[0] = int32(-i)
	collate.As[int64](s.Tensor("i64"))[0] = int64(i) << 40
	f16 := collate.As[collate.F16](s.Tensor("f16"))
	f16[0], f16[1] = collate.F16(i), collate.F16(0x3c00) // bit patterns; 0x3c00 is 1.0
	bf := collate.As[collate.BF16](s.Tensor("bf16"))
	bf[0], bf[1] = collate.BF16(i), collate.BF16(0x3f80) // 0x3f80 is 1.0
	f32 := collate.As[float32](s.Tensor("f32"))
	for j := range f32 {
		f32[j] = float32(i) + float32(j)/10
	}
	collate.As[float64](s.Tensor("f64"))[0] = float64(i) / 4
	collate.As[int8](s.Tensor("i8"))[0] = int8(-i)
	collate.As[int16](s.Tensor("i16"))[0] = int16(-300 * i)
	collate.As[uint16](s.Tensor("u16"))[0] = uint16(60000 + i)
	collate.As[uint32](s.Tensor("u32"))[0] = uint32(4e9) + uint32(i)
	ok := collate.As[bool](s.Tensor("ok"))
	ok[0], ok[1] = i%2 == 0, true
	return nil
}

func newLoader(t *testing.T, ds engine.Dataset, cfg engine.Config) *engine.Loader {
	t.Helper()
	cfg.Backend = "cpu"
	l, err := engine.New(ds, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

func newBackend(t *testing.T) backends.Backend {
	t.Helper()
	b, err := simplego.New("")
	require.NoError(t, err)
	t.Cleanup(b.Finalize)
	return b
}

func newDataset(t *testing.T, ctx context.Context, l *engine.Loader, cfg tbgomlx.Config) *tbgomlx.Dataset {
	t.Helper()
	d, err := tbgomlx.New(ctx, newBackend(t), l, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, d.Close()) })
	return d
}

// yieldAll yields until an error and returns the first input of each
// batch, as int64s, and the error.
func yieldAll(t *testing.T, d *tbgomlx.Dataset) ([][]int64, error) {
	t.Helper()
	var got [][]int64
	for {
		_, in, lab, err := d.Yield()
		if err != nil {
			return got, err
		}
		got = append(got, tensors.MustCopyFlatData[int64](in[0]))
		for _, x := range append(in, lab...) {
			require.NoError(t, x.FinalizeAll())
		}
	}
}

func TestYieldsEveryDTypeBitForBit(t *testing.T) {
	l := newLoader(t, engine.DatasetFunc(5, every, fillEvery), engine.Config{BatchSize: 2, Workers: 2})
	d := newDataset(t, context.Background(), l, tbgomlx.Config{
		Inputs: []string{"u8", "i32", "f16", "bf16", "f32", "f64", "i8", "i16", "u16", "u32", "ok"}, Labels: []string{"i64"}})
	assert.Equal(t, "tensorbatch", d.Name())

	for b, idx := range [][]int{{0, 1}, {2, 3}, {4}} {
		spec, in, lab, err := d.Yield()
		require.NoError(t, err, "batch %d", b)
		assert.Nil(t, spec)
		require.Len(t, in, 11)
		require.Len(t, lab, 1)
		n := len(idx)
		want := map[*tensors.Tensor]struct {
			dtype dtypes.DType
			dims  []int
		}{
			in[0]: {dtypes.Uint8, []int{n, 2}}, in[1]: {dtypes.Int32, []int{n}}, in[2]: {dtypes.Float16, []int{n, 2}},
			in[3]: {dtypes.BFloat16, []int{n, 2}}, in[4]: {dtypes.Float32, []int{n, 2, 3}}, in[5]: {dtypes.Float64, []int{n}},
			in[6]: {dtypes.Int8, []int{n}}, in[7]: {dtypes.Int16, []int{n}}, in[8]: {dtypes.Uint16, []int{n}},
			in[9]: {dtypes.Uint32, []int{n}}, in[10]: {dtypes.Bool, []int{n, 2}},
			lab[0]: {dtypes.Int64, []int{n, 1}},
		}
		for x, w := range want {
			assert.Equal(t, w.dtype, x.DType())
			assert.Equal(t, w.dims, x.Shape().Dimensions)
		}
		var u8 []uint8
		var i32 []int32
		var i64 []int64
		var f16 []float16.Float16
		var bf []bfloat16.BFloat16
		var f32 []float32
		var f64 []float64
		var i8 []int8
		var i16 []int16
		var u16 []uint16
		var u32 []uint32
		var ok []bool
		for _, i := range idx {
			u8 = append(u8, uint8(i), uint8(i+100))
			i32 = append(i32, int32(-i))
			i64 = append(i64, int64(i)<<40)
			f16 = append(f16, float16.Float16(i), float16.Float16(0x3c00))
			bf = append(bf, bfloat16.BFloat16(i), bfloat16.BFloat16(0x3f80))
			for j := range 6 {
				f32 = append(f32, float32(i)+float32(j)/10)
			}
			f64 = append(f64, float64(i)/4)
			i8 = append(i8, int8(-i))
			i16 = append(i16, int16(-300*i))
			u16 = append(u16, uint16(60000+i))
			u32 = append(u32, uint32(4e9)+uint32(i))
			ok = append(ok, i%2 == 0, true)
		}
		assert.Equal(t, u8, tensors.MustCopyFlatData[uint8](in[0]))
		assert.Equal(t, i32, tensors.MustCopyFlatData[int32](in[1]))
		assert.Equal(t, f16, tensors.MustCopyFlatData[float16.Float16](in[2]))
		assert.Equal(t, bf, tensors.MustCopyFlatData[bfloat16.BFloat16](in[3]))
		assert.Equal(t, f32, tensors.MustCopyFlatData[float32](in[4]))
		assert.Equal(t, f64, tensors.MustCopyFlatData[float64](in[5]))
		assert.Equal(t, i8, tensors.MustCopyFlatData[int8](in[6]))
		assert.Equal(t, i16, tensors.MustCopyFlatData[int16](in[7]))
		assert.Equal(t, u16, tensors.MustCopyFlatData[uint16](in[8]))
		assert.Equal(t, u32, tensors.MustCopyFlatData[uint32](in[9]))
		assert.Equal(t, ok, tensors.MustCopyFlatData[bool](in[10]))
		assert.Equal(t, i64, tensors.MustCopyFlatData[int64](lab[0]))
		for _, x := range append(in, lab...) {
			require.NoError(t, x.FinalizeAll())
		}
	}
	_, _, _, err := d.Yield()
	assert.Equal(t, io.EOF, err, "GoMLX's loops compare with ==")
}

// ids is a dataset whose "id" field is the sample's index.
func ids(n int) engine.Dataset {
	return engine.DatasetFunc(n, collate.Schema{{Name: "id", DType: collate.Int64}}, func(_ context.Context, s *engine.Slot) error {
		collate.As[int64](s.Tensor("id"))[0] = int64(s.Index())
		return nil
	})
}

// order is the loader's own batches of epoch, as int64s.
func order(t *testing.T, l *engine.Loader, epoch int) [][]int64 {
	t.Helper()
	var out [][]int64
	for b, err := range l.Epoch(context.Background(), epoch) {
		require.NoError(t, err)
		var ids []int64
		for _, i := range b.Indices() {
			ids = append(ids, int64(i))
		}
		out = append(out, ids)
	}
	return out
}

func TestTensorsOwnTheirMemory(t *testing.T) {
	// One worker and a window of one: the second batch is filled into the
	// buffer the first was in, while the first batch's tensor is held.
	l := newLoader(t, ids(4), engine.Config{BatchSize: 2, Workers: 1, PrefetchFactor: 1})
	d := newDataset(t, context.Background(), l, tbgomlx.Config{Inputs: []string{"id"}})
	_, first, _, err := d.Yield()
	require.NoError(t, err)
	_, second, _, err := d.Yield()
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 1}, tensors.MustCopyFlatData[int64](first[0]), "a copy, not a view of the recycled batch")
	assert.Equal(t, []int64{2, 3}, tensors.MustCopyFlatData[int64](second[0]))
	require.NoError(t, first[0].FinalizeAll())
	require.NoError(t, second[0].FinalizeAll())
	st := l.Stats()
	assert.Equal(t, int64(0), st.BytesCopied, "the loader itself copies nothing on the Fill path")
}

func TestEpochsResetAndEOF(t *testing.T) {
	l := newLoader(t, ids(10), engine.Config{BatchSize: 4, Shuffle: true, Seed: 7, DropLast: true, Workers: 2})
	want0, want1, want2 := order(t, l, 0), order(t, l, 1), order(t, l, 2)
	require.NotEqual(t, want0, want1, "shuffled per epoch")

	d := newDataset(t, context.Background(), l, tbgomlx.Config{Inputs: []string{"id"}})
	d.Reset() // before any Yield (Trainer.Eval does this): still epoch 0
	assert.Equal(t, 0, d.Epoch())
	got, err := yieldAll(t, d)
	assert.Equal(t, io.EOF, err)
	assert.Equal(t, want0, got)
	_, _, _, err = d.Yield()
	assert.Equal(t, io.EOF, err, "io.EOF until Reset")

	d.Reset()
	assert.Equal(t, 1, d.Epoch())
	got, err = yieldAll(t, d)
	assert.Equal(t, io.EOF, err)
	assert.Equal(t, want1, got)

	// Reset in the middle of an epoch ends it: the loader is free for another.
	d.Reset()
	_, in, _, err := d.Yield()
	require.NoError(t, err)
	assert.Equal(t, want2[0], tensors.MustCopyFlatData[int64](in[0]))
	require.NoError(t, in[0].FinalizeAll())
	d.Reset()
	assert.Equal(t, 3, d.Epoch())
	assert.Len(t, order(t, l, 3), 2, "the dataset's epoch was ended")
}

func TestInfiniteRunsEpochAfterEpoch(t *testing.T) {
	l := newLoader(t, ids(6), engine.Config{BatchSize: 4, Shuffle: true, DropLast: true, Workers: 1})
	var want [][]int64
	for e := 5; e < 8; e++ {
		want = append(want, order(t, l, e)...)
	}
	d := newDataset(t, context.Background(), l, tbgomlx.Config{Inputs: []string{"id"}, Infinite: true, Epoch: 5})
	var got [][]int64
	for range 3 {
		_, in, _, err := d.Yield()
		require.NoError(t, err)
		got = append(got, tensors.MustCopyFlatData[int64](in[0]))
		require.NoError(t, in[0].FinalizeAll())
	}
	assert.Equal(t, want, got, "one batch from each of epochs 5, 6 and 7")
	assert.Equal(t, 7, d.Epoch())

	empty := newLoader(t, ids(3), engine.Config{BatchSize: 4, DropLast: true})
	e := newDataset(t, context.Background(), empty, tbgomlx.Config{Inputs: []string{"id"}, Infinite: true})
	_, _, _, err := e.Yield()
	assert.Equal(t, io.EOF, err, "an epoch without batches ends even an infinite dataset")
}

func TestSampleErrorsPassThrough(t *testing.T) {
	bad := errors.New("corrupt record")
	ds := engine.DatasetFunc(10, collate.Schema{{Name: "id", DType: collate.Int64}}, func(_ context.Context, s *engine.Slot) error {
		if s.Index() == 5 {
			return bad
		}
		collate.As[int64](s.Tensor("id"))[0] = int64(s.Index())
		return nil
	})
	l := newLoader(t, ds, engine.Config{BatchSize: 2, Workers: 2})
	d := newDataset(t, context.Background(), l, tbgomlx.Config{Inputs: []string{"id"}})
	got, err := yieldAll(t, d)
	assert.Equal(t, [][]int64{{0, 1}, {2, 3}}, got, "every batch before the failing one")
	var se *engine.SampleError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 5, se.Index)
	assert.ErrorIs(t, err, bad)
	_, _, _, again := d.Yield()
	assert.Equal(t, err, again, "the error stays until Reset")
	d.Reset()
	assert.Equal(t, 1, d.Epoch())
	got, err = yieldAll(t, d)
	assert.Len(t, got, 2)
	assert.ErrorIs(t, err, bad, "epoch 1 fails at the same sample")
}

func TestCancellationEndsTheEpoch(t *testing.T) {
	started := make(chan struct{}, 100)
	ds := engine.DatasetFunc(1000, collate.Schema{{Name: "id", DType: collate.Int64}}, func(ctx context.Context, s *engine.Slot) error {
		if s.Index() >= 4 {
			started <- struct{}{}
			<-ctx.Done() // a slow sample that honours its ctx
			return ctx.Err()
		}
		return nil
	})
	l := newLoader(t, ds, engine.Config{BatchSize: 4, Workers: 2})
	ctx, cancel := context.WithCancelCause(context.Background())
	d := newDataset(t, ctx, l, tbgomlx.Config{Inputs: []string{"id"}})
	_, in, _, err := d.Yield()
	require.NoError(t, err)
	require.NoError(t, in[0].FinalizeAll())
	stop := errors.New("training stopped")
	go func() {
		<-started
		cancel(stop)
	}()
	t0 := time.Now()
	_, _, _, err = d.Yield()
	assert.ErrorIs(t, err, stop, "the ctx's cause")
	assert.Less(t, time.Since(t0), 5*time.Second)
	d.Reset()
	_, _, _, err = d.Yield()
	assert.ErrorIs(t, err, stop, "a cancelled ctx starts no epoch")
}

func TestClosedLoader(t *testing.T) {
	l := newLoader(t, ids(8), engine.Config{BatchSize: 2, Workers: 1})
	d := newDataset(t, context.Background(), l, tbgomlx.Config{Inputs: []string{"id"}})
	require.NoError(t, d.Close())
	require.NoError(t, l.Close())
	_, _, _, err := d.Yield()
	assert.ErrorIs(t, err, engine.ErrClosed)
}

func TestNewChecksItsArguments(t *testing.T) {
	l := newLoader(t, ids(4), engine.Config{})
	b := newBackend(t)
	ctx := context.Background()
	for _, c := range []struct {
		backend backends.Backend
		loader  *engine.Loader
		cfg     tbgomlx.Config
		msg     string
	}{
		{nil, l, tbgomlx.Config{Inputs: []string{"id"}}, "nil backend"},
		{b, nil, tbgomlx.Config{Inputs: []string{"id"}}, "nil Loader"},
		{b, l, tbgomlx.Config{}, "Config.Inputs: empty"},
		{b, l, tbgomlx.Config{Inputs: []string{"id"}, Epoch: -1}, "Config.Epoch: -1"},
		{b, l, tbgomlx.Config{Inputs: []string{"id", ""}}, "an empty field name"},
		{b, l, tbgomlx.Config{Inputs: []string{"id"}, Labels: []string{"id"}}, `a field named twice in ["id" "id"]`},
	} {
		_, err := tbgomlx.New(ctx, c.backend, c.loader, c.cfg)
		assert.ErrorContains(t, err, c.msg)
	}
}

func BenchmarkYield(b *testing.B) {
	for _, side := range []int{28, 224} {
		b.Run(fmt.Sprintf("float32x3x%dx%d", side, side), func(b *testing.B) {
			schema := collate.Schema{{Name: "x", DType: collate.Float32, Shape: []int{3, side, side}}}
			ds := engine.DatasetFunc(1<<20, schema, func(context.Context, *engine.Slot) error { return nil })
			l, err := engine.New(ds, engine.Config{BatchSize: 32, Workers: 1, SkipZeroing: true, Backend: "cpu"})
			require.NoError(b, err)
			defer l.Close()
			backend, err := simplego.New("")
			require.NoError(b, err)
			defer backend.Finalize()
			d, err := tbgomlx.New(context.Background(), backend, l, tbgomlx.Config{Inputs: []string{"x"}, Infinite: true})
			require.NoError(b, err)
			defer d.Close()
			b.SetBytes(int64(32 * 3 * side * side * 4))
			b.ReportAllocs()
			for b.Loop() {
				_, in, _, err := d.Yield()
				if err != nil {
					b.Fatal(err)
				}
				in[0].FinalizeAll()
			}
		})
	}
}

// ScalarLabels yields a scalar label field, as vision's and shards'
// labels are, as [batch, 1], which GoMLX's sparse cross-entropy takes as
// it is; inputs, and labels that are not scalar, keep their shapes.
func TestScalarLabels(t *testing.T) {
	schema := collate.Schema{{Name: "x", DType: collate.Float32, Shape: []int{3}}, {Name: "label", DType: collate.Int64}, {Name: "y", DType: collate.Float32, Shape: []int{2}}}
	ds := engine.DatasetFunc(8, schema, func(_ context.Context, s *engine.Slot) error {
		collate.As[int64](s.Tensor("label"))[0] = int64(s.Index() % 3)
		return nil
	})
	for _, scalar := range []bool{false, true} {
		l := newLoader(t, ds, engine.Config{BatchSize: 4})
		d := newDataset(t, context.Background(), l, tbgomlx.Config{Inputs: []string{"x"}, Labels: []string{"label", "y"}, ScalarLabels: scalar})
		_, in, lab, err := d.Yield()
		require.NoError(t, err)
		assert.Equal(t, []int{4, 3}, in[0].Shape().Dimensions)
		assert.Equal(t, []int{4, 2}, lab[1].Shape().Dimensions, "a label that is not scalar keeps its shape")
		if scalar {
			assert.Equal(t, []int{4, 1}, lab[0].Shape().Dimensions)
		} else {
			assert.Equal(t, []int{4}, lab[0].Shape().Dimensions)
		}
		assert.Equal(t, []int64{0, 1, 2, 0}, tensors.MustCopyFlatData[int64](lab[0]))
		for _, x := range append(in, lab...) {
			require.NoError(t, x.FinalizeAll())
		}
	}
}
