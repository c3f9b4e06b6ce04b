package collate

import "fmt"

// DType is the element type of a tensor.
type DType uint8

// The element types. The zero DType is invalid, so a Field whose DType was
// left unset is caught by Schema.Validate.
const (
	Uint8 DType = iota + 1
	Int32
	Int64
	Float16
	BFloat16
	Float32
	Float64
)

var dtypeInfo = [...]struct {
	name string
	size int
}{
	Uint8:    {"uint8", 1},
	Int32:    {"int32", 4},
	Int64:    {"int64", 8},
	Float16:  {"float16", 2},
	BFloat16: {"bfloat16", 2},
	Float32:  {"float32", 4},
	Float64:  {"float64", 8},
}

// Valid reports whether d is one of the defined element types.
func (d DType) Valid() bool { return d >= Uint8 && int(d) < len(dtypeInfo) }

// Size returns the size of one element in bytes, or 0 for an invalid DType.
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeInfo[d].size
}

// String returns the PyTorch-style name of d ("float32", "bfloat16", ...).
func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("DType(%d)", uint8(d))
	}
	return dtypeInfo[d].name
}

// F16 is an IEEE 754 half-precision value, stored as its bit pattern.
type F16 uint16

// BF16 is a bfloat16 value (the top 16 bits of a float32), stored as its
// bit pattern.
type BF16 uint16

// Element is the set of Go types that view tensor elements, one per DType.
type Element interface {
	uint8 | int32 | int64 | F16 | BF16 | float32 | float64
}

// DTypeOf returns the DType whose elements are viewed as T.
func DTypeOf[T Element]() DType {
	var z T
	switch any(z).(type) {
	case uint8:
		return Uint8
	case int32:
		return Int32
	case int64:
		return Int64
	case F16:
		return Float16
	case BF16:
		return BFloat16
	case float32:
		return Float32
	default: // float64: Element admits nothing else
		return Float64
	}
}
