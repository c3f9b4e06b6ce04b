//go:build cgo

package csrc

/*
#cgo linux LDFLAGS: -ldl
#cgo LDFLAGS: -lm
#cgo noescape tb_jpeg_resample
#cgo nocallback tb_jpeg_resample
#cgo noescape tb_jpeg_region
#cgo nocallback tb_jpeg_region
#cgo noescape tb_resample
#cgo nocallback tb_resample
#include <stdlib.h>
#include <string.h>
#include "tb_image.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// JPEGLib is libjpeg (libjpeg-turbo's libjpeg.so.62) loaded at run time.
type JPEGLib struct {
	lib  *C.tb_jpeg_lib // C memory: the table is read by every decoder
	path string
}

// OpenJPEG loads libjpeg from path (a file name the dynamic loader
// searches for, or a path). A missing library or symbol is an error.
func OpenJPEG(path string) (*JPEGLib, error) {
	lib := (*C.tb_jpeg_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.tb_jpeg_lib{}))))
	if lib == nil {
		return nil, errors.New("csrc: out of memory")
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	if C.tb_jpeg_open(lib, cpath, &msg[0], C.size_t(len(msg))) != 0 {
		C.free(unsafe.Pointer(lib))
		return nil, fmt.Errorf("csrc: %s", C.GoString(&msg[0]))
	}
	return &JPEGLib{lib: lib, path: path}, nil
}

// Path returns the path the library was opened with.
func (l *JPEGLib) Path() string { return l.path }

// Close unloads the library. No decoder of it may be used afterwards.
func (l *JPEGLib) Close() {
	if l.lib != nil {
		C.tb_jpeg_close(l.lib)
		C.free(unsafe.Pointer(l.lib))
		l.lib = nil
	}
}

// The constants of plan.go are tb_image.h's: an array length below zero,
// or a non-zero one, fails the build.
var (
	_ [0]int = [OutF32CHW - C.TB_OUT_F32_CHW]int{}
	_ [0]int = [OutF16CHW - C.TB_OUT_F16_CHW]int{}
	_ [0]int = [OutBF16CHW - C.TB_OUT_BF16_CHW]int{}
	_ [0]int = [OutU8HWC - C.TB_OUT_U8_HWC]int{}
	_ [0]int = [OutU8CHW - C.TB_OUT_U8_CHW]int{}
)

// The statuses of plan.go are tb_image.h's.
var (
	_ [0]int = [ImageDecode - C.TB_IMG_EDECODE]int{}
	_ [0]int = [ImageArg - C.TB_IMG_EARG]int{}
	_ [0]int = [ImageTooBig - C.TB_IMG_ETOOBIG]int{}
	_ [0]int = [ImageNoMemory - C.TB_IMG_ENOMEM]int{}
	_ [0]int = [ImageFormat - C.TB_IMG_EFORMAT]int{}
)

// ImageDecoder is per-worker state of the image kernels: a libjpeg
// decompressor and scratch buffers, in C memory, reused across images.
// It is not safe for concurrent use; Close frees it.
type ImageDecoder struct {
	d    *C.tb_imgdec
	plan *C.tb_plan
	req  *C.tb_jreq // C memory: a Go value passed by address would escape
	bufs *C.int32_t // the plan's arrays
	cap  int        // int32s in bufs
}

// NewImageDecoder returns a decoder of lib's JPEGs; with a nil lib it
// only resamples.
func NewImageDecoder(lib *JPEGLib) (*ImageDecoder, error) {
	var l *C.tb_jpeg_lib
	if lib != nil {
		l = lib.lib
	}
	d := C.tb_imgdec_new(l)
	if d == nil {
		return nil, errors.New("csrc: out of memory")
	}
	if msg := C.GoString(C.tb_imgdec_error(d)); lib != nil && msg != "" {
		C.tb_imgdec_free(d)
		return nil, fmt.Errorf("csrc: %s: %s", lib.path, msg)
	}
	plan := (*C.tb_plan)(C.calloc(1, C.size_t(unsafe.Sizeof(C.tb_plan{}))))
	req := (*C.tb_jreq)(C.calloc(1, C.size_t(unsafe.Sizeof(C.tb_jreq{}))))
	if plan == nil || req == nil {
		C.free(unsafe.Pointer(plan))
		C.free(unsafe.Pointer(req))
		C.tb_imgdec_free(d)
		return nil, errors.New("csrc: out of memory")
	}
	return &ImageDecoder{d: d, plan: plan, req: req}, nil
}

// Close frees the decoder; it is idempotent.
func (d *ImageDecoder) Close() {
	if d.d != nil {
		C.tb_imgdec_free(d.d)
		C.free(unsafe.Pointer(d.plan))
		C.free(unsafe.Pointer(d.req))
		C.free(unsafe.Pointer(d.bufs))
		d.d, d.plan, d.req, d.bufs, d.cap = nil, nil, nil, nil, 0
	}
}

func (d *ImageDecoder) err(st C.int) error {
	if st == C.TB_IMG_OK {
		return nil
	}
	return &ImageError{Status: int(st), Msg: C.GoString(C.tb_imgdec_error(d.d))}
}

// load checks p and copies it into the decoder's C plan.
func (d *ImageDecoder) load(p *Plan, dst []byte) error {
	if d.d == nil {
		return errors.New("csrc: ImageDecoder used after Close")
	}
	if err := p.Check(); err != nil {
		return err
	}
	if len(dst) < p.DstBytes() {
		return fmt.Errorf("csrc: plan: %d bytes of output into %d", p.DstBytes(), len(dst))
	}
	nh, nk, nv := 2*p.OW, p.OW*p.HKS, 2*p.OH
	n := nh + nk + nv + p.OH*p.VKS
	if n > d.cap {
		b := (*C.int32_t)(C.realloc(unsafe.Pointer(d.bufs), C.size_t(n)*4))
		if b == nil {
			return errors.New("csrc: out of memory")
		}
		d.bufs, d.cap = b, n
	}
	all := unsafe.Slice((*int32)(unsafe.Pointer(d.bufs)), n)
	copy(all, p.HB[:nh])
	copy(all[nh:], p.HK[:nk])
	copy(all[nh+nk:], p.VB[:nv])
	copy(all[nh+nk+nv:], p.VK[:p.OH*p.VKS])
	c := d.plan
	c.x0, c.y0, c.x1, c.y1 = C.int32_t(p.X0), C.int32_t(p.Y0), C.int32_t(p.X1), C.int32_t(p.Y1)
	c.ow, c.oh, c.hks, c.vks = C.int32_t(p.OW), C.int32_t(p.OH), C.int32_t(p.HKS), C.int32_t(p.VKS)
	c.hb = d.bufs
	c.hk = (*C.int32_t)(unsafe.Add(unsafe.Pointer(d.bufs), nh*4))
	c.vb = (*C.int32_t)(unsafe.Add(unsafe.Pointer(d.bufs), (nh+nk)*4))
	c.vk = (*C.int32_t)(unsafe.Add(unsafe.Pointer(d.bufs), (nh+nk+nv)*4))
	c.flip = 0
	if p.Flip {
		c.flip = 1
	}
	c.out = C.int32_t(p.Out)
	c.fast = 0
	if p.Fast {
		c.fast = 1
	}
	for i := range 3 {
		c.mean[i], c.std[i] = C.float(p.Mean[i]), C.float(p.Std[i])
		c.scale[i], c.bias[i] = C.float(p.Scale[i]), C.float(p.Bias[i])
	}
	return nil
}

// jreq fills the decoder's C request from q.
func (d *ImageDecoder) jreq(q JPEGRequest) (*C.tb_jreq, error) {
	if q.Width <= 0 || q.Height <= 0 || q.Width > math.MaxUint32 || q.Height > math.MaxUint32 || q.MaxPixels < 0 {
		return nil, fmt.Errorf("csrc: JPEG request %+v", q)
	}
	*d.req = C.tb_jreq{width: C.uint32_t(q.Width), height: C.uint32_t(q.Height), max_pixels: C.uint64_t(q.MaxPixels), scale_denom: C.int32_t(q.ScaleDenom)}
	if q.FastDCT {
		d.req.fast_dct = 1
	}
	if q.BoxUpsample {
		d.req.box_upsample = 1
	}
	return d.req, nil
}

// JPEGResample decodes data and resamples it per p into dst with kernels k.
// p's region is in the coordinates of the DCT-scaled image.
func (d *ImageDecoder) JPEGResample(k Kernels, data []byte, q JPEGRequest, p *Plan, dst []byte) error {
	if err := d.load(p, dst); err != nil {
		return err
	}
	r, err := d.jreq(q)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		return &ImageError{Status: ImageDecode, Msg: "empty JPEG stream"}
	}
	st := C.tb_jpeg_resample(d.d, (*C.uint8_t)(ptr(data)), C.size_t(len(data)), r, d.plan, ptr(dst), C.int(k))
	return d.err(st)
}

// JPEGRegion decodes the region [x0,x1) x [y0,y1) of data (DCT-scaled
// coordinates) as RGBX rows, stride bytes apart, into dst.
func (d *ImageDecoder) JPEGRegion(data []byte, q JPEGRequest, x0, y0, x1, y1 int, dst []byte, stride int) error {
	if d.d == nil {
		return errors.New("csrc: ImageDecoder used after Close")
	}
	r, err := d.jreq(q)
	if err != nil {
		return err
	}
	switch {
	case x0 < 0 || y0 < 0 || x1 <= x0 || y1 <= y0 || x1 > math.MaxInt32 || y1 > math.MaxInt32:
		return fmt.Errorf("csrc: JPEGRegion: region [%d,%d)x[%d,%d)", x0, x1, y0, y1)
	case stride < (x1-x0)*4 || len(dst) < (y1-y0-1)*stride+(x1-x0)*4:
		return fmt.Errorf("csrc: JPEGRegion: %d rows of %d pixels into %d bytes, stride %d", y1-y0, x1-x0, len(dst), stride)
	case len(data) == 0:
		return &ImageError{Status: ImageDecode, Msg: "empty JPEG stream"}
	}
	st := C.tb_jpeg_region(d.d, (*C.uint8_t)(ptr(data)), C.size_t(len(data)), r, C.int(x0), C.int(y0), C.int(x1), C.int(y1),
		(*C.uint8_t)(ptr(dst)), C.size_t(stride))
	return d.err(st)
}

// Resample resamples an RGBX region in memory (src holds its rows, stride
// bytes apart, from pixel (X0, Y0)) per p into dst with kernels k.
func (d *ImageDecoder) Resample(k Kernels, p *Plan, src []byte, stride int, dst []byte) error {
	if err := d.load(p, dst); err != nil {
		return err
	}
	w, h := p.X1-p.X0, p.Y1-p.Y0
	if stride < w*4 || len(src) < (h-1)*stride+w*4 {
		return fmt.Errorf("csrc: Resample: %d rows of %d pixels from %d bytes, stride %d", h, w, len(src), stride)
	}
	st := C.tb_resample(d.d, d.plan, (*C.uint8_t)(ptr(src)), C.size_t(stride), ptr(dst), C.int(k))
	return d.err(st)
}
