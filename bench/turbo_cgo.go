//go:build cgo

package main

import "github.com/tensorbatch/tensorbatch/csrc"

// turbo is TurboJPEG's full decode, the per-core baseline.
type turbo struct{ t *csrc.TurboJPEG }

func openTurbo() (*turbo, error) {
	t, err := csrc.OpenTurboJPEG("libturbojpeg.so.0")
	if err != nil {
		return nil, err
	}
	return &turbo{t}, nil
}

// decode decodes every blob once, in one C call.
func (t *turbo) decode(blobs [][]byte) error {
	_, err := t.t.DecodeAll(blobs, 1, 1<<28)
	return err
}

func (t *turbo) close() { t.t.Close() }
