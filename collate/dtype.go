package collate

import (
	"fmt"
	"strings"
)

// DType is the element type of a tensor.
type DType uint8

// The element types. The zero DType is invalid, so a Field whose DType was
// left unset is caught by Schema.Validate. New types are added at the end:
// the numeric values never change, so they may be persisted.
const (
	Uint8 DType = iota + 1
	Int32
	Int64
	Float16
	BFloat16
	Float32
	Float64
	Int8
	Int16
	Uint16
	Uint32
	// Bool is PyTorch's torch.bool: one byte a value, viewed as Go's bool,
	// so every byte of a Bool tensor must be 0 or 1 (Fill must not write
	// anything else into one; the loader zeroes samples and pads with 0 or 1).
	Bool
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
	Int8:     {"int8", 1},
	Int16:    {"int16", 2},
	Uint16:   {"uint16", 2},
	Uint32:   {"uint32", 4},
	Bool:     {"bool", 1},
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

// Element is the set of Go types that view tensor elements, one per DType:
// uint8, int32, int64, F16, BF16, float32, float64, int8, int16, uint16,
// uint32 and bool, in DType order.
type Element interface {
	uint8 | int32 | int64 | F16 | BF16 | float32 | float64 | int8 | int16 | uint16 | uint32 | bool
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
	case int8:
		return Int8
	case int16:
		return Int16
	case uint16:
		return Uint16
	case uint32:
		return Uint32
	case bool:
		return Bool
	default: // float64: Element admits nothing else
		return Float64
	}
}

// dtypeNames lists the valid DTypes' names, for messages.
func dtypeNames() string {
	var b strings.Builder
	for d := Uint8; d.Valid(); d++ {
		if d > Uint8 {
			b.WriteString(", ")
		}
		b.WriteString(d.String())
	}
	return b.String()
}
