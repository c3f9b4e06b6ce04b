package vision_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/image/bmp"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
	"github.com/tensorbatch/tensorbatch/vision"
)

// epochBytes loads epoch of ds and returns every batch's image and label
// bytes, and its indices.
func epochBytes(t testing.TB, ds engine.Dataset, cfg engine.Config, epoch int) (batches [][]byte, indices [][]int) {
	t.Helper()
	l, err := engine.New(ds, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	for b, err := range l.Epoch(context.Background(), epoch) {
		require.NoError(t, err)
		batches = append(batches, bytes.Clone(b.Tensor("image").Bytes()), bytes.Clone(b.Tensor("label").Bytes()))
		indices = append(indices, b.Indices())
	}
	return batches, indices
}

// allTransforms is a train and an eval transform for every Mode and
// Output.
func allTransforms() []vision.Transform {
	var ts []vision.Transform
	for _, mode := range []vision.Mode{vision.Exact, vision.Fast} {
		for out := vision.Float32CHW; out <= vision.Uint8CHW; out++ {
			ts = append(ts,
				vision.Transform{Train: true, Size: 40, Output: out, Mode: mode},
				vision.Transform{Size: 32, Output: out, Mode: mode})
		}
	}
	return ts
}

// Pipeline.Decode on a file's bytes, with the slot's RNG, writes the
// bits ImageFolder writes for the file: every Mode and Output, train and
// eval, through two loaders.
func TestPipelineMatchesImageFolder(t *testing.T) {
	t.Parallel()
	root := folder(t)
	for _, tr := range allTransforms() {
		name := fmt.Sprintf("train=%v/%v/%v", tr.Train, tr.Mode, tr.Output)
		ds, err := vision.ImageFolder(root, tr)
		require.NoError(t, err)
		files := make([][]byte, ds.Len())
		for i, s := range ds.Samples() {
			files[i], err = os.ReadFile(s.Path)
			require.NoError(t, err)
		}
		p, err := vision.NewPipeline(tr)
		require.NoError(t, err)
		assert.Equal(t, ds.Schema(), p.Schema(), name)
		fromBytes := engine.DatasetFunc(ds.Len(), p.Schema(), func(ctx context.Context, s *engine.Slot) error {
			if err := p.Decode(files[s.Index()], s.Rand(), s.Tensor("image").Bytes()); err != nil {
				return err
			}
			collate.As[int64](s.Tensor("label"))[0] = int64(ds.Samples()[s.Index()].Label)
			return nil
		})
		cfg := engine.Config{BatchSize: 5, Shuffle: true, Seed: 11, Workers: 2}
		want, _ := epochBytes(t, ds, cfg, 3)
		got, _ := epochBytes(t, fromBytes, cfg, 3)
		require.Len(t, got, len(want), name)
		for i := range want {
			require.True(t, bytes.Equal(want[i], got[i]), "%s: batch %d, field %d differs", name, i/2, i%2)
		}
		assert.NotEqual(t, make([]byte, len(want[0])), want[0], "%s: the batch is not all zeros", name)

		// And one sample on its own: a standalone Slot's RNG is the loader's.
		layout, err := collate.NewLayout(p.Schema(), 1)
		require.NoError(t, err)
		slot := enginetest.NewSlot(11, 3, 4, layout, make([]byte, layout.Size()), 0)
		a := make([]byte, p.Schema()[0].Bytes())
		require.NoError(t, p.Decode(files[4], slot.Rand(), a))
		slot = enginetest.NewSlot(11, 3, 4, layout, make([]byte, layout.Size()), 0)
		require.NoError(t, ds.Fill(context.Background(), slot))
		assert.Equal(t, slot.Tensor("image").Bytes(), a, name)

		require.NoError(t, p.Close())
		require.NoError(t, ds.Close())
	}
}

// The libjpeg-turbo path of Decode allocates nothing per image once warm.
func TestPipelineDecodeNoAllocation(t *testing.T) {
	if !vision.JPEGDecoderInfo().Turbo() {
		t.Skip("libjpeg-turbo not loaded")
	}
	data, err := os.ReadFile(filepath.Join(testdata, "rgb420.jpg"))
	require.NoError(t, err)
	for _, tr := range []vision.Transform{{Train: true, Size: 64}, {Train: true, Size: 64, Mode: vision.Fast}, {Size: 64, Output: vision.Uint8HWC}} {
		p, err := vision.NewPipeline(tr)
		require.NoError(t, err)
		dst := make([]byte, p.Schema()[0].Bytes())
		rng := newRand(1)
		require.NoError(t, p.Decode(data, rng, dst))
		allocs := testing.AllocsPerRun(50, func() {
			if err := p.Decode(data, rng, dst); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "%+v", tr)
		require.NoError(t, p.Close())
	}
}

func TestPipelineDecodeErrors(t *testing.T) {
	t.Parallel()
	good, err := os.ReadFile(filepath.Join(testdata, "rgb420.jpg"))
	require.NoError(t, err)
	p, err := vision.NewPipeline(vision.Eval(16), vision.MaxFileBytes(int64(len(good))), vision.MaxPixels(1<<20))
	require.NoError(t, err)
	dst := make([]byte, 3*16*16*4)
	require.NoError(t, p.Decode(good, nil, dst))

	err = p.Decode(good, nil, dst[:100])
	assert.ErrorContains(t, err, "100 bytes")
	assert.ErrorContains(t, err, fmt.Sprint(len(dst)))

	big := append(bytes.Clone(good), 0)
	assert.ErrorIs(t, p.Decode(big, nil, dst), vision.ErrFileTooLarge)
	assert.ErrorIs(t, p.Decode(good[:len(good)-40], nil, dst), vision.ErrCorrupt, "a JPEG is checked whole")
	assert.ErrorIs(t, p.Decode(nil, nil, dst), vision.ErrNotImage)
	assert.ErrorIs(t, p.Decode([]byte("not an image at all"), nil, dst), vision.ErrNotImage)
	assert.ErrorIs(t, p.Decode(jpegHeader(2000, 1000), nil, dst), vision.ErrTooManyPixels)
	assert.ErrorIs(t, p.Decode(pngHeader(2000, 1000), nil, dst), vision.ErrTooManyPixels)

	train, err := vision.NewPipeline(vision.Train(16))
	require.NoError(t, err)
	assert.ErrorContains(t, train.Decode(good, nil, dst), "rng", "no panic")
	require.NoError(t, train.Close())

	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "idempotent")
	err = p.Decode(good, nil, dst)
	assert.ErrorIs(t, err, fs.ErrClosed)
	assert.ErrorContains(t, err, "vision: the Pipeline is closed")
}

// A closed Dataset fails its Fills: it is its Pipeline.
func TestDatasetDecodeAfterClose(t *testing.T) {
	t.Parallel()
	ds, err := vision.New(nil, nil, vision.Eval(16))
	require.NoError(t, err)
	require.NoError(t, ds.Close())
	err = ds.Decode(filepath.Join(testdata, "rgb.png"), nil, make([]byte, 3*16*16*4))
	assert.ErrorIs(t, err, fs.ErrClosed)
}

// Decodes from many goroutines at once give each its own bits, and a
// Close among them frees the decoders in use as they finish.
func TestPipelineConcurrent(t *testing.T) {
	t.Parallel()
	var files [][]byte
	for _, f := range []string{"rgb420.jpg", "progressive.jpg", "rgb.png", "cmyk.jpg"} {
		b, err := os.ReadFile(filepath.Join(testdata, f))
		require.NoError(t, err)
		files = append(files, b)
	}
	p, err := vision.NewPipeline(vision.Transform{Train: true, Size: 24, Mode: vision.Fast})
	require.NoError(t, err)
	n := p.Schema()[0].Bytes()
	want := make([][]byte, 16)
	for i := range want {
		want[i] = make([]byte, n)
		require.NoError(t, p.Decode(files[i%len(files)], newRand(uint64(i)), want[i]))
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range errs {
		wg.Go(func() {
			dst := make([]byte, n)
			for k := range 40 {
				i := (g + k) % len(want)
				if err := p.Decode(files[i%len(files)], newRand(uint64(i)), dst); err != nil {
					errs[g] = err
					return
				}
				if !bytes.Equal(dst, want[i]) {
					errs[g] = fmt.Errorf("goroutine %d: image %d differs", g, i)
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	// Close while decodes run: each returns its bits or fs.ErrClosed.
	for g := range errs {
		errs[g] = nil
		wg.Go(func() {
			dst := make([]byte, n)
			for k := range 40 {
				err := p.Decode(files[k%len(files)], newRand(uint64(k)), dst)
				if errors.Is(err, fs.ErrClosed) {
					return
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	require.NoError(t, p.Close())
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// Check refuses what Decode refuses before decoding: no bytes, not an
// image, a JPEG cut short; it passes a good JPEG and PNG.
func TestPipelineCheck(t *testing.T) {
	p, err := vision.NewPipeline(vision.Eval(32))
	require.NoError(t, err)
	defer p.Close()
	jpg, err := os.ReadFile(filepath.Join("testdata", "gray.jpg"))
	require.NoError(t, err)
	png, err := os.ReadFile(filepath.Join("testdata", "gray.png"))
	require.NoError(t, err)
	assert.NoError(t, p.Check(jpg))
	assert.NoError(t, p.Check(png))
	for _, bad := range [][]byte{nil, []byte("not an image"), jpg[:len(jpg)/2]} {
		err := p.Check(bad)
		require.Error(t, err)
		dst := make([]byte, 32*32*3*4)
		assert.Error(t, p.Decode(bad, nil, dst), "Decode refuses what Check refuses")
		assert.True(t, strings.HasPrefix(err.Error(), "vision: ") && !strings.HasPrefix(err.Error(), "vision: vision: "), err.Error())
	}
}

// The formats vision reads are its own list, not image's registry: a
// GIF is not an image to Check, Decode or Shrink even in a program that
// links image/gif (as this test does, and as the tensorbatch command does
// through its plotting library), so a file's fate does not depend on the
// program that reads it. A BMP, on the list, is.
func TestFormatsDoNotDependOnTheProgram(t *testing.T) {
	img := image.NewPaletted(image.Rect(0, 0, 8, 8), color.Palette{color.Black, color.White})
	var gifData bytes.Buffer
	require.NoError(t, gif.Encode(&gifData, img, nil))
	_, _, err := image.Decode(bytes.NewReader(gifData.Bytes()))
	require.NoError(t, err, "image/gif is linked here")
	p, err := vision.NewPipeline(vision.Eval(8))
	require.NoError(t, err)
	defer p.Close()
	assert.ErrorIs(t, p.Check(gifData.Bytes()), vision.ErrNotImage)
	assert.ErrorIs(t, p.Decode(gifData.Bytes(), nil, make([]byte, 8*8*3*4)), vision.ErrNotImage)
	_, _, _, err = p.Shrink(gifData.Bytes(), 4)
	assert.ErrorIs(t, err, vision.ErrNotImage)

	var bmpData bytes.Buffer
	require.NoError(t, bmp.Encode(&bmpData, img))
	assert.NoError(t, p.Check(bmpData.Bytes()))
	assert.Empty(t, vision.ImageFormat(gifData.Bytes()))

	// ImageFormat names each format vision reads as its files are named,
	// whatever the bytes' file is called.
	files, err := filepath.Glob(filepath.Join("testdata", "*.*"))
	require.NoError(t, err)
	n := 0
	for _, f := range files {
		ext := strings.TrimPrefix(filepath.Ext(f), ".")
		if ext == "golden" {
			continue
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Equal(t, ext, vision.ImageFormat(data), f)
		n++
	}
	assert.Greater(t, n, 20)
}

// ShrinkJPEG encodes Shrink's pixels as a JPEG of the quality asked, by
// TurboJPEG where it loads and by Go's image/jpeg where it does not: both
// decode (by Go's independent decoder) to Shrink's size and close to its
// pixels, a higher quality closer; a quality outside 1..100 is an error.
func TestPipelineShrinkJPEG(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "rgb420.jpg"))
	require.NoError(t, err)
	for _, enc := range []struct {
		name string
		libs []string
	}{{"turbojpeg", []string{"libturbojpeg.so.0"}}, {"go", nil}} {
		t.Run(enc.name, func(t *testing.T) {
			if enc.libs != nil && !vision.CgoEnabled {
				t.Skip("TurboJPEG is loaded by cgo")
			}
			vision.UseTurboJPEGLibs(t, enc.libs...)
			p, err := vision.NewPipeline(vision.Eval(32))
			require.NoError(t, err)
			defer p.Close()
			pix, w, h, err := p.Shrink(data, 64)
			require.NoError(t, err)
			var errs []float64
			for _, q := range []int{50, 95} {
				out, err := p.ShrinkJPEG(data, 64, q)
				require.NoError(t, err)
				img, err := jpeg.Decode(bytes.NewReader(out))
				require.NoError(t, err)
				require.Equal(t, image.Rect(0, 0, w, h), img.Bounds())
				sum := 0.0
				for y := range h {
					for x := range w {
						r, g, b, _ := img.At(x, y).RGBA()
						for c, v := range []uint32{r >> 8, g >> 8, b >> 8} {
							d := float64(v) - float64(pix[3*(y*w+x)+c])
							sum += d * d
						}
					}
				}
				errs = append(errs, math.Sqrt(sum/float64(3*w*h)))
			}
			assert.Less(t, errs[1], errs[0], "quality 95 is closer than 50")
			assert.Less(t, errs[1], 7.0, "RMS error at quality 95 (4:2:0 chroma on a small, sharp image): %v", errs)
			for _, q := range []int{0, 101} {
				_, err := p.ShrinkJPEG(data, 64, q)
				assert.ErrorContains(t, err, "vision: ShrinkJPEG: quality")
			}
		})
	}
}

// Shrink resizes an image, keeping its aspect ratio, to a shorter side
// of at most N: in the Exact mode its pixels are Pillow's
// Image.resize((w, h), BILINEAR) of the same decode, bit for bit (an
// independent reference, with Debian's python3-pil); a smaller image
// keeps its size. Pillow resizes the pixels this package decoded, so the
// check holds for either JPEG decoder; with libjpeg-turbo, Pillow's own
// decode must match too.
func TestPipelineShrinkMatchesPillow(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	if exec.Command("/usr/bin/python3", "-c", "import PIL").Run() != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3-pil is missing (scripts/install-deps.sh installs it)")
		}
		t.Skip("python3-pil is missing")
	}
	p, err := vision.NewPipeline(vision.Eval(32))
	require.NoError(t, err)
	defer p.Close()
	// pillow runs Pillow on a file, or on raw RGB pixels of size sw×sh
	// given on stdin (src "-"), and returns them resized to w×h.
	pillow := func(src string, stdin []byte, sw, sh, w, h int) []byte {
		t.Helper()
		cmd := exec.Command("/usr/bin/python3", "-c", `
import sys
from PIL import Image
src, w, h, sw, sh = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if src == "-":
    img = Image.frombytes("RGB", (sw, sh), sys.stdin.buffer.read())
else:
    img = Image.open(src).convert("RGB")
if (w, h) != img.size:
    img = img.resize((w, h), Image.BILINEAR)
sys.stdout.buffer.write(img.tobytes())
`, src, strconv.Itoa(w), strconv.Itoa(h), strconv.Itoa(sw), strconv.Itoa(sh))
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.Output()
		require.NoError(t, err)
		return out
	}
	differ := func(a, b []byte) int {
		require.Equal(t, len(b), len(a))
		n := 0
		for i := range a {
			if a[i] != b[i] {
				n++
			}
		}
		return n
	}
	for _, name := range []string{"rgb444_tall.jpg", "rgb420.jpg", "gray.png"} {
		path := filepath.Join("testdata", name)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
		require.NoError(t, err)
		full, w, h, err := p.Shrink(data, 1000)
		require.NoError(t, err, name)
		assert.Equal(t, [2]int{cfg.Width, cfg.Height}, [2]int{w, h}, "%s: a small image keeps its size", name)
		if vision.JPEGDecoderInfo().Turbo() || !strings.HasSuffix(name, ".jpg") {
			assert.Zero(t, differ(full, pillow(path, nil, 0, 0, w, h)), "%s: decode differs from Pillow's", name)
		}
		pix, w, h, err := p.Shrink(data, 24)
		require.NoError(t, err, name)
		assert.Equal(t, 24, min(w, h), name)
		d := differ(pix, pillow("-", full, cfg.Width, cfg.Height, w, h))
		assert.Zero(t, d, "%s at 24: %d of %d bytes differ from Pillow's resize", name, d, len(pix))
	}
}
