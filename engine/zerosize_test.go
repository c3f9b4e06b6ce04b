package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/csrc"
	"github.com/tensorbatch/tensorbatch/pinned"
)

// PyTorch parity through a real loader: zero-size dimensions
// (torch.zeros(3, 0)) and the dtypes int8, int16, uint16, uint32 and bool.

var zeroSchema = collate.Schema{
	{Name: "empty", DType: collate.Float32, Shape: []int{3, 0}},
	{Name: "index", DType: collate.Int64},
	{Name: "none", DType: collate.Bool, Shape: []int{0}},
	{Name: "seq", DType: collate.Int16, Shape: []int{collate.Dynamic, 0}, MaxLen: 3, Pad: -1},
}

func fillZero(_ context.Context, s *engine.Slot) error {
	e := s.Tensor("empty")
	if !assertShape(e, 3, 0) || len(e.Bytes()) != 0 || collate.As[float32](e) != nil {
		return fmt.Errorf("empty is %v with %d bytes", e, len(e.Bytes()))
	}
	if n := s.Tensor("none"); !assertShape(n, 0) || len(n.Bytes()) != 0 {
		return fmt.Errorf("none is %v", n)
	}
	if q := s.Sequence("seq", s.Index()%3); !assertShape(q, s.Index()%3, 0) || len(q.Bytes()) != 0 {
		return fmt.Errorf("seq is %v", q)
	}
	collate.As[int64](s.Tensor("index"))[0] = int64(s.Index())
	return nil
}

func assertShape(t collate.Tensor, shape ...int) bool {
	return fmt.Sprint(t.Shape()) == fmt.Sprint(shape)
}

func TestZeroSizeDimensionsFlowThroughTheLoader(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			l := newLoader(t, engine.DatasetFunc(10, zeroSchema, fillZero), engine.Config{BatchSize: 4, Workers: workers, Shuffle: true})
			batches := 0
			for b, err := range l.Epoch(context.Background(), 1) {
				require.NoError(t, err)
				n := b.Len()
				assert.Equal(t, []int{n, 3, 0}, b.Tensor("empty").Shape())
				assert.Empty(t, b.Tensor("empty").Bytes())
				assert.Equal(t, []int{n, 0}, b.Tensor("none").Shape())
				longest := 0
				for k, i := range b.Indices() {
					assert.Equal(t, int64(i), collate.As[int64](b.Tensor("index"))[k])
					assert.Equal(t, int64(i%3), collate.As[int64](b.Tensor("seq_len"))[k])
					longest = max(longest, i%3)
				}
				assert.Equal(t, []int{n, longest, 0}, b.Tensor("seq").Shape(), "padded to the longest, rows of nothing")
				batches++
			}
			assert.Equal(t, 3, batches)
		})
	}
}

// A schema of only empty fields still loads: the buffer is never 0 bytes.
func TestOnlyEmptyFieldsLoad(t *testing.T) {
	t.Parallel()
	schema := collate.Schema{{Name: "nothing", DType: collate.Uint8, Shape: []int{0, 7}}}
	ds := engine.DatasetFunc(5, schema, func(_ context.Context, s *engine.Slot) error {
		if !assertShape(s.Tensor("nothing"), 0, 7) {
			return fmt.Errorf("got %v", s.Tensor("nothing"))
		}
		return nil
	})
	l := newLoader(t, ds, engine.Config{BatchSize: 2, Workers: 1})
	var got [][]int
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		assert.Equal(t, []int{b.Len(), 0, 7}, b.Tensor("nothing").Shape())
		got = append(got, b.Indices())
	}
	assert.Equal(t, [][]int{{0, 1}, {2, 3}, {4}}, got)
}

// Empty fields are empty on the device too, beside fields that are not.
func TestZeroSizeFieldsOnTheDevice(t *testing.T) {
	fakeGPU(t, 200, false)
	l := newLoader(t, engine.DatasetFunc(6, zeroSchema, fillZero), engine.Config{BatchSize: 4, Workers: 1, Backend: "cuda"})
	rt := l.Backend().Backend.(*pinned.GPU).Runtime()
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		require.NoError(t, b.WaitDevice())
		for _, name := range []string{"empty", "index", "none", "seq", "seq_len"} {
			dt, host := b.DeviceTensor(name), b.Tensor(name)
			assert.Equal(t, host.Shape(), dt.Shape, name)
			assert.Equal(t, len(host.Bytes()), dt.Bytes, name)
			back := make([]byte, dt.Bytes)
			if dt.Bytes > 0 {
				require.NoError(t, rt.CopyToHost(back, csrc.DevicePtr(dt.Ptr)))
			}
			assert.True(t, bytes.Equal(host.Bytes(), back), name)
		}
	}
}

var newDTypes = collate.Schema{
	{Name: "i8", DType: collate.Int8, Shape: []int{2}},
	{Name: "i16", DType: collate.Int16},
	{Name: "u16", DType: collate.Uint16, Shape: []int{3}},
	{Name: "u32", DType: collate.Uint32},
	{Name: "mask", DType: collate.Bool, Shape: []int{2}},
	{Name: "chars", DType: collate.Int8, Shape: []int{collate.Dynamic}, MaxLen: 4, Pad: -1},
	{Name: "valid", DType: collate.Bool, Shape: []int{collate.Dynamic}, MaxLen: 4, Pad: 1},
}

func fillNewDTypes(_ context.Context, s *engine.Slot) error {
	i := s.Index()
	copy(collate.As[int8](s.Tensor("i8")), []int8{int8(-i), int8(i)})
	collate.As[int16](s.Tensor("i16"))[0] = int16(-1000 * i)
	copy(collate.As[uint16](s.Tensor("u16")), []uint16{uint16(i), 65535, uint16(i * 1000)})
	collate.As[uint32](s.Tensor("u32"))[0] = uint32(i) << 28
	copy(collate.As[bool](s.Tensor("mask")), []bool{i%2 == 0, i%3 == 0})
	chars := collate.As[int8](s.Sequence("chars", i%4))
	for k := range chars {
		chars[k] = int8(i*10 + k)
	}
	valid := collate.As[bool](s.Sequence("valid", i%3))
	for k := range valid {
		valid[k] = false
	}
	return nil
}

func TestNewDTypesFlowThroughTheLoader(t *testing.T) {
	t.Parallel()
	l := newLoader(t, engine.DatasetFunc(9, newDTypes, fillNewDTypes), engine.Config{BatchSize: 3, Workers: 2})
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		ix := b.Indices()
		for k, i := range ix {
			assert.Equal(t, []int8{int8(-i), int8(i)}, collate.As[int8](b.Tensor("i8"))[2*k:2*k+2])
			assert.Equal(t, int16(-1000*i), collate.As[int16](b.Tensor("i16"))[k])
			assert.Equal(t, []uint16{uint16(i), 65535, uint16(i * 1000)}, collate.As[uint16](b.Tensor("u16"))[3*k:3*k+3])
			assert.Equal(t, uint32(i)<<28, collate.As[uint32](b.Tensor("u32"))[k])
			assert.Equal(t, []bool{i%2 == 0, i%3 == 0}, collate.As[bool](b.Tensor("mask"))[2*k:2*k+2])
		}
		chars := b.Tensor("chars")
		longest := chars.Dim(1)
		assert.Equal(t, []int{len(ix), longest}, chars.Shape())
		for k, i := range ix {
			for j := range longest {
				want := int8(-1) // the pad
				if j < i%4 {
					want = int8(i*10 + j)
				}
				assert.Equal(t, want, collate.As[int8](chars)[k*longest+j], "sample %d row %d", i, j)
			}
		}
		valid := b.Tensor("valid")
		vl := valid.Dim(1)
		for k, i := range ix {
			for j := range vl {
				assert.Equal(t, j >= i%3, collate.As[bool](valid)[k*vl+j], "padded with true")
			}
		}
		for _, v := range b.Tensor("valid").Bytes() {
			assert.LessOrEqual(t, v, byte(1), "a bool byte is 0 or 1")
		}
	}
}

// Gather is dtype-agnostic: TensorsDataset fills batches of the new dtypes
// with one kernel call a field.
func TestTensorsDatasetGathersNewDTypes(t *testing.T) {
	t.Parallel()
	mask := []bool{true, false, false, true, true, true, false, false}
	small := []int16{-1, 2, -3, 4, -5, 6, -7, 8}
	empty, err := collate.MakeTensor(collate.Uint32, []int{8, 0}, nil)
	require.NoError(t, err)
	ds, err := engine.Tensors([]string{"mask", "small", "empty"},
		must(collate.FromSlice(mask, 8)), must(collate.FromSlice(small, 8)), empty)
	require.NoError(t, err)
	l := newLoader(t, ds, engine.Config{BatchSize: 3, Shuffle: true, Seed: 4, Workers: 1})
	for b, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		for k, i := range b.Indices() {
			assert.Equal(t, mask[i], collate.As[bool](b.Tensor("mask"))[k])
			assert.Equal(t, small[i], collate.As[int16](b.Tensor("small"))[k])
		}
		assert.Equal(t, []int{b.Len(), 0}, b.Tensor("empty").Shape())
	}
}
