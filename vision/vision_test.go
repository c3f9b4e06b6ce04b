package vision_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/vision"
)

// write makes a file under root with the bytes of testdata file src (or
// the text of src when it is not a file there).
func write(t testing.TB, root, rel, src string) string {
	t.Helper()
	p := filepath.Join(root, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	b, err := os.ReadFile(filepath.Join(testdata, src))
	if err != nil {
		b = []byte(src)
	}
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// folder is a small ImageFolder of the test images: 3 classes.
func folder(t testing.TB) string {
	root := t.TempDir()
	for i, f := range []string{"rgb420.jpg", "gray.jpg", "cmyk.jpg", "progressive.jpg", "restart.jpg", "rgb.png", "palette.png",
		"gray16.png", "rgba.png", "rgb422_odd.jpg", "rgb444_tall.jpg", "gray.png"} {
		write(t, root, filepath.Join([]string{"cat", "dog", "emu"}[i%3], f), f)
	}
	return root
}

func TestImageFolderFollowsTorchvision(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, f := range []string{
		"b/x.jpg", "b/A.JPEG", "b/sub/z/y.png", "b/sub/a.webp", "b/notes.txt", "b/.hidden.jpg",
		"a/1.png", "a/zz/0.jpg", "a/z/9.bmp", "Upper/q.Jpg",
	} {
		write(t, root, f, "rgb420.jpg")
	}
	write(t, root, "stray.jpg", "rgb420.jpg") // a file at the top is not a class
	ds, err := vision.ImageFolder(root, vision.Eval(32))
	require.NoError(t, err)
	defer ds.Close()
	assert.Equal(t, []string{"Upper", "a", "b"}, ds.Classes(), "sorted by code point, as Python sorts")
	assert.Equal(t, map[string]int{"Upper": 0, "a": 1, "b": 2}, ds.ClassToIdx())
	var got []string
	for _, s := range ds.Samples() {
		rel, err := filepath.Rel(root, s.Path)
		require.NoError(t, err)
		got = append(got, filepath.ToSlash(rel)+":"+string(rune('0'+s.Label)))
	}
	want := []string{"Upper/q.Jpg:0", "a/1.png:1", "a/z/9.bmp:1", "a/zz/0.jpg:1",
		"b/.hidden.jpg:2", "b/A.JPEG:2", "b/x.jpg:2", "b/sub/a.webp:2", "b/sub/z/y.png:2"}
	assert.Equal(t, want, got)

	// The same tree through torchvision itself, where it is installed
	// (not under -short: starting it is most of the test's time).
	if _, err := exec.LookPath(pythonPeer); err != nil || testing.Short() {
		return
	}
	out, err := exec.Command(pythonPeer, "-c", `import sys, json
from torchvision.datasets import ImageFolder
ds = ImageFolder(sys.argv[1])
print(json.dumps(dict(classes=ds.classes, samples=[[p, c] for p, c in ds.samples])))`, root).Output()
	if err != nil {
		t.Logf("torchvision not importable: %v", err)
		return
	}
	var tv struct {
		Classes []string `json:"classes"`
		Samples [][2]any `json:"samples"`
	}
	require.NoError(t, json.Unmarshal(out, &tv))
	assert.Equal(t, tv.Classes, ds.Classes())
	require.Len(t, ds.Samples(), len(tv.Samples))
	for i, s := range ds.Samples() {
		assert.Equal(t, tv.Samples[i][0], s.Path)
		assert.EqualValues(t, tv.Samples[i][1], s.Label)
	}
}

const pythonPeer = "/usr/bin/python3"

// torchvisionSamples lists root with torchvision's ImageFolder: its
// samples as "path:label", or nil where torchvision is not importable,
// and under -short (starting it is most of a test's time).
func torchvisionSamples(t *testing.T, root string) []string {
	t.Helper()
	if _, err := exec.LookPath(pythonPeer); err != nil || testing.Short() {
		return nil
	}
	out, err := exec.Command(pythonPeer, "-c", `import sys
from torchvision.datasets import ImageFolder
for p, c in ImageFolder(sys.argv[1]).samples: print("%s:%d" % (p, c))`, root).Output()
	if err != nil {
		t.Logf("torchvision not importable: %v", err)
		return nil
	}
	return strings.Fields(string(out))
}

func samplePaths(ds *vision.Dataset) []string {
	var got []string
	for _, s := range ds.Samples() {
		got = append(got, s.Path+":"+strconv.Itoa(s.Label))
	}
	return got
}

// Links are followed as os.walk(followlinks=True) follows them: a folder
// reached through two links is listed under both, and paths keep the
// root's spelling, as os.path.join does.
func TestImageFolderFollowsTorchvisionThroughLinks(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need a privilege on Windows")
	}
	dir := t.TempDir()
	write(t, dir, "shared/s.jpg", "rgb420.jpg")
	write(t, dir, "data/cat/real/r.jpg", "rgb420.jpg")
	write(t, dir, "data/dog/d.png", "rgb.png")
	for link, target := range map[string]string{
		"data/cat/l1": "../../shared", "data/cat/l2": "../../shared", // one folder, two links
		"data/cat/l3": "real",   // a sibling folder
		"data/emu":    "dog",    // a class that is a link
		"data/dog/up": "../cat", // a link into another class
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, link)))
	}
	root := dir + "/./data/" // spelled as the user spelled it
	ds, err := vision.ImageFolder(root, vision.Eval(32))
	require.NoError(t, err)
	defer ds.Close()
	assert.Equal(t, []string{"cat", "dog", "emu"}, ds.Classes())
	want := []string{
		root + "cat/l1/s.jpg:0", root + "cat/l2/s.jpg:0", root + "cat/l3/r.jpg:0", root + "cat/real/r.jpg:0",
		root + "dog/d.png:1", root + "dog/up/l1/s.jpg:1", root + "dog/up/l2/s.jpg:1", root + "dog/up/l3/r.jpg:1", root + "dog/up/real/r.jpg:1",
		root + "emu/d.png:2", root + "emu/up/l1/s.jpg:2", root + "emu/up/l2/s.jpg:2", root + "emu/up/l3/r.jpg:2", root + "emu/up/real/r.jpg:2",
	}
	assert.Equal(t, want, samplePaths(ds))
	if tv := torchvisionSamples(t, root); tv != nil {
		assert.Equal(t, tv, samplePaths(ds), "torchvision's samples")
	}

	// A link back up is not followed (os.walk would list the folder again
	// under every longer path until the system refuses it).
	require.NoError(t, os.Symlink("..", filepath.Join(dir, "data/cat/real/back")))
	ds2, err := vision.ImageFolder(root, vision.Eval(32))
	require.NoError(t, err)
	defer ds2.Close()
	assert.Equal(t, want, samplePaths(ds2))
}

func newRand(i uint64) *rand.Rand { return rand.New(rand.NewPCG(i, 7)) }

func TestImageFolderErrors(t *testing.T) {
	t.Parallel()
	_, err := vision.ImageFolder(filepath.Join(t.TempDir(), "missing"), vision.Eval(32))
	assert.ErrorContains(t, err, "missing")
	assert.ErrorIs(t, err, os.ErrNotExist)

	empty := t.TempDir()
	_, err = vision.ImageFolder(empty, vision.Eval(32))
	assert.ErrorContains(t, err, "couldn't find any class folder in "+empty)

	root := t.TempDir()
	write(t, root, "a/1.jpg", "rgb420.jpg")
	write(t, root, "b/readme.txt", "text")
	_, err = vision.ImageFolder(root, vision.Eval(32))
	assert.ErrorContains(t, err, "found no valid file for the classes b")

	_, err = vision.New(nil, nil, vision.Transform{Size: -1})
	assert.ErrorContains(t, err, "Transform.Size")
	_, err = vision.New(nil, nil, vision.Transform{Scale: [2]float64{0.5, 0.1}})
	assert.ErrorContains(t, err, "Transform.Scale")
}

// Bad files surface as a *engine.SampleError naming the index, whose
// message names the file: never a crash, never a grey image.
func TestBadFilesAreSampleErrors(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(testdata, "rgb420.jpg"))
	require.NoError(t, err)
	corrupt := bytes.Clone(good)
	for i := len(corrupt) / 2; i < len(corrupt)/2+64; i++ {
		corrupt[i] = 0xff // markers in the middle of the entropy-coded data
	}
	pngGood, err := os.ReadFile(filepath.Join(testdata, "rgb.png"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		data []byte
		is   error
		msg  string
	}{
		{"text.jpg", []byte("not an image at all"), vision.ErrNotImage, "not an image"},
		{"empty.jpg", nil, vision.ErrNotImage, "empty file"},
		{"truncated.jpg", good[:len(good)/2], vision.ErrCorrupt, ""},
		{"header_only.jpg", good[:200], vision.ErrCorrupt, ""},
		{"corrupt.jpg", corrupt, vision.ErrCorrupt, ""},
		{"truncated.png", pngGood[:len(pngGood)/2], vision.ErrCorrupt, ""},
		{"bomb.jpg", jpegHeader(100000, 100000), vision.ErrTooManyPixels, "limit"},
		{"bomb.png", pngHeader(100000, 100000), vision.ErrTooManyPixels, "limit"},
		{"bomb.ppm", []byte("P6\n100000 100000\n255\n"), vision.ErrTooManyPixels, "limit"},
		{"truncated.ppm", []byte("P6\n4 4\n255\n\x01\x02\x03"), vision.ErrCorrupt, "ends early"},
		{"badsample.ppm", []byte("P3\n1 1\n10\n1 2 11\n"), vision.ErrCorrupt, "above maxval"},
	} {
		for _, dec := range []string{"auto", "go"} {
			t.Run(tc.name+"/"+dec, func(t *testing.T) {
				t.Setenv(vision.EnvJPEG, dec)
				vision.ResetDecoder()
				defer vision.ResetDecoder()
				root := t.TempDir()
				write(t, root, "a/0.jpg", "rgb420.jpg")
				p := filepath.Join(root, "a", "1_"+tc.name)
				require.NoError(t, os.WriteFile(p, tc.data, 0o644))
				ds, err := vision.ImageFolder(root, vision.Train(32), vision.Extensions(".jpg", ".png", ".ppm"))
				require.NoError(t, err)
				defer ds.Close()
				l, err := engine.New(ds, engine.Config{BatchSize: 2, Workers: 1})
				require.NoError(t, err)
				defer l.Close()
				var last error
				for _, err := range l.Epoch(context.Background(), 0) {
					last = err
				}
				var se *engine.SampleError
				require.ErrorAs(t, last, &se)
				assert.Equal(t, 1, se.Index)
				assert.ErrorContains(t, last, p)
				assert.ErrorIs(t, last, tc.is)
				assert.ErrorContains(t, last, tc.msg)
			})
		}
	}
	// A file that disappears after the folder was listed.
	root := folder(t)
	ds, err := vision.ImageFolder(root, vision.Eval(32))
	require.NoError(t, err)
	defer ds.Close()
	gone := ds.Samples()[0].Path
	require.NoError(t, os.Remove(gone))
	dst := make([]byte, 3*32*32*4)
	err = ds.Decode(gone, nil, dst)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.ErrorContains(t, err, gone)
}

// jpegHeader is the start of a baseline JPEG declaring w x h pixels.
func jpegHeader(w, h int) []byte {
	b := []byte{0xff, 0xd8, 0xff, 0xc0, 0, 17, 8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), 3,
		1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1}
	return append(b, 0xff, 0xd9)
}

// pngHeader is a PNG signature and IHDR declaring w x h RGB pixels.
func pngHeader(w, h int) []byte {
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr, uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 8, 2
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	binary.Write(&b, binary.BigEndian, uint32(13))
	b.WriteString("IHDR")
	b.Write(ihdr)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte("IHDR"), ihdr...)))
	return b.Bytes()
}

// A decompression bomb is refused from its header: almost nothing is
// allocated, whatever the decoder.
func TestPixelLimitBeforeAllocation(t *testing.T) {
	root := t.TempDir()
	bombs := []string{write(t, root, "a/bomb.jpg", string(jpegHeader(100000, 100000))),
		write(t, root, "a/bomb.png", string(pngHeader(100000, 100000))),
		write(t, root, "a/wide.jpg", string(jpegHeader(65535, 1))),
		write(t, root, "a/bomb.pgm", "P5\n100000 100000\n65535\n")}
	ds, err := vision.New(nil, nil, vision.Eval(32), vision.MaxPixels(60000))
	require.NoError(t, err)
	defer ds.Close()
	dst := make([]byte, 3*32*32*4)
	for _, p := range bombs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := ds.Decode(p, nil, dst)
		runtime.ReadMemStats(&after)
		assert.ErrorIs(t, err, vision.ErrTooManyPixels, p)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "%s: allocated before refusing", p)
	}
	// The limit applies to real images too; 0 means none.
	small, err := vision.New(nil, nil, vision.Eval(32), vision.MaxPixels(1000))
	require.NoError(t, err)
	defer small.Close()
	assert.ErrorIs(t, small.Decode(filepath.Join(testdata, "rgb420.jpg"), nil, dst), vision.ErrTooManyPixels)
	assert.ErrorIs(t, small.Decode(filepath.Join(testdata, "rgb.png"), nil, dst), vision.ErrTooManyPixels)
	none, err := vision.New(nil, nil, vision.Eval(32), vision.MaxPixels(0))
	require.NoError(t, err)
	defer none.Close()
	assert.NoError(t, none.Decode(filepath.Join(testdata, "rgb420.jpg"), nil, dst))
	huge := write(t, root, "a/huge.pbm", "P4\n9999999999 9999999999\n\x00\x01")
	assert.ErrorIs(t, none.Decode(huge, nil, dst), vision.ErrCorrupt, "no limit: the raster is checked without overflow")
}

func TestFileList(t *testing.T) {
	t.Parallel()
	root := folder(t)
	list := filepath.Join(root, "train.csv")
	require.NoError(t, os.WriteFile(list, []byte("path,label\ncat/rgb420.jpg,3\n\"dog/gray.jpg\",1\n"+
		filepath.Join(root, "emu", "cmyk.jpg")+",0\n"), 0o644))
	ds, err := vision.FileList(list, vision.Eval(32))
	require.NoError(t, err)
	defer ds.Close()
	assert.Equal(t, []vision.Sample{{filepath.Join(root, "cat/rgb420.jpg"), 3}, {filepath.Join(root, "dog/gray.jpg"), 1},
		{filepath.Join(root, "emu/cmyk.jpg"), 0}}, ds.Samples())

	txt := filepath.Join(t.TempDir(), "list.txt")
	require.NoError(t, os.WriteFile(txt, []byte("# name class\ncat/rgb420.jpg zebra\ndog/gray.jpg\tant\ncat/rgb.png zebra\n"), 0o644))
	ds2, err := vision.FileList(txt, vision.Eval(32), vision.Root(root))
	require.NoError(t, err)
	defer ds2.Close()
	assert.Equal(t, []string{"ant", "zebra"}, ds2.Classes())
	assert.Equal(t, []int{1, 0, 1}, []int{ds2.Samples()[0].Label, ds2.Samples()[1].Label, ds2.Samples()[2].Label})

	bad := filepath.Join(t.TempDir(), "bad.txt")
	require.NoError(t, os.WriteFile(bad, []byte("justapath\n"), 0o644))
	_, err = vision.FileList(bad, vision.Eval(32))
	assert.ErrorContains(t, err, "line 1")

	// JSONL: the same rows as JSON objects, integer labels or names.
	jsonl := filepath.Join(root, "train.jsonl")
	require.NoError(t, os.WriteFile(jsonl, []byte("\ufeff"+`{"path": "cat/rgb420.jpg", "label": 3}`+"\n"+`{"label": 1, "path": "dog/gray.jpg"}`+"\n"), 0o644))
	ds3, err := vision.FileList(jsonl, vision.Eval(32))
	require.NoError(t, err)
	defer ds3.Close()
	assert.Equal(t, []vision.Sample{{filepath.Join(root, "cat/rgb420.jpg"), 3}, {filepath.Join(root, "dog/gray.jpg"), 1}}, ds3.Samples())
	require.NoError(t, os.WriteFile(jsonl, []byte(`{"path": "cat/rgb420.jpg", "label": "zebra"}`+"\n"+`{"path": "dog/gray.jpg", "label": "ant"}`+"\n"), 0o644))
	ds4, err := vision.FileList(jsonl, vision.Eval(32))
	require.NoError(t, err)
	defer ds4.Close()
	assert.Equal(t, []string{"ant", "zebra"}, ds4.Classes())
	for _, label := range []string{"null", "1.5", "true", `""`, `{"id": 1}`} {
		require.NoError(t, os.WriteFile(jsonl, []byte(`{"path": "cat/rgb420.jpg", "label": 0}`+"\n"+`{"path": "dog/gray.jpg", "label": `+label+"}\n"), 0o644))
		_, err := vision.FileList(jsonl, vision.Eval(32))
		assert.ErrorContains(t, err, "line 2: label "+label, label)
	}
	require.NoError(t, os.WriteFile(jsonl, []byte(`{"file": "cat/rgb420.jpg", "label": 0}`+"\n"), 0o644))
	_, err = vision.FileList(jsonl, vision.Eval(32))
	assert.ErrorContains(t, err, "line 1")
}

// Every extension ImageFolder takes by default (torchvision's
// IMG_EXTENSIONS) has a decoder: the files it lists are never refused as
// not an image. The goldens check their pixels.
func TestEveryIMGExtensionDecodes(t *testing.T) {
	t.Parallel()
	ds, err := vision.New(nil, nil, vision.Eval(32))
	require.NoError(t, err)
	defer ds.Close()
	dst := make([]byte, 3*32*32*4)
	for _, ext := range vision.IMGExtensions {
		like := map[string]string{".jpeg": ".jpg", ".tiff": ".tif"}[ext]
		files, _ := filepath.Glob(filepath.Join(testdata, "*"+cmp.Or(like, ext)))
		require.NotEmpty(t, files, ext)
		for _, f := range files {
			assert.NoError(t, ds.Decode(f, nil, dst), f)
		}
	}
}

// A bad setting names its field.
func TestTransformErrorsNameTheField(t *testing.T) {
	t.Parallel()
	nan := float32(math.NaN())
	for field, tr := range map[string]vision.Transform{
		"Size":       {Size: -1},
		"ResizeSize": {ResizeSize: -3},
		"Scale":      {Train: true, Scale: [2]float64{0.5, math.Inf(1)}},
		"Ratio":      {Train: true, Ratio: [2]float64{2, 1}},
		"Mean":       {Mean: [3]float32{0.5, nan, 0.5}, Std: [3]float32{1, 1, 1}},
		"Std":        {Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{1, 0, 1}},
		"Output":     {Output: 9},
		"Mode":       {Mode: 5},
	} {
		_, err := vision.New(nil, nil, tr)
		assert.ErrorContains(t, err, "vision: Transform."+field+":", field)
	}
}

// A header is told from a first sample by its label and its path: a list
// of class names without a header keeps its first line, and a header
// works in either form.
func TestFileListHeaders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "n0144_1", "rgb420.jpg")
	for _, tc := range []struct {
		name, list string
		want       []vision.Sample
		classes    []string
	}{
		{"names.csv", "a.jpg,cat\nb.jpg,dog\n", []vision.Sample{{"a.jpg", 0}, {"b.jpg", 1}}, []string{"cat", "dog"}},
		{"names_header.csv", "\ufeffpath,class\na.jpg,cat\nb.jpg,dog\n", []vision.Sample{{"a.jpg", 0}, {"b.jpg", 1}}, []string{"cat", "dog"}},
		{"one.csv", "a.jpg,cat\n", []vision.Sample{{"a.jpg", 0}}, []string{"cat"}},
		{"index_header.csv", "image.path,label\na.jpg,3\nb.jpg,1\n", []vision.Sample{{"a.jpg", 3}, {"b.jpg", 1}}, nil},
		{"index_header.txt", "path label\na.jpg 3\nb.jpg 1\n", []vision.Sample{{"a.jpg", 3}, {"b.jpg", 1}}, nil},
		{"names.txt", "a.jpg zebra\nb.jpg ant\n", []vision.Sample{{"a.jpg", 1}, {"b.jpg", 0}}, []string{"ant", "zebra"}},
		{"no_ext.txt", "n0144_1 tench\nn0144_2 tench\n", []vision.Sample{{"n0144_1", 0}, {"n0144_2", 0}}, []string{"tench"}}, // the first is a file
	} {
		p := filepath.Join(dir, tc.name)
		require.NoError(t, os.WriteFile(p, []byte(tc.list), 0o644))
		ds, err := vision.FileList(p, vision.Eval(32))
		require.NoError(t, err, tc.name)
		for i := range tc.want {
			tc.want[i].Path = filepath.Join(dir, tc.want[i].Path)
		}
		assert.Equal(t, tc.want, ds.Samples(), tc.name)
		assert.Equal(t, tc.classes, ds.Classes(), tc.name)
		ds.Close()
	}
	for _, tc := range []struct{ list, msg string }{
		{"a.jpg,0\nb.jpg,\n", "line 2"},
		{"a.jpg,0\n,1\n", "line 2"},
		{"a.jpg,0\n\n# c\nb.jpg,-1\n", "line 4: b.jpg has label -1"},
	} {
		p := filepath.Join(dir, "bad.csv")
		require.NoError(t, os.WriteFile(p, []byte(tc.list), 0o644))
		_, err := vision.FileList(p, vision.Eval(32))
		assert.ErrorContains(t, err, tc.msg, "%q", tc.list)
		assert.ErrorContains(t, err, p)
	}
}

// Batches are bit for bit the same for any worker count: the crop and flip
// come from the slot's RNG.
func TestBatchesIdenticalForAnyWorkers(t *testing.T) {
	t.Parallel()
	root := folder(t)
	for _, tr := range []vision.Transform{vision.Train(48), {Train: true, Size: 40, Output: vision.BFloat16CHW, Mode: vision.Fast}} {
		ds, err := vision.ImageFolder(root, tr)
		require.NoError(t, err)
		var ref [][]byte
		for w := range 5 {
			l, err := engine.New(ds, engine.Config{BatchSize: 5, Shuffle: true, Seed: 7, Workers: w})
			require.NoError(t, err)
			var got [][]byte
			for b, err := range l.Epoch(context.Background(), 1) {
				require.NoError(t, err)
				got = append(got, bytes.Clone(b.Tensor("image").Bytes()), bytes.Clone(b.Tensor("label").Bytes()))
			}
			require.NoError(t, l.Close())
			if w == 0 {
				ref = got
				continue
			}
			assert.Equal(t, ref, got, "workers %d", w)
		}
		require.NoError(t, ds.Close())
	}
}

// Fast mode against Exact on real photos: PSNR >= 40 dB where no DCT
// scaling applies (the fast IDCT, box upsampling of the chroma and the
// 16-bit resampling), >= 35 dB
// where it does.
func TestFastModePSNR(t *testing.T) {
	t.Parallel()
	photos, _ := filepath.Glob("/usr/share/backgrounds/mate/nature/*.jpg")
	if len(photos) == 0 {
		t.Skip("no mate-backgrounds photos (scripts/install-deps.sh installs them)")
	}
	exact, err := vision.New(nil, nil, vision.Transform{Train: true, Size: 160, Output: vision.Uint8HWC, Mode: vision.Exact})
	require.NoError(t, err)
	defer exact.Close()
	fast, err := vision.New(nil, nil, vision.Transform{Train: true, Size: 160, Output: vision.Uint8HWC, Mode: vision.Fast})
	require.NoError(t, err)
	defer fast.Close()
	a, b := make([]byte, 160*160*3), make([]byte, 160*160*3)
	var full, scaled diffStats
	for i, p := range photos[:4] {
		w, h := imageSize(t, p)
		for k := range 4 {
			g := vision.Train(160).Geometry(w, h, newRand(uint64(10*i+k)))
			require.NoError(t, exact.DecodeGeometry(p, g, a))
			require.NoError(t, fast.DecodeGeometry(p, g, b))
			scaled.add(b, a)
			// the same crop from a quarter of the photo: no DCT scaling
			g = vision.Geometry{Box: vision.Box{X: g.Box.X / 4, Y: g.Box.Y / 4, W: 100 + k*20, H: 90 + k*25}, ResizeW: 160, ResizeH: 160, Size: 160, Flip: k%2 == 0}
			require.NoError(t, exact.DecodeGeometry(p, g, a))
			require.NoError(t, fast.DecodeGeometry(p, g, b))
			full.add(b, a)
		}
	}
	t.Logf("fast vs exact: DCT-scaled %v; full scale %v", scaled, full)
	assert.GreaterOrEqual(t, scaled.psnr(), 35.0)
	assert.GreaterOrEqual(t, full.psnr(), 40.0)
}

func TestDecoderReport(t *testing.T) {
	d := vision.JPEGDecoderInfo()
	assert.NotEmpty(t, d.Reason)
	t.Setenv(vision.EnvJPEGLib, "/nonexistent/libjpeg.so.62")
	vision.ResetDecoder()
	defer vision.ResetDecoder()
	d = vision.JPEGDecoderInfo()
	assert.False(t, d.Turbo())
	assert.Contains(t, d.String(), "go (")
	if vision.CgoEnabled {
		assert.Contains(t, d.Reason, "/nonexistent/libjpeg.so.62")
	} else {
		assert.Contains(t, d.Reason, "built without cgo")
	}
	t.Setenv(vision.EnvJPEG, "turbo")
	vision.ResetDecoder()
	_, err := vision.New(nil, nil, vision.Eval(32))
	assert.ErrorContains(t, err, "TENSORBATCH_JPEG=turbo")
}

// The libjpeg-turbo path allocates nothing per image once warm.
func TestNoAllocationPerImage(t *testing.T) {
	if !vision.JPEGDecoderInfo().Turbo() {
		t.Skip("libjpeg-turbo not loaded")
	}
	for _, mode := range []vision.Mode{vision.Exact, vision.Fast} {
		ds, err := vision.New(nil, nil, vision.Transform{Train: true, Size: 64, Mode: mode})
		require.NoError(t, err)
		dst := make([]byte, 3*64*64*4)
		p := filepath.Join(testdata, "rgb420.jpg")
		rng := newRand(1)
		require.NoError(t, ds.Decode(p, rng, dst))
		allocs := testing.AllocsPerRun(50, func() {
			if err := ds.Decode(p, rng, dst); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "%s", mode)
		ds.Close()
	}
}

func TestSchemaAndOutputs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		out   vision.Output
		dtype collate.DType
		shape []int
	}{
		{vision.Float32CHW, collate.Float32, []int{3, 24, 24}},
		{vision.Float16CHW, collate.Float16, []int{3, 24, 24}},
		{vision.BFloat16CHW, collate.BFloat16, []int{3, 24, 24}},
		{vision.Uint8HWC, collate.Uint8, []int{24, 24, 3}},
		{vision.Uint8CHW, collate.Uint8, []int{3, 24, 24}},
	} {
		ds, err := vision.New(nil, nil, vision.Transform{Size: 24, Output: tc.out}, vision.FieldNames("x", "y"))
		require.NoError(t, err)
		s := ds.Schema()
		assert.Equal(t, collate.Field{Name: "x", DType: tc.dtype, Shape: tc.shape}, s[0], "%v", tc.out)
		assert.Equal(t, collate.Field{Name: "y", DType: collate.Int64}, s[1])
		ds.Close()
	}
	_, err := vision.New(nil, nil, vision.Eval(24), vision.FieldNames("x", "x"))
	assert.Error(t, err)
}
