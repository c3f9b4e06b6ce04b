package vision_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/vision"
)

// cuts are the lengths a file of n bytes is truncated to: every few
// bytes, and the last ones (the EOI marker's bytes).
func cuts(n int) []int {
	var c []int
	for k := 2; k < n-2; k += max(1, n/37) {
		c = append(c, k)
	}
	return append(c, n-3, n-2, n-1)
}

// reliabilityTransforms are the transforms a file's validity must not
// depend on: train and eval, Exact and Fast (DCT scaling where the crop
// allows it).
var reliabilityTransforms = []vision.Transform{
	vision.Train(24), vision.Eval(24),
	{Train: true, Size: 24, Mode: vision.Fast}, {Size: 24, Mode: vision.Fast},
	{Train: true, Size: 8, Scale: [2]float64{0.9, 1}, Mode: vision.Fast}, // DCT scaling by 1/8
}

// lastScan returns where the entropy-coded data of a JPEG's last scan
// begins and ends (before EOI).
func lastScan(t testing.TB, b []byte) (int, int) {
	t.Helper()
	i := bytes.LastIndex(b, []byte{0xff, 0xda})
	require.Positive(t, i)
	require.Equal(t, []byte{0xff, 0xd9}, b[len(b)-2:])
	return i + 2 + int(binary.BigEndian.Uint16(b[i+2:])), len(b) - 2
}

// damaged returns broken copies of a JPEG, by name: cut at many lengths,
// and with markers that have no place in a scan written over its data
// at many offsets.
func damaged(t testing.TB, good []byte) map[string][]byte {
	out := map[string][]byte{}
	for _, n := range cuts(len(good)) {
		out[fmt.Sprintf("cut%d", n)] = good[:n]
	}
	lo, hi := lastScan(t, good)
	restarts := bytes.Contains(good, []byte{0xff, 0xdd})
	for k := lo; k < hi-2; k += max(1, (hi-lo)/7) {
		for _, m := range []byte{0x02, 0xc8, 0xd8, 0xf0} { // unknown markers, a second SOI
			b := bytes.Clone(good)
			b[k], b[k+1] = 0xff, m
			out[fmt.Sprintf("marker%02X@%d", m, k)] = b
		}
		if !restarts { // a restart marker where no interval is defined
			b := bytes.Clone(good)
			b[k], b[k+1] = 0xff, 0xd0
			out[fmt.Sprintf("rst@%d", k)] = b
		}
	}
	// a restart marker out of sequence
	for k, n := lo, 0; restarts && k < hi-1; k++ {
		if good[k] == 0xff && good[k+1] >= 0xd0 && good[k+1] <= 0xd7 {
			b := bytes.Clone(good)
			b[k+1] = 0xd0 + (good[k+1]-0xd0+1)%8
			out[fmt.Sprintf("rst%d@%d", n, k)] = b
			n++
		}
	}
	return out
}

// A truncated or corrupt JPEG fails as ErrCorrupt naming its path
// whatever the crop, the mode and the decoder: its validity is the
// file's, not the epoch's.
func TestDamagedJPEGFailsForEveryCrop(t *testing.T) {
	if testing.Short() {
		t.Skip("fault table over every crop and decoder: slow; go test without -short runs it")
	}
	files, _ := filepath.Glob(filepath.Join(testdata, "*.jpg"))
	require.NotEmpty(t, files)
	for _, dec := range []string{"auto", "go"} {
		t.Run(dec, func(t *testing.T) {
			t.Setenv(vision.EnvJPEG, dec)
			vision.ResetDecoder()
			defer vision.ResetDecoder()
			dir := t.TempDir()
			for _, tr := range reliabilityTransforms {
				ds, err := vision.New(nil, nil, tr)
				require.NoError(t, err)
				defer ds.Close()
				dst := make([]byte, 3*tr.Size*tr.Size*4)
				for _, f := range files {
					good, err := os.ReadFile(f)
					require.NoError(t, err)
					require.NoError(t, ds.Decode(f, newRand(1), dst), "%s: the whole file", f)
					for name, b := range damaged(t, good) {
						p := filepath.Join(dir, name+"_"+filepath.Base(f))
						require.NoError(t, os.WriteFile(p, b, 0o644))
						for seed := range 4 {
							err := ds.Decode(p, newRand(uint64(seed)), dst)
							if !assert.ErrorIs(t, err, vision.ErrCorrupt, "%s, %v, train %v, seed %d", p, tr.Mode, tr.Train, seed) {
								return
							}
							assert.ErrorContains(t, err, p)
						}
					}
				}
			}
		})
	}
}

// What follows EOI is ignored, as libjpeg and Go's decoder ignore it, and
// fill bytes before a marker are allowed: such files decode.
func TestJPEGTrailingBytesAndFill(t *testing.T) {
	t.Parallel()
	good, err := os.ReadFile(filepath.Join(testdata, "rgb420.jpg"))
	require.NoError(t, err)
	fill := append(append(bytes.Clone(good[:len(good)-2]), 0xff, 0xff, 0xff), 0xff, 0xd9)
	dir := t.TempDir()
	ds, err := vision.New(nil, nil, vision.Train(24))
	require.NoError(t, err)
	defer ds.Close()
	dst := make([]byte, 3*24*24*4)
	for name, b := range map[string][]byte{
		"trailing":    append(bytes.Clone(good), "trailing bytes, a thumbnail, padding"...),
		"trailing_ff": append(bytes.Clone(good), 0xff, 0xd8, 0xff, 0x00),
		"fill":        fill,
	} {
		p := filepath.Join(dir, name+".jpg")
		require.NoError(t, os.WriteFile(p, b, 0o644))
		for seed := range 4 {
			assert.NoError(t, ds.Decode(p, newRand(uint64(seed)), dst), name)
		}
	}
}
