package collate

import (
	"fmt"
	"slices"
	"unsafe"
)

// Tensor is a dense, row-major view of elements of one DType. It does not
// own its memory. The zero Tensor is empty and has no DType.
type Tensor struct {
	dtype DType
	shape []int // never modified: views share it
	data  []byte
	name  string // the field a view was taken of, for messages
	lease *Lease // nil, or the lease its memory is read under (Leased)
}

// MakeTensor returns a view of data as a tensor of the given dtype and shape.
// len(data) must be exactly the size the shape implies.
func MakeTensor(dtype DType, shape []int, data []byte) (Tensor, error) {
	f := Field{Name: "tensor", DType: dtype, Shape: shape}
	if err := (Schema{f}).Validate(); err != nil {
		return Tensor{}, err
	}
	if len(data) != f.Bytes() {
		return Tensor{}, fmt.Errorf("collate: tensor %s%s needs %d bytes, got %d", dtype, shapeString(shape), f.Bytes(), len(data))
	}
	return Tensor{dtype: dtype, shape: slices.Clone(shape), data: data}, nil
}

// FromSlice returns a tensor view of s with the given shape (a vector of
// len(s) when shape is empty). The tensor shares s's memory.
func FromSlice[T Element](s []T, shape ...int) (Tensor, error) {
	if len(shape) == 0 {
		shape = []int{len(s)}
	}
	var b []byte
	if len(s) > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
	}
	return MakeTensor(DTypeOf[T](), shape, b)
}

// view builds a tensor of field name without checks; shape is shared.
func view(name string, dtype DType, shape []int, data []byte) Tensor {
	return Tensor{dtype: dtype, shape: shape, data: data, name: name}
}

// DType returns the element type.
func (t Tensor) DType() DType { return t.dtype }

// Shape returns a copy of the tensor's dimensions; empty for a scalar.
func (t Tensor) Shape() []int { return slices.Clone(t.shape) }

// Dim returns dimension i.
func (t Tensor) Dim(i int) int { return t.shape[i] }

// Rank returns the number of dimensions.
func (t Tensor) Rank() int { return len(t.shape) }

// Elems returns the number of elements.
func (t Tensor) Elems() int {
	if s := t.dtype.Size(); s > 0 {
		return len(t.data) / s
	}
	return 0
}

// Bytes returns the tensor's memory. Writing to it writes the tensor.
// It panics when the tensor's lease has ended (see Lease).
func (t Tensor) Bytes() []byte {
	t.lease.check(t.name)
	return t.data
}

func (t Tensor) String() string {
	return fmt.Sprintf("Tensor(%s%s)", t.dtype, shapeString(t.shape))
}

// As returns the elements of t as a []T sharing t's memory. It panics,
// naming both types, when T does not match t's DType, and when t's lease
// has ended (see Lease).
func As[T Element](t Tensor) []T {
	t.lease.check(t.name)
	if want := DTypeOf[T](); want != t.dtype {
		if t.name != "" {
			panic(fmt.Sprintf("collate: As[%s] on field %q of dtype %s", want, t.name, t.dtype))
		}
		panic(fmt.Sprintf("collate: As[%s] on a tensor of dtype %s", want, t.dtype))
	}
	if len(t.data) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&t.data[0])), len(t.data)/t.dtype.Size())
}
