package vision_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/vision"
)

// tiffWithOffset is a little-endian TIFF whose one IFD entry keeps its
// values at offset off, past the file's end.
func tiffWithOffset(off uint32) []byte {
	b := []byte("II*\x00\x08\x00\x00\x00\x01\x00")
	e := make([]byte, 12)
	binary.LittleEndian.PutUint16(e, 0x0111) // StripOffsets
	binary.LittleEndian.PutUint16(e[2:], 4)  // LONG
	binary.LittleEndian.PutUint32(e[4:], 2)  // two: kept out of line
	binary.LittleEndian.PutUint32(e[8:], off)
	return append(append(b, e...), 0, 0, 0, 0)
}

// A TIFF's offsets are untrusted sizes: a 26-byte file pointing 256 MiB
// away is ErrCorrupt without allocating 256 MiB (Go's TIFF decoder,
// given a reader that is not an io.ReaderAt, as image.DecodeConfig gives
// it, buffers the file up to any offset it is asked to read).
func TestTIFFOffsetsBoundNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "far.tif")
	require.NoError(t, os.WriteFile(p, tiffWithOffset(256<<20), 0o644))
	ds, err := vision.New(nil, nil, vision.Eval(32))
	require.NoError(t, err)
	defer ds.Close()
	dst := make([]byte, 3*32*32*4)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = ds.Decode(p, nil, dst)
	runtime.ReadMemStats(&after)
	assert.ErrorIs(t, err, vision.ErrCorrupt)
	assert.ErrorContains(t, err, p)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "allocated for an offset past the end")
	assert.NoError(t, ds.Decode(filepath.Join(testdata, "rgb.tif"), nil, dst))
}
