//go:build cgo

package main

import (
	"bytes"
	"image/jpeg"

	"github.com/tensorbatch/tensorbatch/csrc"
)

// turbo is TurboJPEG's full decode, the per-core baseline.
type turbo struct {
	t        *csrc.TurboJPEG
	maxBytes int // the largest RGB image of the blobs
}

// openTurbo loads TurboJPEG to decode blobs: into one buffer that fits the
// largest, kept from call to call as a decoder's would be (a new 256 MB
// buffer a call, as the first version had, made each block of images pay
// its page faults: a quarter of the rate).
func openTurbo(blobs [][]byte) (*turbo, error) {
	t, err := csrc.OpenTurboJPEG("libturbojpeg.so.0")
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
