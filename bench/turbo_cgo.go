//go:build cgo && !windows

package main

/*
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include <string.h>
#include "tb_turbo.h"
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"image/jpeg"
	"runtime"
	"unsafe"
)

// turbo is TurboJPEG's full decode, the per-core baseline.
type turbo struct {
	t        *turboJPEG
	maxBytes int // the largest RGB image of the blobs
}

// openTurbo loads TurboJPEG to decode blobs: into one buffer that fits the
// largest, kept from call to call as a decoder's would be (a new 256 MB
// buffer a call, as the first version had, made each block of images pay
// its page faults: a quarter of the rate).
func openTurbo(blobs [][]byte) (*turbo, error) {
	t, err := openTurboJPEG("libturbojpeg.so.0")
	if err != nil {
		return nil, err
	}
	tb := &turbo{t: t, maxBytes: 1 << 20}
	for _, b := range blobs {
		if c, err := jpeg.DecodeConfig(bytes.NewReader(b)); err == nil {
			tb.maxBytes = max(tb.maxBytes, 3*c.Width*c.Height)
		}
	}
	return tb, nil
}

// decode decodes every blob once, in one C call.
func (t *turbo) decode(blobs [][]byte) error {
	_, err := t.t.DecodeAll(blobs, 1, t.maxBytes)
	return err
}

func (t *turbo) close() { t.t.Close() }

// turboJPEG is TurboJPEG's API (libturbojpeg.so.0) loaded at run time:
// the full decode the bench compares against.
type turboJPEG struct {
	t   *C.tb_turbo
	dst unsafe.Pointer // the decodes' output, kept from call to call
	cap int
}

// openTurboJPEG loads TurboJPEG from path.
func openTurboJPEG(path string) (*turboJPEG, error) {
	t := (*C.tb_turbo)(C.calloc(1, C.size_t(unsafe.Sizeof(C.tb_turbo{}))))
	if t == nil {
		return nil, errors.New("turbojpeg: out of memory")
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	if C.tb_turbo_open(t, cpath, &msg[0], C.size_t(len(msg))) != 0 {
		C.free(unsafe.Pointer(t))
		return nil, fmt.Errorf("turbojpeg: %s", C.GoString(&msg[0]))
	}
	return &turboJPEG{t: t}, nil
}

// Close unloads the library.
func (t *turboJPEG) Close() {
	if t.t != nil {
		C.tb_turbo_close(t.t)
		C.free(unsafe.Pointer(t.t))
		t.t = nil
	}
	C.free(t.dst)
	t.dst, t.cap = nil, 0
}

// DecodeAll decodes every JPEG of images to RGB rounds times, in one C
// call (tjDecompress2, default flags), into scratch of maxBytes that is
// kept for the next call. It returns the images decoded.
func (t *turboJPEG) DecodeAll(images [][]byte, rounds, maxBytes int) (int, error) {
	if len(images) == 0 || rounds <= 0 {
		return 0, nil
	}
	// The pointers to the images live in C memory, as uintptrs: a store of
	// a Go pointer type there would run the GC's write barrier over
	// whatever the memory held before. The images are pinned for the call.
	ptrs := (*[1 << 30]uintptr)(C.calloc(C.size_t(len(images)), C.size_t(unsafe.Sizeof(uintptr(0)))))[:len(images):len(images)]
	defer C.free(unsafe.Pointer(&ptrs[0]))
	sizes := make([]C.size_t, len(images))
	var pin runtime.Pinner
	defer pin.Unpin()
	for i, b := range images {
		if len(b) == 0 {
			return 0, fmt.Errorf("turbojpeg: image %d is empty", i)
		}
		pin.Pin(&b[0])
		ptrs[i] = uintptr(unsafe.Pointer(&b[0]))
		sizes[i] = C.size_t(len(b))
	}
	if maxBytes > t.cap {
		// A new buffer is written once here, so that its page faults are
		// not counted as decoding: a decoder writes into memory it reuses.
		C.free(t.dst)
		t.dst, t.cap = C.malloc(C.size_t(maxBytes)), 0
		if t.dst == nil {
			return 0, errors.New("turbojpeg: out of memory")
		}
		C.memset(t.dst, 0, C.size_t(maxBytes))
		t.cap = maxBytes
	}
	dst := t.dst
	var msg [512]C.char
	n := C.tb_turbo_decode_all(t.t, (**C.uint8_t)(unsafe.Pointer(&ptrs[0])), &sizes[0], C.size_t(len(images)), C.int(rounds), (*C.uint8_t)(dst), C.size_t(maxBytes), &msg[0], C.size_t(len(msg)))
	if n < 0 {
		return 0, fmt.Errorf("turbojpeg: %s", C.GoString(&msg[0]))
	}
	return int(n), nil
}
