package collate

import "fmt"

// Align is the byte alignment of every field in a batch buffer: the
// allocation granularity of cudaMalloc and hipMalloc, and a multiple of
// every cache line and SIMD width in use.
const Align = 256

// Layout places the fields of up to Cap samples in one buffer: field i
// occupies Cap×Field.Bytes() bytes from an Align-aligned offset, so a whole
// batch is one allocation and one host-to-device copy. A field with a 0
// dimension occupies no bytes; its views are empty.
type Layout struct {
	schema  Schema
	cap     int
	offsets []int
	shapes  [][]int // per-sample shapes, MaxLen rows for a Dynamic field
	full    [][]int // the shapes of a batch of Cap samples: [Cap, shapes[i]...]
	size    int
}

// NewLayout returns the layout of batches of up to capacity samples of s.
func NewLayout(s Schema, capacity int) (*Layout, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if capacity <= 0 {
		return nil, fmt.Errorf("collate: layout capacity %d, want > 0", capacity)
	}
	l := &Layout{schema: s, cap: capacity, offsets: make([]int, len(s)), shapes: make([][]int, len(s)), full: make([][]int, len(s))}
	for i, f := range s {
		l.offsets[i] = l.size
		l.shapes[i] = f.Shape
		if f.IsDynamic() {
			l.shapes[i] = append([]int{f.MaxLen}, f.Shape[1:]...)
		}
		l.full[i] = append([]int{capacity}, l.shapes[i]...)
		n := f.Bytes()
		if n > 0 && capacity > maxSampleBytes/n {
			return nil, fmt.Errorf("collate: field %q: %d samples of %d bytes is too large", f.Name, capacity, n)
		}
		l.size += (n*capacity + Align - 1) &^ (Align - 1)
	}
	// A field with a 0 dimension takes no bytes; a buffer of only such
	// fields still takes Align bytes, since memory of 0 bytes cannot be
	// allocated (pinned or on a device).
	l.size = max(l.size, Align)
	return l, nil
}

// Schema returns the layout's schema.
func (l *Layout) Schema() Schema { return l.schema }

// Cap returns the number of samples the layout holds.
func (l *Layout) Cap() int { return l.cap }

// Size returns the bytes of a buffer that holds the layout; at least Align,
// even when every field is empty.
func (l *Layout) Size() int { return l.size }

// Offset returns the byte offset of field i.
func (l *Layout) Offset(i int) int { return l.offsets[i] }

// Sample returns the view of field i of sample pos in buf (MaxLen rows for
// a Dynamic field).
func (l *Layout) Sample(buf []byte, i, pos int) Tensor {
	f := l.schema[i]
	n := f.Bytes()
	off := l.offsets[i] + pos*n
	return view(f.Name, f.DType, l.shapes[i], buf[off:off+n:off+n])
}

// Rows returns the view of the first rows rows of a Dynamic field i of
// sample pos in buf.
func (l *Layout) Rows(buf []byte, i, pos, rows int) Tensor {
	f := l.schema[i]
	off := l.offsets[i] + pos*f.Bytes()
	end := off + rows*f.RowBytes()
	return view(f.Name, f.DType, append([]int{rows}, f.Shape[1:]...), buf[off:end:end])
}

// Batch returns the view of field i of the first n samples in buf, with
// shape [n, field shape...].
func (l *Layout) Batch(buf []byte, i, n int) Tensor {
	f := l.schema[i]
	off := l.offsets[i]
	end := off + n*f.Bytes()
	shape := l.full[i] // shared, as views share shapes: no allocation a call
	if n != l.cap {
		shape = append([]int{n}, l.shapes[i]...)
	}
	return view(f.Name, f.DType, shape, buf[off:end:end])
}

// Padded returns the view of a Dynamic field i of n samples in buf after
// PadStack to longest rows: shape [n, longest, row shape...].
func (l *Layout) Padded(buf []byte, i, n, longest int) Tensor {
	f := l.schema[i]
	off := l.offsets[i]
	end := off + n*longest*f.RowBytes()
	return view(f.Name, f.DType, append([]int{n, longest}, f.Shape[1:]...), buf[off:end:end])
}

// FieldBytes returns the whole region of field i in buf: Cap samples.
func (l *Layout) FieldBytes(buf []byte, i int) []byte {
	off := l.offsets[i]
	end := off + l.cap*l.schema[i].Bytes()
	return buf[off:end:end]
}
