package pinned

import (
	"fmt"
	"runtime"

	"github.com/tensorbatch/tensorbatch/csrc"
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
func (g *GPU) Runtime() *csrc.Runtime { return g.rt }

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
func (g *GPU) Malloc(n int) (p csrc.DevicePtr, err error) {
	err = g.on(func() error {
		p, err = g.rt.Malloc(n)
		return err
	})
	return p, err
}

// Free frees device memory.
func (g *GPU) Free(p csrc.DevicePtr) error { return g.rt.Free(p) }

// NewStream returns a non-blocking stream on the device.
func (g *GPU) NewStream() (s csrc.Stream, err error) {
	err = g.on(func() error {
		s, err = g.rt.StreamCreate()
		return err
	})
	return s, err
}

// NewEvent returns an event on the device, with timing disabled.
func (g *GPU) NewEvent() (e csrc.Event, err error) {
	err = g.on(func() error {
		e, err = g.rt.EventCreate()
		return err
	})
	return e, err
}

// Fence returns a Fence that is done when e's last recorded work is.
func (g *GPU) Fence(e csrc.Event) Fence { return eventFence{g.rt, e} }

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
