//go:build !cgo

package vision

import (
	"errors"

	"github.com/tensorbatch/tensorbatch/collate"
)

// Without cgo there is no libjpeg-turbo and no C kernel: JPEGs decode with
// Go's image/jpeg and resampling runs the Go reference.

type jpegLib struct{}

var errNoCgo = errors.New("built without cgo")

func openJPEGLib(string) (*jpegLib, error) { return nil, errNoCgo }

const hasNative = false

type native struct{}

func (n *native) init(*jpegLib) error { return nil }
func (n *native) close()              {}

func (n *native) jpeg(collate.Kernels, []byte, jpegHeader, jpegOpts, *plan, []byte) error {
	return errNoCgo
}

func (n *native) jpegRegion([]byte, jpegHeader, jpegOpts, *plan, []byte, int) error {
	return errNoCgo
}

func (n *native) resample(collate.Kernels, *plan, []byte, int, []byte) error { return errNoCgo }

func (*jpegLib) Close() {}
