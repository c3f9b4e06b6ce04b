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

func Gather(Path, []byte, []byte, []int64, int, bool)                       { noC("Gather") }
func U8HWCToF32CHW(Path, []float32, []byte, int, int, []float32, []float32) { noC("U8HWCToF32CHW") }
func F32ToF16(Path, []uint16, []float32)                                    { noC("F32ToF16") }
func F16ToF32(Path, []float32, []uint16)                                    { noC("F16ToF32") }
func F32ToBF16(Path, []uint16, []float32)                                   { noC("F32ToBF16") }
func BF16ToF32(Path, []float32, []uint16)                                   { noC("BF16ToF32") }
func PadStack([]byte, []int64, int, int, int, []byte)                       { noC("PadStack") }
func PhiloxFill(Path, []float32, uint64, uint64, uint64, bool)              { noC("PhiloxFill") }
