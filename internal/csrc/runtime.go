//go:build cgo

package csrc

/*
#cgo CFLAGS: -std=c11 -O2 -D_GNU_SOURCE -Wall
#cgo linux LDFLAGS: -ldl
#include <stdint.h>
#include <stdlib.h>
#include "tb_runtime.h"
#include "tb_kernels.h"

#define P(x) ((void *)(uintptr_t)(x))
static int rt_device_count(tb_runtime *rt, int *n) { return rt->get_device_count(n); }
static int rt_set_device(tb_runtime *rt, int d) { return rt->set_device(d); }
static int rt_device_synchronize(tb_runtime *rt) { return rt->device_synchronize(); }
static int rt_host_alloc(tb_runtime *rt, void **p, size_t n, unsigned flags) { return rt->host_alloc(p, n, flags); }
static int rt_host_free(tb_runtime *rt, uintptr_t p) { return rt->host_free(P(p)); }
static int rt_malloc(tb_runtime *rt, uintptr_t *p, size_t n) {
	void *q = NULL;
	int err = rt->malloc(&q, n);
	*p = (uintptr_t)q;
	return err;
}
static int rt_free(tb_runtime *rt, uintptr_t p) { return rt->free(P(p)); }
static int rt_stream_create(tb_runtime *rt, uintptr_t *s, unsigned flags) {
	tb_stream_t q = NULL;
	int err = rt->stream_create(&q, flags);
	*s = (uintptr_t)q;
	return err;
}
static int rt_stream_destroy(tb_runtime *rt, uintptr_t s) { return rt->stream_destroy(P(s)); }
static int rt_stream_synchronize(tb_runtime *rt, uintptr_t s) { return rt->stream_synchronize(P(s)); }
static int rt_stream_wait_event(tb_runtime *rt, uintptr_t s, uintptr_t e) { return rt->stream_wait_event(P(s), P(e), 0); }
static int rt_event_create(tb_runtime *rt, uintptr_t *e) {
	tb_event_t q = NULL;
	int err = rt->event_create(&q, TB_EVENT_DISABLE_TIMING);
	*e = (uintptr_t)q;
	return err;
}
static int rt_event_destroy(tb_runtime *rt, uintptr_t e) { return rt->event_destroy(P(e)); }
static int rt_event_record(tb_runtime *rt, uintptr_t e, uintptr_t s) { return rt->event_record(P(e), P(s)); }
static int rt_event_query(tb_runtime *rt, uintptr_t e) { return rt->event_query(P(e)); }
static int rt_event_synchronize(tb_runtime *rt, uintptr_t e) { return rt->event_synchronize(P(e)); }
static int rt_memcpy_async(tb_runtime *rt, uintptr_t dst, uintptr_t src, size_t n, int kind, uintptr_t s) {
	return rt->memcpy_async(P(dst), P(src), n, kind, P(s));
}
static int rt_memcpy(tb_runtime *rt, uintptr_t dst, uintptr_t src, size_t n, int kind) {
	return rt->memcpy(P(dst), P(src), n, kind);
}
static const char *rt_error_name(tb_runtime *rt, int err) { return rt->get_error_name(err); }
static const char *rt_error_string(tb_runtime *rt, int err) { return rt->get_error_string(err); }
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Cgo reports whether the C core is in this binary: true here; false in a
// CGO_ENABLED=0 build, where Open fails with ErrNoCgo, no GPU runtime can
// load, and only the Go kernels run.
const Cgo = true

// The constants of types.go are tb_runtime.h's and tb_kernels.h's: an
// array length below zero, or a non-zero one, fails the build.
var (
	_ [0]int = [CUDA - C.TB_KIND_CUDA]int{}
	_ [0]int = [HIP - C.TB_KIND_HIP]int{}
	_ [0]int = [StreamDefault - C.TB_STREAM_DEFAULT]int{}
	_ [0]int = [StreamNonBlocking - C.TB_STREAM_NON_BLOCKING]int{}
	_ [0]int = [codeInvalidValue - C.TB_ERR_INVALID_VALUE]int{}
	_ [0]int = [codeInsufficientDriver - C.TB_ERR_INSUFFICIENT_DRIVER]int{}
	_ [0]int = [codeNoDevice - C.TB_ERR_NO_DEVICE]int{}
	_ [0]int = [codeInvalidDevice - C.TB_ERR_INVALID_DEVICE]int{}
	_ [0]int = [codeInvalidHandle - C.TB_ERR_INVALID_HANDLE]int{}
	_ [0]int = [codeNotReady - C.TB_ERR_NOT_READY]int{}
	_ [0]int = [HostPortable - C.TB_HOST_ALLOC_PORTABLE]int{}
	_ [0]int = [HostWriteCombined - C.TB_HOST_ALLOC_WRITE_COMBINED]int{}
	_ [0]int = [KernelsScalar - C.TB_PATH_SCALAR]int{}
	_ [0]int = [KernelsAVX2 - C.TB_PATH_AVX2]int{}
	_ [0]int = [KernelsAVX512 - C.TB_PATH_AVX512]int{}
)

// Runtime is an open GPU runtime library.
type Runtime struct {
	rt   *C.tb_runtime // C memory: the table is never moved by the GC
	kind Kind
	path string
}

// Open loads the library at path as a runtime of kind. A library that is
// missing, or lacks one of the entry points, is an error that says which.
func Open(kind Kind, path string) (*Runtime, error) {
	rt := (*C.tb_runtime)(C.calloc(1, C.size_t(unsafe.Sizeof(C.tb_runtime{}))))
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	if C.tb_runtime_open(rt, C.int(kind), cpath, &msg[0], C.size_t(len(msg))) != 0 {
		C.free(unsafe.Pointer(rt))
		return nil, fmt.Errorf("csrc: open %s runtime: %s", kind, C.GoString(&msg[0]))
	}
	return &Runtime{rt: rt, kind: kind, path: path}, nil
}

// Close unloads the library. The Runtime must not be used afterwards.
func (r *Runtime) Close() {
	if r.rt != nil {
		C.tb_runtime_close(r.rt)
		C.free(unsafe.Pointer(r.rt))
		r.rt = nil
	}
}

// Kind returns the runtime's API.
func (r *Runtime) Kind() Kind { return r.kind }

// Path returns the library path it was loaded from.
func (r *Runtime) Path() string { return r.path }

// prefix is the API's symbol prefix.
func (r *Runtime) prefix() string {
	if r.kind == HIP {
		return "hip"
	}
	return "cuda"
}

// check turns a status into an error for call (without the prefix).
func (r *Runtime) check(call string, code C.int) error {
	if code == 0 {
		return nil
	}
	e := &Error{Kind: r.kind, Call: r.prefix() + call, Code: int(code)}
	if r.rt != nil {
		if s := C.rt_error_name(r.rt, code); s != nil {
			e.Name = C.GoString(s)
		}
		if s := C.rt_error_string(r.rt, code); s != nil {
			e.Message = C.GoString(s)
		}
	}
	if n, ok := names[e.Code]; ok {
		if e.Name == "" {
			e.Name = r.prefix() + n[0]
		}
		if e.Message == "" {
			e.Message = n[1]
		}
	}
	return e
}

// DeviceCount returns the number of devices.
func (r *Runtime) DeviceCount() (int, error) {
	var n C.int
	err := r.check("GetDeviceCount", C.rt_device_count(r.rt, &n))
	return int(n), err
}

// SetDevice makes device current for the calling OS thread.
func (r *Runtime) SetDevice(device int) error {
	return r.check("SetDevice", C.rt_set_device(r.rt, C.int(device)))
}

// HostAlloc returns n bytes of page-locked host memory (flags: HostPortable,
// HostWriteCombined).
func (r *Runtime) HostAlloc(n int, flags uint) ([]byte, error) {
	var p unsafe.Pointer
	if err := r.check(hostAllocName(r.kind), C.rt_host_alloc(r.rt, &p, C.size_t(n), C.unsigned(flags))); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func hostAllocName(k Kind) string {
	if k == HIP {
		return "HostMalloc"
	}
	return "HostAlloc"
}

// HostFree frees memory from HostAlloc.
func (r *Runtime) HostFree(b []byte) error {
	return r.check(hostFreeName(r.kind), C.rt_host_free(r.rt, C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(b))))))
}

func hostFreeName(k Kind) string {
	if k == HIP {
		return "HostFree"
	}
	return "FreeHost"
}

// Malloc returns n bytes of device memory.
func (r *Runtime) Malloc(n int) (DevicePtr, error) {
	var p C.uintptr_t
	err := r.check("Malloc", C.rt_malloc(r.rt, &p, C.size_t(n)))
	return DevicePtr(p), err
}

// Free frees device memory.
func (r *Runtime) Free(p DevicePtr) error { return r.check("Free", C.rt_free(r.rt, C.uintptr_t(p))) }

// DeviceSynchronize waits for all work on the current device.
func (r *Runtime) DeviceSynchronize() error {
	return r.check("DeviceSynchronize", C.rt_device_synchronize(r.rt))
}

// StreamCreate returns a new non-blocking stream on the current device.
func (r *Runtime) StreamCreate() (Stream, error) { return r.StreamCreateWithFlags(StreamNonBlocking) }

// StreamCreateWithFlags returns a new stream on the current device (flags:
// StreamDefault, StreamNonBlocking).
func (r *Runtime) StreamCreateWithFlags(flags uint) (Stream, error) {
	var s C.uintptr_t
	err := r.check("StreamCreateWithFlags", C.rt_stream_create(r.rt, &s, C.unsigned(flags)))
	return Stream(s), err
}

// StreamDestroy destroys s once its work is done.
func (r *Runtime) StreamDestroy(s Stream) error {
	return r.check("StreamDestroy", C.rt_stream_destroy(r.rt, C.uintptr_t(s)))
}

// StreamSynchronize waits for all work on s.
func (r *Runtime) StreamSynchronize(s Stream) error {
	return r.check("StreamSynchronize", C.rt_stream_synchronize(r.rt, C.uintptr_t(s)))
}

// StreamWaitEvent makes the work queued on s from now on wait, on the
// device, for the work that e's last record captured; the host does not
// wait. A later record of e does not change what s waits for; an event
// never recorded is no wait. s and e may belong to different devices.
func (r *Runtime) StreamWaitEvent(s Stream, e Event) error {
	return r.check("StreamWaitEvent", C.rt_stream_wait_event(r.rt, C.uintptr_t(s), C.uintptr_t(e)))
}

// EventCreate returns a new event with timing disabled.
func (r *Runtime) EventCreate() (Event, error) {
	var e C.uintptr_t
	err := r.check("EventCreateWithFlags", C.rt_event_create(r.rt, &e))
	return Event(e), err
}

// EventDestroy destroys e.
func (r *Runtime) EventDestroy(e Event) error {
	return r.check("EventDestroy", C.rt_event_destroy(r.rt, C.uintptr_t(e)))
}

// EventRecord records e after the work queued on s so far. e and s must
// belong to the same device; for LegacyStream that is the current device.
func (r *Runtime) EventRecord(e Event, s Stream) error {
	return r.check("EventRecord", C.rt_event_record(r.rt, C.uintptr_t(e), C.uintptr_t(s)))
}

// EventQuery reports whether the work before e's last record has completed.
func (r *Runtime) EventQuery(e Event) (bool, error) {
	code := C.rt_event_query(r.rt, C.uintptr_t(e))
	if code == codeNotReady {
		return false, nil
	}
	return true, r.check("EventQuery", code)
}

// EventSynchronize waits for e.
func (r *Runtime) EventSynchronize(e Event) error {
	return r.check("EventSynchronize", C.rt_event_synchronize(r.rt, C.uintptr_t(e)))
}

// CopyToDeviceAsync queues a copy of src, which must be HostAlloc memory,
// to dst on s.
func (r *Runtime) CopyToDeviceAsync(dst DevicePtr, src []byte, s Stream) error {
	return r.check("MemcpyAsync", C.rt_memcpy_async(r.rt, C.uintptr_t(dst), addr(src), C.size_t(len(src)), C.TB_MEMCPY_HOST_TO_DEVICE, C.uintptr_t(s)))
}

// CopyToHostAsync queues a copy of len(dst) bytes from src to dst, which
// must be HostAlloc memory, on s.
func (r *Runtime) CopyToHostAsync(dst []byte, src DevicePtr, s Stream) error {
	return r.check("MemcpyAsync", C.rt_memcpy_async(r.rt, addr(dst), C.uintptr_t(src), C.size_t(len(dst)), C.TB_MEMCPY_DEVICE_TO_HOST, C.uintptr_t(s)))
}

// CopyToHost copies len(dst) bytes from src to dst and waits for the copy.
func (r *Runtime) CopyToHost(dst []byte, src DevicePtr) error {
	return r.check("Memcpy", C.rt_memcpy(r.rt, addr(dst), C.uintptr_t(src), C.size_t(len(dst)), C.TB_MEMCPY_DEVICE_TO_HOST))
}

// CopyToDevice copies src to dst and waits for the copy.
func (r *Runtime) CopyToDevice(dst DevicePtr, src []byte) error {
	return r.check("Memcpy", C.rt_memcpy(r.rt, C.uintptr_t(dst), addr(src), C.size_t(len(src)), C.TB_MEMCPY_HOST_TO_DEVICE))
}

// addr is the address of b's first byte as an integer, for memory the C
// side may hold on to (runtime memory, never Go memory).
func addr(b []byte) C.uintptr_t { return C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
