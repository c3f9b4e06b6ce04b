package collate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Dynamic, as a Field's first dimension, makes the field variable-length:
// each sample has up to MaxLen rows, and a batch is padded with Pad to its
// longest sample.
const Dynamic = -1

// Field describes one named tensor of a sample.
type Field struct {
	Name  string
	DType DType
	Shape []int // per-sample shape; nil or empty is a scalar; Shape[0] may be Dynamic; a dimension may be 0

	MaxLen int     // the most rows a sample of a Dynamic field has
	Pad    float64 // the value a Dynamic field is padded with, in DType
}

// IsDynamic reports whether f's first dimension is Dynamic.
func (f Field) IsDynamic() bool { return len(f.Shape) > 0 && f.Shape[0] == Dynamic }

// RowBytes returns the bytes of one row: the elements after the first
// dimension (for a scalar, the element).
func (f Field) RowBytes() int {
	n := f.DType.Size()
	if len(f.Shape) > 0 {
		for _, d := range f.Shape[1:] {
			n *= d
		}
	}
	return n
}

// Elems returns the number of elements of one sample of f; MaxLen rows for
// a Dynamic field.
func (f Field) Elems() int {
	n := 1
	for i, d := range f.Shape {
		if i == 0 && d == Dynamic {
			d = f.MaxLen
		}
		n *= d
	}
	return n
}

// PadBytes returns f.Pad encoded as one element of f.DType: converted as
// Go converts a float64 to the integer type, rounded to nearest even for
// the float types, and 1 for a non-zero Pad of a Bool field.
func (f Field) PadBytes() []byte {
	b := make([]byte, f.DType.Size())
	var u uint64
	switch f.DType {
	case Uint8:
		u = uint64(uint8(f.Pad))
	case Int32:
		u = uint64(uint32(int32(f.Pad)))
	case Int64:
		u = uint64(int64(f.Pad))
	case Float16:
		u = uint64(f32ToF16(float32(f.Pad)))
	case BFloat16:
		u = uint64(f32ToBF16(float32(f.Pad)))
	case Float32:
		u = uint64(math.Float32bits(float32(f.Pad)))
	case Float64:
		u = math.Float64bits(f.Pad)
	case Int8:
		u = uint64(uint8(int8(f.Pad)))
	case Int16:
		u = uint64(uint16(int16(f.Pad)))
	case Uint16:
		u = uint64(uint16(f.Pad))
	case Uint32:
		u = uint64(uint32(f.Pad))
	case Bool:
		if f.Pad != 0 {
			u = 1
		}
	}
	for i := range b {
		b[i] = byte(u >> (8 * i))
	}
	return b
}

// Bytes returns the size in bytes of one sample of f.
func (f Field) Bytes() int { return f.Elems() * f.DType.Size() }

func (f Field) String() string {
	return fmt.Sprintf("%s %s%v", f.Name, f.DType, shapeString(f.Shape))
}

// Schema is the list of fields every sample of a dataset has.
type Schema []Field

// ErrSchema is wrapped by every error of Schema.Validate.
var ErrSchema = errors.New("collate: invalid schema")

// maxSampleBytes bounds one sample, so that offset arithmetic cannot overflow.
const maxSampleBytes = 1 << 40

// Validate checks that s has at least one field, that names are non-empty
// and unique, that every DType is valid and every dimension >= 0. A
// dimension may be 0, as in torch.zeros(3, 0): the field then holds no
// elements and takes no bytes (a Dynamic first dimension still needs
// MaxLen > 0). The error names the field at fault.
func (s Schema) Validate() error {
	if len(s) == 0 {
		return fmt.Errorf("%w: no fields", ErrSchema)
	}
	seen := make(map[string]int, len(s))
	for i, f := range s {
		switch {
		case f.Name == "":
			return fmt.Errorf("%w: field %d has an empty name", ErrSchema, i)
		case !f.DType.Valid():
			return fmt.Errorf("%w: field %q has invalid dtype %v (want one of %s)", ErrSchema, f.Name, f.DType, dtypeNames())
		}
		if j, dup := seen[f.Name]; dup {
			return fmt.Errorf("%w: fields %d and %d are both named %q", ErrSchema, j, i, f.Name)
		}
		seen[f.Name] = i
		switch {
		case f.IsDynamic() && f.MaxLen <= 0:
			return fmt.Errorf("%w: field %q: a Dynamic first dimension needs MaxLen > 0, got %d", ErrSchema, f.Name, f.MaxLen)
		case !f.IsDynamic() && (f.MaxLen != 0 || f.Pad != 0):
			return fmt.Errorf("%w: field %q: MaxLen and Pad are for a Dynamic first dimension", ErrSchema, f.Name)
		}
		// bytes is the product of the non-zero dimensions: bounded even for
		// a field that holds nothing, so no product of its dimensions, in
		// any order, overflows.
		bytes, empty := f.DType.Size(), false
		for k, d := range f.Shape {
			if k == 0 && d == Dynamic {
				d = f.MaxLen
			}
			if d == Dynamic {
				return fmt.Errorf("%w: field %q: only the first dimension may be Dynamic", ErrSchema, f.Name)
			}
			if d < 0 {
				return fmt.Errorf("%w: field %q: dimension %d is %d, want >= 0", ErrSchema, f.Name, k, d)
			}
			if d == 0 {
				empty = true
				continue
			}
			if bytes > maxSampleBytes/d {
				if empty || slices.Contains(f.Shape[k:], 0) {
					return fmt.Errorf("%w: field %q: shape %v: its non-zero dimensions multiply to more than %d bytes", ErrSchema, f.Name, f.Shape, maxSampleBytes)
				}
				return fmt.Errorf("%w: field %q: shape %v is larger than %d bytes a sample", ErrSchema, f.Name, f.Shape, maxSampleBytes)
			}
			bytes *= d
		}
	}
	return nil
}

// Index returns the position of the field named name, or -1.
func (s Schema) Index(name string) int {
	for i, f := range s {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// Names returns the field names, in order.
func (s Schema) Names() []string {
	names := make([]string, len(s))
	for i, f := range s {
		names[i] = f.Name
	}
	return names
}

func shapeString(shape []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}
