package collate

import (
	"errors"
	"fmt"
	"strings"
)

// Field describes one named tensor of a sample.
type Field struct {
	Name  string
	DType DType
	Shape []int // per-sample shape; nil or empty is a scalar
}

// Elems returns the number of elements of one sample of f.
func (f Field) Elems() int {
	n := 1
	for _, d := range f.Shape {
		n *= d
	}
	return n
}

// Bytes returns the size in bytes of one sample of f.
func (f Field) Bytes() int { return f.Elems() * f.DType.Size() }

func (f Field) String() string {
	return fmt.Sprintf("%s %s%v", f.Name, f.DType, shapeString(f.Shape))
}

// Schema is the list of fields every sample of a dataset has.
type Schema []Field

// ErrSchema is wrapped by every error of Schema.Validate.
var ErrSchema = errors.New("invalid schema")

// maxSampleBytes bounds one sample, so that offset arithmetic cannot overflow.
const maxSampleBytes = 1 << 40

// Validate checks that s has at least one field, that names are non-empty
// and unique, that every DType is valid and every dimension positive. The
// error names the field at fault.
func (s Schema) Validate() error {
	if len(s) == 0 {
		return fmt.Errorf("collate: %w: no fields", ErrSchema)
	}
	seen := make(map[string]int, len(s))
	for i, f := range s {
		switch {
		case f.Name == "":
			return fmt.Errorf("collate: %w: field %d has an empty name", ErrSchema, i)
		case !f.DType.Valid():
			return fmt.Errorf("collate: %w: field %q has invalid dtype %v (want one of uint8, int32, int64, float16, bfloat16, float32, float64)", ErrSchema, f.Name, f.DType)
		}
		if j, dup := seen[f.Name]; dup {
			return fmt.Errorf("collate: %w: fields %d and %d are both named %q", ErrSchema, j, i, f.Name)
		}
		seen[f.Name] = i
		bytes := f.DType.Size()
		for k, d := range f.Shape {
			if d <= 0 {
				return fmt.Errorf("collate: %w: field %q: dimension %d is %d, want > 0", ErrSchema, f.Name, k, d)
			}
			if bytes > maxSampleBytes/d {
				return fmt.Errorf("collate: %w: field %q: shape %v is larger than %d bytes a sample", ErrSchema, f.Name, f.Shape, maxSampleBytes)
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
