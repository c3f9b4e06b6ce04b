package collate_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
)

// PyTorch parity: the dtypes int8, int16, uint16, uint32 and bool, and
// zero-size dimensions (torch.zeros(3, 0)).

// The numeric values of DTypes may be persisted: new ones only ever go at
// the end.
func TestDTypeValuesNeverChange(t *testing.T) {
	t.Parallel()
	for want, d := range []collate.DType{0, collate.Uint8, collate.Int32, collate.Int64, collate.Float16, collate.BFloat16,
		collate.Float32, collate.Float64, collate.Int8, collate.Int16, collate.Uint16, collate.Uint32, collate.Bool} {
		assert.Equal(t, want, int(d), "%v", d)
	}
	assert.False(t, (collate.Bool + 1).Valid())
	err := collate.Schema{{Name: "x", DType: 13}}.Validate()
	assert.ErrorContains(t, err, `field "x" has invalid dtype DType(13) (want one of uint8, int32, int64, float16, bfloat16, float32, float64, int8, int16, uint16, uint32, bool)`)
}

func TestNewDTypesViewWithAs(t *testing.T) {
	t.Parallel()
	assert.Equal(t, collate.Int8, collate.DTypeOf[int8]())
	assert.Equal(t, collate.Int16, collate.DTypeOf[int16]())
	assert.Equal(t, collate.Uint16, collate.DTypeOf[uint16]())
	assert.Equal(t, collate.Uint32, collate.DTypeOf[uint32]())
	assert.Equal(t, collate.Bool, collate.DTypeOf[bool]())
	assert.Equal(t, collate.Float16, collate.DTypeOf[collate.F16](), "F16 is not uint16")
	assert.Equal(t, collate.Float64, collate.DTypeOf[float64]())

	checkView(t, []int8{-128, -1, 0, 127}, collate.Int8, 4)
	checkView(t, []int16{-32768, -1, 0, 32767}, collate.Int16, 8)
	checkView(t, []uint16{0, 1, 65535, 256}, collate.Uint16, 8)
	checkView(t, []uint32{0, 1, 1 << 31, 4294967295}, collate.Uint32, 16)
	checkView(t, []bool{true, false, false, true}, collate.Bool, 4)

	b, err := collate.FromSlice([]bool{true, false, true}, 3)
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 0, 1}, b.Bytes(), "a bool is one byte, 0 or 1")
	assert.PanicsWithValue(t, "collate: As[uint8] on a tensor of dtype bool", func() { collate.As[uint8](b) })
	u16, err := collate.FromSlice([]uint16{1, 2})
	require.NoError(t, err)
	assert.PanicsWithValue(t, "collate: As[float16] on a tensor of dtype uint16", func() { collate.As[collate.F16](u16) })
	assert.PanicsWithValue(t, "collate: As[uint16] on a tensor of dtype bfloat16", func() {
		bf, _ := collate.FromSlice([]collate.BF16{1})
		collate.As[uint16](bf)
	})
}

func checkView[T collate.Element](t *testing.T, vals []T, d collate.DType, nbytes int) {
	t.Helper()
	tn, err := collate.FromSlice(vals, 2, 2)
	require.NoError(t, err)
	assert.Equal(t, d, tn.DType())
	assert.Len(t, tn.Bytes(), nbytes)
	assert.Equal(t, vals, collate.As[T](tn))
	got := collate.As[T](tn)
	got[3] = vals[0]
	assert.Equal(t, vals[0], vals[3], "As shares memory")
}

func TestPadBytesOfEveryDType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    collate.DType
		pad  float64
		want []byte
	}{
		{collate.Uint8, 7, []byte{7}},
		{collate.Int32, -1, []byte{0xff, 0xff, 0xff, 0xff}},
		{collate.Int64, -2, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{collate.Float16, 1, []byte{0x00, 0x3c}},
		{collate.BFloat16, -1, []byte{0x80, 0xbf}},
		{collate.Float32, -1, []byte{0, 0, 0x80, 0xbf}},
		{collate.Float64, 1, []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}},
		{collate.Int8, -1, []byte{0xff}},
		{collate.Int8, -128, []byte{0x80}},
		{collate.Int16, -2, []byte{0xfe, 0xff}},
		{collate.Int16, 258, []byte{0x02, 0x01}},
		{collate.Uint16, 65535, []byte{0xff, 0xff}},
		{collate.Uint32, 1 << 31, []byte{0, 0, 0, 0x80}},
		{collate.Bool, 0, []byte{0}},
		{collate.Bool, 1, []byte{1}},
		{collate.Bool, -3, []byte{1}},
	} {
		assert.Equal(t, tc.want, collate.Field{DType: tc.d, Pad: tc.pad}.PadBytes(), "%v pad %v", tc.d, tc.pad)
	}
}

// Gather is dtype-agnostic: rows of every dtype, on every path.
func TestGatherEveryDType(t *testing.T) {
	idx := []int64{2, 0, 2}
	for d := collate.Uint8; d.Valid(); d++ {
		const rows, cols = 3, 5
		src := make([]byte, rows*cols*d.Size())
		for i := range src {
			src[i] = byte(i*7 + 1)
			if d == collate.Bool {
				src[i] = byte(i % 2)
			}
		}
		st, err := collate.MakeTensor(d, []int{rows, cols}, src)
		require.NoError(t, err)
		row := cols * d.Size()
		var want []byte
		for _, i := range idx {
			want = append(want, src[int(i)*row:(int(i)+1)*row]...)
		}
		onEveryPath(t, func(t *testing.T, p collate.Kernels) {
			dst := make([]byte, len(idx)*row)
			dt, err := collate.MakeTensor(d, []int{len(idx), cols}, dst)
			require.NoError(t, err)
			require.NoError(t, collate.Gather(dt, st, idx))
			assert.Equal(t, want, dst, "%v", d)
		})
	}
	b, _ := collate.FromSlice([]bool{true, false, true, true}, 4)
	dst, _ := collate.FromSlice(make([]bool, 2), 2)
	require.NoError(t, collate.Gather(dst, b, []int64{1, 3}))
	assert.Equal(t, []bool{false, true}, collate.As[bool](dst))
}

func TestZeroSizeDimensionsAreValidAndEmpty(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		f    collate.Field
		want string // "" means valid
	}{
		{collate.Field{Name: "x", DType: collate.Float32, Shape: []int{3, 0}}, ""},
		{collate.Field{Name: "x", DType: collate.Int8, Shape: []int{0}}, ""},
		{collate.Field{Name: "x", DType: collate.Bool, Shape: []int{0, 5, 0}}, ""},
		{collate.Field{Name: "x", DType: collate.Float64, Shape: []int{collate.Dynamic, 0}, MaxLen: 4}, ""},
		{collate.Field{Name: "x", DType: collate.Float64, Shape: []int{collate.Dynamic, 0}}, "a Dynamic first dimension needs MaxLen > 0, got 0"},
		{collate.Field{Name: "x", DType: collate.Float32, Shape: []int{0, -2}}, "dimension 1 is -2, want >= 0"},
		// The product of the other dimensions is bounded whatever their
		// order, so no product of dimensions overflows.
		{collate.Field{Name: "x", DType: collate.Float32, Shape: []int{1 << 30, 1 << 30, 0}}, "its non-zero dimensions multiply to more than"},
		{collate.Field{Name: "x", DType: collate.Float32, Shape: []int{0, 1 << 30, 1 << 30}}, "its non-zero dimensions multiply to more than"},
	} {
		err := collate.Schema{tc.f}.Validate()
		if tc.want == "" {
			require.NoError(t, err, "%v", tc.f)
			assert.Zero(t, tc.f.Bytes(), "%v", tc.f)
			assert.Zero(t, tc.f.Elems(), "%v", tc.f)
			continue
		}
		assert.ErrorIs(t, err, collate.ErrSchema)
		assert.ErrorContains(t, err, tc.want)
	}

	s := collate.Schema{
		{Name: "empty", DType: collate.Float32, Shape: []int{3, 0}},
		{Name: "label", DType: collate.Int64},
		{Name: "seq", DType: collate.Int16, Shape: []int{collate.Dynamic, 0}, MaxLen: 4, Pad: -1},
	}
	l, err := collate.NewLayout(s, 5)
	require.NoError(t, err)
	buf := make([]byte, l.Size())
	assert.Equal(t, []int{3, 0}, l.Sample(buf, 0, 4).Shape())
	assert.Empty(t, l.Sample(buf, 0, 4).Bytes())
	assert.Nil(t, collate.As[float32](l.Sample(buf, 0, 4)))
	assert.Equal(t, []int{5, 3, 0}, l.Batch(buf, 0, 5).Shape())
	assert.Equal(t, []int{2, 0}, l.Rows(buf, 2, 1, 2).Shape())
	assert.Equal(t, []int{5, 3, 0}, l.Padded(buf, 2, 5, 3).Shape())
	assert.Equal(t, 0, l.Offset(0), "an empty field takes no room")
	assert.Equal(t, 0, l.Offset(1))
	assert.Equal(t, collate.Align, l.Offset(2))

	only, err := collate.NewLayout(collate.Schema{s[0]}, 8)
	require.NoError(t, err)
	assert.Equal(t, collate.Align, only.Size(), "a buffer is never 0 bytes: it must be allocated")

	tn, err := collate.MakeTensor(collate.Uint16, []int{2, 0}, nil)
	require.NoError(t, err)
	assert.Equal(t, "Tensor(uint16[2,0])", tn.String())
	assert.Zero(t, tn.Elems())
	_, err = collate.MakeTensor(collate.Uint16, []int{2, 0}, []byte{0})
	assert.ErrorContains(t, err, "tensor uint16[2,0] needs 0 bytes, got 1")
	empty, err := collate.FromSlice([]int8{})
	require.NoError(t, err)
	assert.Equal(t, []int{0}, empty.Shape())
}

// The kernels take empty inputs: nothing to do is not an error.
func TestKernelsAcceptZeroSizes(t *testing.T) {
	src, err := collate.MakeTensor(collate.Float32, []int{5, 3, 0}, nil)
	require.NoError(t, err)
	dst, err := collate.MakeTensor(collate.Float32, []int{2, 3, 0}, nil)
	require.NoError(t, err)
	onEveryPath(t, func(t *testing.T, p collate.Kernels) {
		require.NoError(t, collate.Gather(dst, src, []int64{4, 0}), "rows of 0 bytes")
		require.NoError(t, collate.GatherStreaming(dst, src, []int64{1}))
		assert.ErrorContains(t, collate.Gather(dst, src, []int64{5}), "index 5 at position 0 is out of range [0, 5)")
		assert.ErrorContains(t, collate.Gather(dst, src, []int64{0, 1, 2}), "3 rows into dst")

		out := []float32{7}
		for _, hwc := range [][3]int{{0, 4, 3}, {4, 0, 3}, {0, 0, 3}} {
			require.NoError(t, collate.U8HWCToCHW(out[:0], nil, hwc[0], hwc[1], hwc[2], []float32{0, 0, 0}, []float32{1, 1, 1}), "%v", hwc)
		}
		require.NoError(t, collate.U8HWCToCHW(nil, nil, 4, 4, 0, nil, nil), "no channels")
		assert.Equal(t, []float32{7}, out)

		buf := bytes.Repeat([]byte{9}, 8)
		collate.PadStack(buf, []int64{2, 0, 1}, 4, 2, 0, []byte{0xff, 0xff})
		assert.Equal(t, bytes.Repeat([]byte{9}, 8), buf, "rows of 0 bytes move nothing")
	})
}

func ExampleDType() {
	for _, d := range []collate.DType{collate.Int8, collate.Int16, collate.Uint16, collate.Uint32, collate.Bool} {
		fmt.Println(d, d.Size())
	}
	mask, _ := collate.FromSlice([]bool{true, false, true}, 3)
	fmt.Println(mask, collate.As[bool](mask))
	empty, _ := collate.MakeTensor(collate.Float32, []int{3, 0}, nil)
	fmt.Println(empty, len(empty.Bytes()))
	// Output:
	// int8 1
	// int16 2
	// uint16 2
	// uint32 4
	// bool 1
	// Tensor(bool[3]) [true false true]
	// Tensor(float32[3,0]) 0
}
