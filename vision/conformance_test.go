package vision_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
	"github.com/tensorbatch/tensorbatch/vision"
)

// conformImages are the images of the conformance folders, dealt to the
// classes cat, dog and emu in turn: every decoder path (baseline,
// progressive and restart JPEGs, CMYK, grey, PNG with palette, alpha and
// 16 bits, odd sizes).
func conformImages() []string {
	files := []string{"rgb420.jpg", "gray.jpg", "cmyk.jpg", "progressive.jpg", "restart.jpg", "rgb.png",
		"palette.png", "gray16.png", "rgba.png", "rgb422_odd.jpg", "rgb444_tall.jpg", "gray.png"}
	if testing.Short() {
		return files[:6]
	}
	return files
}

// conformFolder writes the conformance folder into a new temporary
// folder, each image's bytes as replace gives them for its path ("cat/
// rgb420.jpg"), and returns its root and paths.
func conformFolder(t testing.TB, replace map[string]string) (string, []string) {
	root := t.TempDir()
	var rels []string
	for i, f := range conformImages() {
		rel := []string{"cat", "dog", "emu"}[i%3] + "/" + f
		src := f
		if r, ok := replace[rel]; ok {
			src = r
		}
		write(t, root, rel, src)
		rels = append(rels, rel)
	}
	return root, rels
}

// closed closes ds at the end of t.
func closed(t testing.TB, ds *vision.Dataset, err error) *vision.Dataset {
	t.Helper()
	require.NoError(t, err)
	t.Cleanup(func() { ds.Close() })
	return ds
}

// The conformance suite passes on every way a Dataset is made:
// ImageFolder, FileList and New, each in a new folder every time the
// suite makes it again (a resumed job's dataset in another place). Each
// Other has New's Len and Schema, so only its fingerprint refuses New's
// state: one image replaced by another of another size (ImageFolder), the
// Fast mode (FileList), another ResizeSize (New).
func TestDatasetsConform(t *testing.T) {
	train := vision.Train(16)
	fast := train
	fast.Mode = vision.Fast
	eval := vision.Eval(16)
	resized := eval
	resized.ResizeSize = 24

	folder := func(replace map[string]string) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			root, _ := conformFolder(t, replace)
			ds, err := vision.ImageFolder(root, train)
			require.NoError(t, err)
			return ds
		}
	}
	list := func(tr vision.Transform) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			root, rels := conformFolder(t, nil)
			var b strings.Builder
			b.WriteString("path,label\n")
			for _, rel := range rels {
				fmt.Fprintf(&b, "%s,%s\n", rel, strings.Split(rel, "/")[0])
			}
			p := filepath.Join(root, "train.csv")
			require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
			ds, err := vision.FileList(p, tr)
			require.NoError(t, err)
			return ds
		}
	}
	samples := func(tr vision.Transform) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			root, rels := conformFolder(t, nil)
			var smp []vision.Sample
			for i, rel := range rels {
				smp = append(smp, vision.Sample{Path: filepath.Join(root, rel), Label: i % 3})
			}
			ds, err := vision.New(smp, []string{"cat", "dog", "emu"}, tr)
			require.NoError(t, err)
			return ds
		}
	}
	for _, tc := range []struct {
		name       string
		new, other func(testing.TB) engine.Dataset
	}{
		{"ImageFolder", folder(nil), folder(map[string]string{"cat/rgb420.jpg": "gray.jpg"})},
		{"FileList", list(train), list(fast)},
		{"New", samples(eval), samples(resized)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enginetest.TestDataset(t, enginetest.Case{New: tc.new, Other: tc.other})
		})
	}
}

// resumeOn returns engine.New's error for b resuming a state of a.
func resumeOn(t *testing.T, a, b engine.Dataset) error {
	t.Helper()
	cfg := engine.Config{BatchSize: 2, Backend: "cpu"}
	l, err := engine.New(a, cfg)
	require.NoError(t, err)
	st := l.State()
	require.NoError(t, l.Close())
	cfg.Resume = &st
	l, err = engine.New(b, cfg)
	if err == nil {
		require.NoError(t, l.Close())
	}
	return err
}

// A state is refused for a Dataset whose transform differs in any setting
// that changes the pixels, naming it, also where the schema is the same.
func TestFingerprintNamesTheTransform(t *testing.T) {
	root, _ := conformFolder(t, nil)
	with := func(tr vision.Transform, opts ...vision.Option) *vision.Dataset {
		ds, err := vision.ImageFolder(root, tr, opts...)
		return closed(t, ds, err)
	}
	train := vision.Train(16)
	edit := func(base vision.Transform, f func(*vision.Transform)) vision.Transform {
		f(&base)
		return base
	}
	for _, tc := range []struct {
		key      string
		was, now vision.Transform
	}{
		{"transform", train, vision.Eval(16)},
		{"size", vision.Transform{Size: 16, Output: vision.Uint8HWC}, vision.Transform{Size: 3, Output: vision.Uint8HWC}}, // the schema differs too
		{"scale", train, edit(train, func(t *vision.Transform) { t.Scale = [2]float64{0.5, 1} })},
		{"ratio", train, edit(train, func(t *vision.Transform) { t.Ratio = [2]float64{1, 1} })},
		{"flip", train, edit(train, func(t *vision.Transform) { t.NoFlip = true })},
		{"mode", train, edit(train, func(t *vision.Transform) { t.Mode = vision.Fast })},
		{"mean", train, edit(train, func(t *vision.Transform) { t.Mean[1] = 0.5 })},
		{"std", train, edit(train, func(t *vision.Transform) { t.Std = [3]float32{0.5, 0.5, 0.5} })},
		{"resize_size", vision.Eval(16), edit(vision.Eval(16), func(t *vision.Transform) { t.ResizeSize = 16 })},
		{"output", vision.Transform{Size: 3, Output: vision.Uint8HWC}, vision.Transform{Size: 3, Output: vision.Uint8CHW}}, // both [3 3 3] uint8
	} {
		err := resumeOn(t, with(tc.was), with(tc.now))
		require.Error(t, err, tc.key)
		if tc.key == "size" {
			assert.ErrorContains(t, err, "Config.Resume: Schema", "the schema is checked first")
			continue
		}
		assert.ErrorContains(t, err, "Config.Resume: Dataset", tc.key)
		assert.ErrorContains(t, err, "dataset.vision."+tc.key+":", tc.key)
	}
	// What does not change a loaded sample's pixels does not refuse.
	assert.NoError(t, resumeOn(t, with(train), with(train, vision.MaxPixels(1<<20), vision.MaxFileBytes(1<<20))))
	assert.NoError(t, resumeOn(t, with(edit(train, func(t *vision.Transform) { t.ResizeSize = 99 })), with(train)),
		"a training transform does not resize first")

	f := with(train).Fingerprint()
	assert.Equal(t, vision.JPEGDecoderInfo().Name, f["vision.decoder"])
	assert.Equal(t, "image,label", f["vision.fields"])
	p, err := vision.NewPipeline(train)
	require.NoError(t, err)
	defer p.Close()
	for k, v := range p.Fingerprint() {
		assert.Equal(t, v, f[k], "a Dataset records its Pipeline's %s", k)
	}
}

// A Dataset's identity is its files' names relative to the folder they
// share, their labels and sizes, and its classes: a state is refused for
// a file renamed, resized or relabelled and for a class renamed, and
// resumes the same tree copied elsewhere. The stated limit: no image is
// read, so an image replaced by one of the same size is not seen.
func TestFingerprintNamesTheFiles(t *testing.T) {
	train := vision.Train(16)
	folder := func(replace map[string]string) *vision.Dataset {
		root, _ := conformFolder(t, replace)
		ds, err := vision.ImageFolder(root, train)
		return closed(t, ds, err)
	}
	base := folder(nil)
	same := folder(nil) // another temporary folder
	assert.NoError(t, resumeOn(t, base, same), "the same tree elsewhere")

	refused := func(key string, other *vision.Dataset) {
		t.Helper()
		require.Equal(t, base.Len(), other.Len())
		err := resumeOn(t, base, other)
		require.Error(t, err, key)
		assert.ErrorContains(t, err, "Config.Resume: Dataset")
		assert.ErrorContains(t, err, "dataset.vision."+key+":")
	}
	refused("files", folder(map[string]string{"dog/gray.jpg": "rgb420.jpg"})) // another size

	root, rels := conformFolder(t, nil)
	require.NoError(t, os.Rename(filepath.Join(root, rels[0]), filepath.Join(root, "cat", "zz.jpg")))
	renamed, err := vision.ImageFolder(root, train)
	refused("files", closed(t, renamed, err))

	root, _ = conformFolder(t, nil)
	require.NoError(t, os.Rename(filepath.Join(root, "cat"), filepath.Join(root, "cow"))) // still the first class
	classes, err := vision.ImageFolder(root, train)
	refused("classes", closed(t, classes, err))

	relabelled := make([]vision.Sample, base.Len())
	copy(relabelled, same.Samples())
	relabelled[0].Label = 2
	other, err := vision.New(relabelled, same.Classes(), train)
	refused("files", closed(t, other, err))
	copy(relabelled, same.Samples())
	other, err = vision.New(relabelled, same.Classes(), train)
	assert.NoError(t, resumeOn(t, base, closed(t, other, err)), "New with ImageFolder's samples and classes")

	// The limit: the same size under the same name.
	root, rels = conformFolder(t, nil)
	p := filepath.Join(root, rels[1])
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(p, b, 0o644))
	edited, err := vision.ImageFolder(root, train)
	assert.NoError(t, resumeOn(t, base, closed(t, edited, err)), "an image edited in place, its size kept, is not seen")
}
