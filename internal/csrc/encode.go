//go:build cgo

package csrc

/*
#include <stdlib.h>
#include "tb_jpeg_encode.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// JPEGEncoder encodes RGB pixels as JPEGs with TurboJPEG
// (libturbojpeg.so.0), loaded at run time. It is for one goroutine at a
// time: each holds one of its own.
type JPEGEncoder struct {
	lib *C.tb_tj_enc
	h   unsafe.Pointer // tjInitCompress's handle
}

// OpenJPEGEncoder loads TurboJPEG from path (a file name the dynamic
// loader searches for, or a path) and makes an encoder. A missing library
// or symbol is an error.
func OpenJPEGEncoder(path string) (*JPEGEncoder, error) {
	lib := (*C.tb_tj_enc)(C.calloc(1, C.size_t(unsafe.Sizeof(C.tb_tj_enc{}))))
	if lib == nil {
		return nil, errors.New("csrc: out of memory")
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	if C.tb_tj_enc_open(lib, cpath, &msg[0], C.size_t(len(msg))) != 0 {
		C.free(unsafe.Pointer(lib))
		return nil, fmt.Errorf("csrc: %s", C.GoString(&msg[0]))
	}
	h := C.tb_tj_init(lib)
	if h == nil {
		C.tb_tj_enc_close(lib)
		C.free(unsafe.Pointer(lib))
		return nil, fmt.Errorf("csrc: %s: tjInitCompress failed", path)
	}
	return &JPEGEncoder{lib: lib, h: h}, nil
}

// Encode returns w x h RGB pixels (rows of 3w bytes) as a JPEG of
// quality q, 4:2:0, appended to dst.
func (e *JPEGEncoder) Encode(dst, rgb []byte, w, h, q int) ([]byte, error) {
	if w <= 0 || h <= 0 || len(rgb) != w*h*3 || q < 1 || q > 100 {
		return nil, fmt.Errorf("csrc: Encode: %d bytes for %dx%d RGB, quality %d", len(rgb), w, h, q)
	}
	var out *C.uint8_t
	var n C.size_t
	var msg [256]C.char
	st := C.tb_tj_encode(e.lib, e.h, (*C.uint8_t)(unsafe.Pointer(&rgb[0])), C.int(w), C.int(h), C.int(q), &out, &n, &msg[0], C.size_t(len(msg)))
	runtime.KeepAlive(rgb)
	if st != 0 {
		return nil, fmt.Errorf("csrc: %s", C.GoString(&msg[0]))
	}
	dst = append(dst, unsafe.Slice((*byte)(unsafe.Pointer(out)), int(n))...)
	C.tb_tj_free(e.lib, out)
	return dst, nil
}

// Close frees the encoder and unloads its library.
func (e *JPEGEncoder) Close() {
	if e.lib != nil {
		C.tb_tj_destroy(e.lib, e.h)
		C.tb_tj_enc_close(e.lib)
		C.free(unsafe.Pointer(e.lib))
		e.lib = nil
	}
}
