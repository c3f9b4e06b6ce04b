package collate_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/collate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDTypeSizesAndNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    collate.DType
		size int
		name string
	}{
		{collate.Uint8, 1, "uint8"}, {collate.Int32, 4, "int32"}, {collate.Int64, 8, "int64"},
		{collate.Float16, 2, "float16"}, {collate.BFloat16, 2, "bfloat16"},
		{collate.Float32, 4, "float32"}, {collate.Float64, 8, "float64"},
		{collate.Int8, 1, "int8"}, {collate.Int16, 2, "int16"}, {collate.Uint16, 2, "uint16"},
		{collate.Uint32, 4, "uint32"}, {collate.Bool, 1, "bool"},
		{0, 0, "DType(0)"}, {99, 0, "DType(99)"},
	} {
		assert.Equal(t, tc.size, tc.d.Size(), tc.name)
		assert.Equal(t, tc.name, tc.d.String())
		assert.Equal(t, tc.size > 0, tc.d.Valid())
	}
	assert.Equal(t, collate.Float16, collate.DTypeOf[collate.F16]())
	assert.Equal(t, collate.BFloat16, collate.DTypeOf[collate.BF16]())
	assert.Equal(t, collate.Int32, collate.DTypeOf[int32]())
}

func TestSchemaValidate(t *testing.T) {
	t.Parallel()
	img := collate.Field{Name: "image", DType: collate.Float32, Shape: []int{3, 224, 224}}
	for _, tc := range []struct {
		s    collate.Schema
		want string // "" means valid
	}{
		{collate.Schema{img, {Name: "label", DType: collate.Int64}}, ""},
		{collate.Schema{{Name: "scalar", DType: collate.Uint8, Shape: []int{}}}, ""},
		{nil, "no fields"},
		{collate.Schema{{DType: collate.Int64}}, "field 0 has an empty name"},
		{collate.Schema{img, img}, `fields 0 and 1 are both named "image"`},
		{collate.Schema{{Name: "x"}}, `field "x" has invalid dtype DType(0)`},
		{collate.Schema{{Name: "x", DType: collate.Float32, Shape: []int{3, -1}}}, `field "x": only the first dimension may be Dynamic`},
		{collate.Schema{{Name: "x", DType: collate.Float32, Shape: []int{3, -2}}}, `field "x": dimension 1 is -2, want >= 0`},
		{collate.Schema{{Name: "tokens", DType: collate.Int32, Shape: []int{collate.Dynamic}, MaxLen: 128}}, ""},
		{collate.Schema{{Name: "tokens", DType: collate.Int32, Shape: []int{collate.Dynamic}}}, `field "tokens": a Dynamic first dimension needs MaxLen > 0, got 0`},
		{collate.Schema{{Name: "x", DType: collate.Int32, Shape: []int{4}, MaxLen: 9}}, `field "x": MaxLen and Pad are for a Dynamic first dimension`},
		{collate.Schema{{Name: "x", DType: collate.Float32, Shape: []int{1 << 30, 1 << 30}}}, `field "x": shape [1073741824 1073741824] is larger than`},
	} {
		err := tc.s.Validate()
		if tc.want == "" {
			assert.NoError(t, err)
			continue
		}
		assert.ErrorIs(t, err, collate.ErrSchema)
		assert.ErrorContains(t, err, tc.want)
	}
}

func TestAsViewsAndPanicsOnMismatch(t *testing.T) {
	t.Parallel()
	x := []float32{1, 2, 3, 4, 5, 6}
	tn, err := collate.FromSlice(x, 2, 3)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, tn.Shape())
	assert.Equal(t, collate.Float32, tn.DType())
	assert.Len(t, tn.Bytes(), 24)
	v := collate.As[float32](tn)
	v[4] = 50
	assert.Equal(t, float32(50), x[4], "As shares memory")

	assert.PanicsWithValue(t, "collate: As[int64] on a tensor of dtype float32", func() { collate.As[int64](tn) })
	assert.PanicsWithValue(t, "collate: As[bfloat16] on a tensor of dtype float32", func() { collate.As[collate.BF16](tn) })
	assert.PanicsWithValue(t, "collate: As[float32] on a tensor of dtype DType(0)", func() { collate.As[float32](collate.Tensor{}) })

	_, err = collate.FromSlice(x, 4, 2)
	assert.ErrorContains(t, err, "tensor float32[4,2] needs 32 bytes, got 24")
	sh := tn.Shape()
	sh[0] = 99
	assert.Equal(t, 2, tn.Dim(0), "Shape returns a copy")
}

func TestDynamicFieldLayoutAndPad(t *testing.T) {
	t.Parallel()
	f := collate.Field{Name: "frames", DType: collate.Float32, Shape: []int{collate.Dynamic, 3}, MaxLen: 5, Pad: -1}
	assert.True(t, f.IsDynamic())
	assert.Equal(t, 15, f.Elems())
	assert.Equal(t, 12, f.RowBytes())
	assert.Equal(t, []byte{0, 0, 0x80, 0xbf}, f.PadBytes(), "-1 as float32")
	assert.Equal(t, []byte{0x80, 0xbf}, collate.Field{DType: collate.BFloat16, Pad: -1}.PadBytes())
	assert.Equal(t, []byte{0xff, 0xff, 0xff, 0xff}, collate.Field{DType: collate.Int32, Pad: -1}.PadBytes())
	l, err := collate.NewLayout(collate.Schema{f}, 2)
	require.NoError(t, err)
	buf := make([]byte, l.Size())
	assert.Equal(t, []int{5, 3}, l.Sample(buf, 0, 1).Shape())
	assert.Equal(t, []int{2, 3}, l.Rows(buf, 0, 1, 2).Shape())
	assert.Equal(t, []int{2, 5, 3}, l.Batch(buf, 0, 2).Shape())
	assert.Equal(t, []int{2, 4, 3}, l.Padded(buf, 0, 2, 4).Shape())
	assert.PanicsWithValue(t, `collate: As[int32] on field "frames" of dtype float32`, func() { collate.As[int32](l.Sample(buf, 0, 0)) })
}

// A full batch's view shares its shape with every other (no allocation a
// call: a BatchFiller asks for it every batch); a shorter one gets its
// own; neither can change the other through Shape.
func TestLayoutBatchShapes(t *testing.T) {
	s := collate.Schema{
		{Name: "tokens", DType: collate.Uint16, Shape: []int{5}},
		{Name: "frames", DType: collate.Float32, Shape: []int{-1, 3}, MaxLen: 4},
	}
	l, err := collate.NewLayout(s, 8)
	require.NoError(t, err)
	buf := make([]byte, l.Size())
	assert.Zero(t, testing.AllocsPerRun(100, func() { l.Batch(buf, 0, 8) }), "a full batch's view")
	assert.Equal(t, []int{8, 5}, l.Batch(buf, 0, 8).Shape())
	assert.Equal(t, []int{8, 4, 3}, l.Batch(buf, 1, 8).Shape())
	assert.Equal(t, []int{3, 5}, l.Batch(buf, 0, 3).Shape())
	l.Batch(buf, 0, 8).Shape()[0] = 99 // a copy
	assert.Equal(t, 8, l.Batch(buf, 0, 8).Dim(0))
}

func TestLayoutAlignsEveryField(t *testing.T) {
	t.Parallel()
	s := collate.Schema{
		{Name: "a", DType: collate.Uint8, Shape: []int{3}},
		{Name: "b", DType: collate.Float64, Shape: []int{5}},
		{Name: "c", DType: collate.Int64},
	}
	l, err := collate.NewLayout(s, 7)
	require.NoError(t, err)
	buf := make([]byte, l.Size())
	end := 0
	for i, f := range s {
		off := l.Offset(i)
		assert.Zero(t, off%collate.Align, "field %s", f.Name)
		assert.GreaterOrEqual(t, off, end, "fields overlap")
		end = off + 7*f.Bytes()
		bt := l.Batch(buf, i, 7)
		assert.Equal(t, append([]int{7}, f.Shape...), bt.Shape())
		assert.Len(t, bt.Bytes(), 7*f.Bytes())
		// Each sample's view is its own slice of the batch view.
		for pos := range 7 {
			st := l.Sample(buf, i, pos)
			assert.Len(t, st.Bytes(), f.Bytes())
			assert.Equal(t, f.Bytes(), cap(st.Bytes()), "a sample view cannot grow into its neighbour")
		}
	}
	assert.LessOrEqual(t, end, l.Size())

	_, err = collate.NewLayout(s, 0)
	assert.ErrorContains(t, err, "capacity 0")
}

func ExampleAs() {
	pixels := []uint8{0, 128, 255, 64}
	t, _ := collate.FromSlice(pixels, 2, 2)
	fmt.Println(t, collate.As[uint8](t)[2])
	defer func() { fmt.Println(recover()) }()
	collate.As[float32](t)
	// Output:
	// Tensor(uint8[2,2]) 255
	// collate: As[float32] on a tensor of dtype uint8
}
