package vision

import "math/rand/v2"

// DecodeGeometry decodes the image at path with geometry g instead of one
// drawn from an RNG: how the goldens are checked for a given crop box.
func (d *Dataset) DecodeGeometry(path string, g Geometry, dst []byte) error {
	return d.p.decodeFile(path, func(int, int) Geometry { return g }, dst)
}

// ResetDecoder forgets the JPEG decoder choice, so a test can make it
// again. The library stays loaded: a decoder of a dataset that a failed
// test left open may still be freed into it by its cleanup.
func ResetDecoder() {
	decMu.Lock()
	defer decMu.Unlock()
	decDone, decLib = false, nil
}

func newRand(i uint64) *rand.Rand { return rand.New(rand.NewPCG(i, 7)) }

// CgoEnabled says whether the C kernels and libjpeg-turbo are built in.
const CgoEnabled = hasNative

// UseTurboJPEGLibs sets the names ShrinkJPEG loads TurboJPEG by (none:
// Go's image/jpeg encodes) until the test ends; pipelines made after it
// see them.
func UseTurboJPEGLibs(t interface{ Cleanup(func()) }, names ...string) {
	old := turboJPEGLibs
	turboJPEGLibs = names
	t.Cleanup(func() { turboJPEGLibs = old })
}
