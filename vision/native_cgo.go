//go:build cgo

package vision

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

type jpegLib = csrc.JPEGLib

// openJPEGLib loads libjpeg and checks that a decompressor can be made of
// it (jpeg_CreateDecompress refuses another ABI).
func openJPEGLib(name string) (*jpegLib, error) {
	lib, err := csrc.OpenJPEG(name)
	if err != nil {
		return nil, errors.New(trimCsrc(err.Error()))
	}
	d, err := csrc.NewImageDecoder(lib)
	if err != nil {
		lib.Close()
		return nil, errors.New(trimCsrc(err.Error()))
	}
	d.Close()
	return lib, nil
}

func trimCsrc(s string) string {
	if len(s) > 6 && s[:6] == "csrc: " {
		return s[6:]
	}
	return s
}

const hasNative = true

// native is a worker's C decoder and the C copy of its plan.
type native struct {
	d *csrc.ImageDecoder
	p csrc.Plan
}

func (n *native) init(lib *jpegLib) error {
	d, err := csrc.NewImageDecoder(lib)
	if err != nil {
		return err
	}
	n.d = d
	// A leak backstop for a Dataset never closed; Close is idempotent.
	runtime.AddCleanup(n, func(d *csrc.ImageDecoder) { d.Close() }, d)
	return nil
}

func (n *native) close() {
	if n.d != nil {
		n.d.Close()
		n.d = nil
	}
}

func cpath(p collate.Path) csrc.Path {
	switch p {
	case collate.PathAVX2:
		return csrc.AVX2
	case collate.PathAVX512:
		return csrc.AVX512
	}
	return csrc.Scalar
}

func (n *native) plan(p *plan) *csrc.Plan {
	n.p = csrc.Plan{X0: p.x0, Y0: p.y0, X1: p.x1, Y1: p.y1, OW: p.ow, OH: p.oh, HKS: p.hks, VKS: p.vks,
		HB: p.hb, HK: p.hk, VB: p.vb, VK: p.vk, Flip: p.flip, Out: csrc.Out(p.out), Mean: p.mean, Std: p.std,
		Fast: p.fast, Scale: p.scale, Bias: p.bias}
	return &n.p
}

func (o jpegOpts) request(h jpegHeader) csrc.JPEGRequest {
	return csrc.JPEGRequest{Width: h.w, Height: h.h, MaxPixels: o.maxPixels, ScaleDenom: o.denom, FastDCT: o.fastDCT}
}

func (n *native) jpeg(path collate.Path, data []byte, h jpegHeader, o jpegOpts, p *plan, dst []byte) error {
	return imageErr(n.d.JPEGResample(cpath(path), data, o.request(h), n.plan(p), dst))
}

func (n *native) jpegRegion(data []byte, h jpegHeader, o jpegOpts, p *plan, dst []byte, stride int) error {
	return imageErr(n.d.JPEGRegion(data, o.request(h), p.x0, p.y0, p.x1, p.y1, dst, stride))
}

func (n *native) resample(path collate.Path, p *plan, src []byte, stride int, dst []byte) error {
	return imageErr(n.d.Resample(cpath(path), n.plan(p), src, stride, dst))
}

// imageErr wraps libjpeg's failures in the package's sentinel errors.
func imageErr(err error) error {
	if err == nil {
		return nil
	}
	var ie *csrc.ImageError
	if !errors.As(err, &ie) {
		return err
	}
	switch ie.Status {
	case csrc.ImageDecode, csrc.ImageFormat:
		return fmt.Errorf("%w: libjpeg: %s", ErrCorrupt, ie.Msg)
	case csrc.ImageTooBig:
		return fmt.Errorf("%w: %s", ErrTooManyPixels, ie.Msg)
	}
	return err
}
