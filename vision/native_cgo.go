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

// native is a worker's C decoder.
type native struct {
	d *csrc.ImageDecoder
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

func (o jpegOpts) request(h jpegHeader) csrc.JPEGRequest {
	return csrc.JPEGRequest{Width: h.w, Height: h.h, MaxPixels: o.maxPixels, ScaleDenom: o.denom, FastDCT: o.fastDCT, BoxUpsample: o.box}
}

// The kernels are numbered as collate's (collate checks it at build time).

func (n *native) jpeg(k collate.Kernels, data []byte, h jpegHeader, o jpegOpts, p *plan, dst []byte) error {
	return imageErr(n.d.JPEGResample(csrc.Kernels(k), data, o.request(h), p, dst))
}

func (n *native) jpegRegion(data []byte, h jpegHeader, o jpegOpts, p *plan, dst []byte, stride int) error {
	return imageErr(n.d.JPEGRegion(data, o.request(h), p.X0, p.Y0, p.X1, p.Y1, dst, stride))
}

func (n *native) resample(k collate.Kernels, p *plan, src []byte, stride int, dst []byte) error {
	return imageErr(n.d.Resample(csrc.Kernels(k), p, src, stride, dst))
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
