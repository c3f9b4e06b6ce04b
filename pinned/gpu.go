package pinned

import (
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

// GPU is the backend of a CUDA or HIP device: host buffers from
// cudaHostAlloc / hipHostMalloc (portable), device buffers from cudaMalloc /
// hipMalloc, copies on non-blocking streams, completion by events.
type GPU struct {
	rt     *csrc.Runtime
	device int
}

// Name returns "cuda" or "hip".
func (g *GPU) Name() string { return g.rt.Kind().String() }

// Device returns the device ordinal.
func (g *GPU) Device() int { return g.device }

// Runtime returns the loaded runtime, for calls this package does not wrap.
func (g *GPU) Runtime() *Runtime { return g.rt }

// on runs f on a locked OS thread whose current device is g's: CUDA and HIP
// keep the current device per thread, and goroutines move between threads.
func (g *GPU) on(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := g.rt.SetDevice(g.device); err != nil {
		return err
	}
	return f()
}

// HostAlloc returns n bytes of pinned, portable host memory.
func (g *GPU) HostAlloc(n int) ([]byte, error) { return g.hostAlloc(n, csrc.HostPortable) }

// HostAllocWriteCombined returns n bytes of pinned, portable,
// write-combined host memory: faster for the device to read, slow for the
// CPU to read, so for buffers the host only writes (with streaming stores).
func (g *GPU) HostAllocWriteCombined(n int) ([]byte, error) {
	return g.hostAlloc(n, csrc.HostPortable|csrc.HostWriteCombined)
}

func (g *GPU) hostAlloc(n int, flags uint) (b []byte, err error) {
	if n <= 0 {
		return nil, fmt.Errorf("pinned: host alloc of %d bytes", n)
	}
	err = g.on(func() error {
		b, err = g.rt.HostAlloc(n, flags)
		return err
	})
	return b, err
}

// HostFree frees memory from HostAlloc.
func (g *GPU) HostFree(b []byte) error { return g.rt.HostFree(b) }

// Malloc returns n bytes of device memory.
func (g *GPU) Malloc(n int) (p DevicePtr, err error) {
	err = g.on(func() error {
		p, err = g.rt.Malloc(n)
		return err
	})
	return p, err
}

// Free frees device memory.
func (g *GPU) Free(p DevicePtr) error { return g.rt.Free(p) }

// NewStream returns a non-blocking stream on the device.
func (g *GPU) NewStream() (s Stream, err error) {
	err = g.on(func() error {
		s, err = g.rt.StreamCreate()
		return err
	})
	return s, err
}

// DestroyStream destroys a stream from NewStream once its work is done.
func (g *GPU) DestroyStream(s Stream) error { return g.rt.StreamDestroy(s) }

// NewEvent returns an event on the device, with timing disabled.
func (g *GPU) NewEvent() (e Event, err error) {
	err = g.on(func() error {
		e, err = g.rt.EventCreate()
		return err
	})
	return e, err
}

// The types of the GPU runtime binding (the module's internal C core),
// named here so that code outside the module can hold them.
type (
	// Runtime is a loaded CUDA or HIP runtime library (GPU.Runtime), for
	// the calls this package does not wrap. Its methods mirror the
	// runtime's: DeviceCount, SetDevice, HostAlloc, HostFree, Malloc, Free,
	// DeviceSynchronize, StreamCreate (non-blocking),
	// StreamCreateWithFlags, StreamDestroy, StreamSynchronize,
	// StreamWaitEvent, EventCreate (timing disabled), EventDestroy,
	// EventRecord, EventQuery, EventSynchronize, CopyToDeviceAsync,
	// CopyToHostAsync, CopyToHost and CopyToDevice; plus Kind, Path and
	// Close. Device calls act on the device current on the calling OS
	// thread (lock it, and SetDevice, for a device other than 0). Host
	// memory given to an asynchronous copy must come from HostAlloc. A
	// failed call returns a *RuntimeError.
	Runtime = csrc.Runtime

	// RuntimeError is a status a runtime call returned. Its fields: Kind
	// (prints as cuda or hip), Call (the runtime function, e.g.
	// "cudaMemcpyAsync"), Code (the runtime's status code), Name (e.g.
	// "cudaErrorInvalidValue") and Message (the runtime's description).
	// errors.As(err, &re) with re a *RuntimeError finds it in the errors
	// of this package and of the engine; errors.Is(err, ErrNoDevice)
	// matches the codes that mean no usable GPU.
	RuntimeError = csrc.Error

	DevicePtr = csrc.DevicePtr // device memory: cudaMalloc's / hipMalloc's pointer
	Stream    = csrc.Stream    // cudaStream_t / hipStream_t
	Event     = csrc.Event     // cudaEvent_t / hipEvent_t
)

// LegacyStream is the legacy default stream (stream 0) of the current
// device: work recorded on it runs after the work already queued on every
// blocking stream of the device. Code built with per-thread default streams
// (nvcc --default-stream per-thread) must name its streams instead.
const LegacyStream Stream = 0

// Upload queues the copy of host buffer src into device buffer dst on
// stream s, with the device current on the calling OS thread. s first waits
// (on the device, not the host) for the uses of dst recorded by RecordUse;
// after the copy, the events of both buffers are recorded, so their fences
// are done once the copy is.
func (g *GPU) Upload(dst, src *Buffer, s Stream) error {
	return g.on(func() error {
		for _, e := range dst.useEvents[:dst.used] {
			if err := g.rt.StreamWaitEvent(s, e); err != nil {
				return err
			}
		}
		dst.used = 0
		if err := g.rt.CopyToDeviceAsync(dst.Device(), src.Bytes(), s); err != nil {
			return err
		}
		return errors.Join(g.rt.EventRecord(src.Event(), s), g.rt.EventRecord(dst.Event(), s))
	})
}

// RecordUse records that the work queued so far on streams reads device
// buffer b, as PyTorch's Tensor.record_stream does: the next Upload into b
// waits for that work on its copy stream. Each distinct stream gets one of
// b's use events, made at the first need and kept for reuse.
func (g *GPU) RecordUse(b *Buffer, streams ...Stream) error {
	slices.Sort(streams)
	streams = slices.Compact(streams)
	return g.on(func() error {
		b.used = 0
		for len(b.useEvents) < len(streams) {
			e, err := g.rt.EventCreate()
			if err != nil {
				return err
			}
			b.useEvents = append(b.useEvents, e)
		}
		for i, s := range streams {
			if err := g.rt.EventRecord(b.useEvents[i], s); err != nil {
				return err
			}
			b.used = i + 1
		}
		return nil
	})
}

// WaitEvent blocks the host until e's last recorded work has completed.
func (g *GPU) WaitEvent(e Event) error { return g.rt.EventSynchronize(e) }

// Fence returns a Fence that is done when e's last recorded work is.
func (g *GPU) Fence(e Event) Fence { return eventFence{g.rt, e} }

type eventFence struct {
	rt *csrc.Runtime
	e  csrc.Event
}

func (f eventFence) Done() (bool, error) { return f.rt.EventQuery(f.e) }

// probe checks that the device works end to end: every kind of allocation
// and handle the loader uses, created and destroyed once.
func (g *GPU) probe() error {
	h, err := g.HostAlloc(4096)
	if err != nil {
		return err
	}
	if err := g.HostFree(h); err != nil {
		return err
	}
	d, err := g.Malloc(4096)
	if err != nil {
		return err
	}
	if err := g.Free(d); err != nil {
		return err
	}
	s, err := g.NewStream()
	if err != nil {
		return err
	}
	if err := g.rt.StreamDestroy(s); err != nil {
		return err
	}
	e, err := g.NewEvent()
	if err != nil {
		return err
	}
	return g.rt.EventDestroy(e)
}
