package csrc

import (
	"errors"
	"fmt"
)

// The types and constants of this file are the same in every build, with
// or without cgo. Their values are tb_runtime.h's; runtime.go checks that
// at compile time.

// Kind is a GPU runtime API.
type Kind int

// The runtimes.
const (
	CUDA Kind = 1
	HIP  Kind = 2
)

func (k Kind) String() string {
	switch k {
	case CUDA:
		return "cuda"
	case HIP:
		return "hip"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Handles owned by the runtime.
type (
	DevicePtr uintptr // device memory
	Stream    uintptr // a stream; 0 is LegacyStream
	Event     uintptr // an event with timing disabled
)

// LegacyStream is the legacy default stream (stream 0, the NULL stream) of
// the calling OS thread's current device; there is one per device. Work
// queued on it starts after the work already queued on every blocking
// stream of the device, and work queued afterwards on a blocking stream
// starts after it; non-blocking streams do not synchronize with it. Code
// compiled with per-thread default streams (nvcc --default-stream
// per-thread) has its stream 0 mean its thread's default stream, which is a
// blocking stream, so LegacyStream still orders after its work. The table
// loads the plain entry points, so 0 passed here always means the legacy
// stream.
const LegacyStream Stream = 0

// Stream creation flags (StreamCreateWithFlags).
const (
	StreamDefault     = 0x0 // a blocking stream: synchronizes with LegacyStream
	StreamNonBlocking = 0x1 // does not synchronize with LegacyStream
)

// Status codes shared by CUDA and HIP.
const (
	codeInvalidValue       = 1
	codeInsufficientDriver = 35
	codeNoDevice           = 100
	codeInvalidDevice      = 101
	codeInvalidHandle      = 400
	codeNotReady           = 600
)

// Host allocation flags.
const (
	HostPortable      = 0x1
	HostWriteCombined = 0x4
)

// ErrNoDevice is matched (errors.Is) by a runtime error that means there is
// no usable GPU: no device, an invalid device, or no driver.
var ErrNoDevice = errors.New("no GPU device")

// Error is a status a runtime call returned.
type Error struct {
	Kind    Kind
	Call    string // the runtime function, e.g. "cudaMemcpyAsync"
	Code    int
	Name    string // e.g. "cudaErrorInvalidValue"
	Message string // the runtime's description
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s: %s (%d): %s", e.Kind, e.Call, e.Name, e.Code, e.Message)
}

// Is matches ErrNoDevice for the codes that mean no usable GPU.
func (e *Error) Is(target error) bool {
	return target == ErrNoDevice && (e.Code == codeNoDevice || e.Code == codeInvalidDevice || e.Code == codeInsufficientDriver)
}

// names is the Go-side table of the codes tensorbatch acts on, usable
// before a library is loaded and when its own strings are unavailable.
var names = map[int][2]string{
	0:                      {"Success", "no error"},
	codeInvalidValue:       {"ErrorInvalidValue", "invalid argument"},
	2:                      {"ErrorMemoryAllocation", "out of memory"},
	codeInsufficientDriver: {"ErrorInsufficientDriver", "driver version is insufficient for runtime version"},
	codeNoDevice:           {"ErrorNoDevice", "no GPU device is detected"},
	codeInvalidDevice:      {"ErrorInvalidDevice", "invalid device ordinal"},
	codeInvalidHandle:      {"ErrorInvalidResourceHandle", "invalid resource handle"},
	codeNotReady:           {"ErrorNotReady", "device not ready"},
}

// ErrNoCgo is the error of every runtime call in a binary built without
// cgo (CGO_ENABLED=0): no GPU runtime can be loaded there.
var ErrNoCgo = errors.New("built without cgo")
