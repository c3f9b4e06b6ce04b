//go:build !cgo

package csrc

import "fmt"

// Cgo reports whether the C core is in this binary: false here, a
// CGO_ENABLED=0 build. Open fails with ErrNoCgo, so no Runtime exists and
// its methods are never reached; the kernels panic, and package collate
// runs only its Go paths.
const Cgo = false

// Runtime is an open GPU runtime library; without cgo there is none.
type Runtime struct {
	kind Kind
	path string
}

// Open fails: a binary without cgo loads no library.
func Open(kind Kind, path string) (*Runtime, error) {
	return nil, fmt.Errorf("csrc: open %s runtime: %s: %w", kind, path, ErrNoCgo)
}

func (r *Runtime) Close()                                            {}
func (r *Runtime) Kind() Kind                                        { return r.kind }
func (r *Runtime) Path() string                                      { return r.path }
func (r *Runtime) DeviceCount() (int, error)                         { return 0, ErrNoCgo }
func (r *Runtime) SetDevice(int) error                               { return ErrNoCgo }
func (r *Runtime) HostAlloc(int, uint) ([]byte, error)               { return nil, ErrNoCgo }
func (r *Runtime) HostFree([]byte) error                             { return ErrNoCgo }
func (r *Runtime) Malloc(int) (DevicePtr, error)                     { return 0, ErrNoCgo }
func (r *Runtime) Free(DevicePtr) error                              { return ErrNoCgo }
func (r *Runtime) DeviceSynchronize() error                          { return ErrNoCgo }
func (r *Runtime) StreamCreate() (Stream, error)                     { return 0, ErrNoCgo }
func (r *Runtime) StreamCreateWithFlags(uint) (Stream, error)        { return 0, ErrNoCgo }
func (r *Runtime) StreamDestroy(Stream) error                        { return ErrNoCgo }
func (r *Runtime) StreamSynchronize(Stream) error                    { return ErrNoCgo }
func (r *Runtime) StreamWaitEvent(Stream, Event) error               { return ErrNoCgo }
func (r *Runtime) EventCreate() (Event, error)                       { return 0, ErrNoCgo }
func (r *Runtime) EventDestroy(Event) error                          { return ErrNoCgo }
func (r *Runtime) EventRecord(Event, Stream) error                   { return ErrNoCgo }
func (r *Runtime) EventQuery(Event) (bool, error)                    { return false, ErrNoCgo }
func (r *Runtime) EventSynchronize(Event) error                      { return ErrNoCgo }
func (r *Runtime) CopyToDeviceAsync(DevicePtr, []byte, Stream) error { return ErrNoCgo }
func (r *Runtime) CopyToHostAsync([]byte, DevicePtr, Stream) error   { return ErrNoCgo }
func (r *Runtime) CopyToHost([]byte, DevicePtr) error                { return ErrNoCgo }
func (r *Runtime) CopyToDevice(DevicePtr, []byte) error              { return ErrNoCgo }

// The C kernels are not in this binary; package collate never calls them
// here (collate.Paths offers only the go path).

func noC(name string) {
	panic("csrc: " + name + ": " + ErrNoCgo.Error() + ": the C kernels are not in this binary")
}

func Gather(Kernels, []byte, []byte, []int64, int, bool)                       { noC("Gather") }
func U8HWCToF32CHW(Kernels, []float32, []byte, int, int, []float32, []float32) { noC("U8HWCToF32CHW") }
func F32ToF16(Kernels, []uint16, []float32)                                    { noC("F32ToF16") }
func F16ToF32(Kernels, []float32, []uint16)                                    { noC("F16ToF32") }
func F32ToBF16(Kernels, []uint16, []float32)                                   { noC("F32ToBF16") }
func BF16ToF32(Kernels, []float32, []uint16)                                   { noC("BF16ToF32") }
func PadStack([]byte, []int64, int, int, int, []byte)                          { noC("PadStack") }
func PhiloxFill(Kernels, []float32, uint64, uint64, uint64, bool)              { noC("PhiloxFill") }

// No image kernels either: OpenJPEG and NewImageDecoder fail with ErrNoCgo,
// so no JPEGLib or ImageDecoder exists and their methods are never reached.

// JPEGLib is libjpeg loaded at run time; without cgo there is none.
type JPEGLib struct{ path string }

// OpenJPEG fails: a binary without cgo loads no library.
func OpenJPEG(path string) (*JPEGLib, error) {
	return nil, fmt.Errorf("csrc: open libjpeg: %s: %w", path, ErrNoCgo)
}

func (l *JPEGLib) Path() string { return l.path }
func (l *JPEGLib) Close()       {}

// ImageDecoder is per-worker state of the image kernels; without cgo there
// is none.
type ImageDecoder struct{}

// NewImageDecoder fails: the image kernels are not in this binary.
func NewImageDecoder(*JPEGLib) (*ImageDecoder, error) {
	return nil, fmt.Errorf("csrc: image decoder: %w", ErrNoCgo)
}

func (d *ImageDecoder) Close() {}
func (d *ImageDecoder) JPEGResample(Kernels, []byte, JPEGRequest, *Plan, []byte) error {
	return ErrNoCgo
}
func (d *ImageDecoder) JPEGRegion([]byte, JPEGRequest, int, int, int, int, []byte, int) error {
	return ErrNoCgo
}
func (d *ImageDecoder) Resample(Kernels, *Plan, []byte, int, []byte) error { return ErrNoCgo }

// JPEGEncoder needs cgo.
type JPEGEncoder struct{}

// OpenJPEGEncoder needs cgo.
func OpenJPEGEncoder(string) (*JPEGEncoder, error) { return nil, ErrNoCgo }

func (e *JPEGEncoder) Encode(dst, rgb []byte, w, h, q int) ([]byte, error) { return nil, ErrNoCgo }
func (e *JPEGEncoder) Close()                                              {}
