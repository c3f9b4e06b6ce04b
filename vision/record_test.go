package vision_test

import (
	"archive/tar"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
	"github.com/tensorbatch/tensorbatch/internal/recycle"
	"github.com/tensorbatch/tensorbatch/shards"
	"github.com/tensorbatch/tensorbatch/vision"
)

// member is one file of a tar shard.
type member struct {
	name string
	data []byte
}

// writeTar writes a tar of members at path.
func writeTar(t testing.TB, path string, members []member) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	w := tar.NewWriter(f)
	for _, m := range members {
		require.NoError(t, w.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg}))
		_, err := w.Write(m.data)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
}

// folderShard writes the samples of ds, in index order, as one WebDataset
// shard, with the image and label members under the aliases Record takes:
// .jpg and .jpeg, .png; .cls, .label, and .json with "label" or "cls".
func folderShard(t testing.TB, ds *vision.Dataset, path string) {
	var ms []member
	for i, s := range ds.Samples() {
		key := fmt.Sprintf("sample%04d", i)
		data, err := os.ReadFile(s.Path)
		require.NoError(t, err)
		ext := strings.TrimPrefix(filepath.Ext(s.Path), ".")
		if ext == "jpg" && i%2 == 1 {
			ext = "jpeg"
		}
		ms = append(ms, member{key + ".txt", []byte("a caption")}, member{key + "." + ext, data})
		switch i % 4 {
		case 0:
			ms = append(ms, member{key + ".cls", fmt.Appendf(nil, "%d\n", s.Label)})
		case 1:
			ms = append(ms, member{key + ".label", fmt.Appendf(nil, "%d", s.Label)})
		case 2:
			ms = append(ms, member{key + ".json", fmt.Appendf(nil, `{"label": %d, "caption": "x"}`, s.Label)})
		case 3:
			ms = append(ms, member{key + ".json", fmt.Appendf(nil, `{"cls": %d}`, s.Label)})
		}
	}
	writeTar(t, path, ms)
}

// A WebDataset shard of a folder's files, decoded by Record through
// shards.New, FromIterable and a Loader, gives ImageFolder's batches bit
// for bit: every Mode and Output, train and eval, the member aliases.
func TestRecordMatchesImageFolder(t *testing.T) {
	t.Parallel()
	root := folder(t)
	shard := filepath.Join(t.TempDir(), "train-0000.tar")
	for k, tr := range allTransforms() {
		name := fmt.Sprintf("train=%v/%v/%v", tr.Train, tr.Mode, tr.Output)
		ds, err := vision.ImageFolder(root, tr)
		require.NoError(t, err)
		if k == 0 {
			folderShard(t, ds, shard)
		}
		p, err := vision.NewPipeline(tr)
		require.NoError(t, err)
		src, err := shards.New(context.Background(), shard, p.Schema(), p.Record("jpg", "cls"))
		require.NoError(t, err)
		stream, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{})
		require.NoError(t, err)
		require.Equal(t, ds.Len(), stream.Len())

		cfg := engine.Config{BatchSize: 5, Seed: 5, Workers: 2}
		want, wantIdx := epochBytes(t, ds, cfg, 2)
		got, gotIdx := epochBytes(t, stream, cfg, 2)
		require.Equal(t, wantIdx, gotIdx, "%s: the stream's indices are the folder's", name)
		require.Len(t, got, len(want), name)
		for i := range want {
			require.Equal(t, want[i], got[i], "%s: batch %d, field %d differs", name, i/2, i%2)
		}
		require.NoError(t, p.Close())
		require.NoError(t, ds.Close())
	}
}

// recordSlot decodes rec with p.Record(image, label) into a fresh slot,
// returning the label written.
func recordSlot(t testing.TB, p *vision.Pipeline, image, label string, rec engine.Record) (int64, error) {
	s := newSlot(t, p)
	err := p.Record(image, label)(context.Background(), rec, s)
	return collate.As[int64](s.Tensor("label"))[0], err
}

// newSlot returns a slot of one sample of p's schema.
func newSlot(t testing.TB, p *vision.Pipeline) *engine.Slot {
	layout, err := collate.NewLayout(p.Schema(), 1)
	require.NoError(t, err)
	return enginetest.NewSlot(1, 0, 0, layout, make([]byte, layout.Size()), 0)
}

// TestRecordMembers: Record takes the members it is named, else the
// first image and label members a record has, and refuses a missing or
// malformed one naming the shard, key and member; CheckRecord refuses
// each record Record refuses, before it decodes, in the same words.
func TestRecordMembers(t *testing.T) {
	t.Parallel()
	jpg, err := os.ReadFile(filepath.Join(testdata, "rgb420.jpg"))
	require.NoError(t, err)
	png, err := os.ReadFile(filepath.Join(testdata, "rgb.png"))
	require.NoError(t, err)
	webp, err := os.ReadFile(filepath.Join(testdata, "lossless.webp"))
	require.NoError(t, err)
	p, err := vision.NewPipeline(vision.Train(16))
	require.NoError(t, err)
	defer p.Close()

	for _, tc := range []struct {
		name         string
		image, label string
		fields       map[string]string
		want         int64
		errs         []string // the error contains each
	}{
		{"jpg cls", "jpg", "cls", map[string]string{"jpg": string(jpg), "cls": " 3\n"}, 3, nil},
		{"jpeg for jpg", "jpg", "cls", map[string]string{"jpeg": string(jpg), "cls": "4"}, 4, nil},
		{"png for jpg", "jpg", "cls", map[string]string{"png": string(png), "cls": "1"}, 1, nil},
		{"webp", "jpg", "cls", map[string]string{"webp": string(webp), "cls": "2"}, 2, nil},
		{"the named member first", "png", "cls", map[string]string{"jpg": "not an image", "png": string(png), "cls": "0"}, 0, nil},
		{"label for cls", "jpg", "cls", map[string]string{"jpg": string(jpg), "label": "5"}, 5, nil},
		{"json label", "jpg", "cls", map[string]string{"jpg": string(jpg), "json": `{"label": 6}`}, 6, nil},
		{"json cls", "jpg", "cls", map[string]string{"jpg": string(jpg), "json": `{"cls": 7, "label": 8}`}, 7, nil},
		{"json named key", "jpg", "y", map[string]string{"jpg": string(jpg), "json": `{"y": 9, "label": 8}`}, 9, nil},
		{"json named member", "jpg", "json", map[string]string{"jpg": string(jpg), "cls": "1", "json": `{"label": 8}`}, 8, nil},
		{"cls before json", "jpg", "", map[string]string{"jpg": string(jpg), "cls": "1", "json": `{"label": 8}`}, 1, nil},
		{"largest label", "jpg", "cls", map[string]string{"jpg": string(jpg), "cls": "9223372036854775807"}, 1<<63 - 1, nil},

		{"no image", "jpg", "cls", map[string]string{"cls": "1", "txt": "x"}, 0, []string{"no .jpg member", "jpeg, png", "it has .cls, .txt"}},
		{"no label", "jpg", "cls", map[string]string{"jpg": string(jpg)}, 0, []string{"no .cls member", "cls, label, json", "it has .jpg"}},
		{"cls not a number", "jpg", "cls", map[string]string{"jpg": string(jpg), "cls": "cat"}, 0, []string{".cls", `"cat" is not a decimal integer`}},
		{"cls empty", "jpg", "cls", map[string]string{"jpg": string(jpg), "cls": ""}, 0, []string{".cls", "not a decimal integer"}},
		{"negative", "jpg", "cls", map[string]string{"jpg": string(jpg), "cls": "-1"}, 0, []string{".cls", "label -1, want >= 0"}},
		{"past int64", "jpg", "cls", map[string]string{"jpg": string(jpg), "cls": "9223372036854775808"}, 0, []string{".cls", "outside int64"}},
		{"json malformed", "jpg", "cls", map[string]string{"jpg": string(jpg), "json": `{"label": 1`}, 0, []string{".json", "not a JSON object"}},
		{"json not an object", "jpg", "cls", map[string]string{"jpg": string(jpg), "json": `[1]`}, 0, []string{".json", "not a JSON object"}},
		{"json no key", "jpg", "cls", map[string]string{"jpg": string(jpg), "json": `{"x": 1}`}, 0, []string{".json", `no key "cls", "label"`, `has "x"`}},
		{"json float", "jpg", "cls", map[string]string{"jpg": string(jpg), "json": `{"label": 1.5}`}, 0, []string{".json", `key "label"`, "not a decimal integer"}},
		{"json string", "jpg", "cls", map[string]string{"jpg": string(jpg), "json": `{"label": "3"}`}, 0, []string{".json", "not a decimal integer"}},
		{"json negative", "jpg", "cls", map[string]string{"jpg": string(jpg), "json": `{"label": -2}`}, 0, []string{".json", "want >= 0"}},
		{"corrupt image", "jpg", "cls", map[string]string{"jpg": string(jpg[:len(jpg)-40]), "cls": "1"}, 0, []string{".jpg", "truncated or corrupt"}},
		{"not an image", "jpg", "cls", map[string]string{"jpg": "hello", "cls": "1"}, 0, []string{".jpg", "not an image"}},
	} {
		rec := engine.Record{Key: "dir/key01", Shard: "s3://bucket/train-0007.tar", Fields: map[string][]byte{}}
		for ext, b := range tc.fields {
			rec.Fields[ext] = []byte(b)
		}
		got, err := recordSlot(t, p, tc.image, tc.label, rec)
		cerr := p.CheckRecord(rec, tc.image, tc.label) // refuses what Record refuses, saying the same
		if tc.errs == nil {
			if assert.NoError(t, err, tc.name) {
				assert.Equal(t, tc.want, got, tc.name)
			}
			assert.NoError(t, cerr, tc.name)
			continue
		}
		for _, err := range []error{err, cerr} {
			if assert.Error(t, err, tc.name) {
				for _, s := range append([]string{"vision: s3://bucket/train-0007.tar: sample \"dir/key01\""}, tc.errs...) {
					assert.ErrorContains(t, err, s, tc.name)
				}
				assert.NotContains(t, err.Error(), "vision: vision:", tc.name)
			}
		}
	}
	_, err = recordSlot(t, p, "jpg", "cls", engine.Record{Key: "k", Shard: "s", Fields: map[string][]byte{"jpg": jpg[:len(jpg)-40], "cls": []byte("1")}})
	assert.ErrorIs(t, err, vision.ErrCorrupt)

	closed, err := vision.NewPipeline(vision.Eval(16))
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	_, err = recordSlot(t, closed, "jpg", "cls", engine.Record{Key: "k", Shard: "s", Fields: map[string][]byte{"jpg": jpg, "cls": []byte("1")}})
	assert.ErrorIs(t, err, fs.ErrClosed)
}

// Record tells the shard reader that called it that it kept none of the
// record's bytes (so a shards.Source may read later records into them),
// once it has decoded the record; a failed record is not released.
func TestRecordReleasesTheRecord(t *testing.T) {
	t.Parallel()
	jpg, err := os.ReadFile(filepath.Join(testdata, "rgb420.jpg"))
	require.NoError(t, err)
	p, err := vision.NewPipeline(vision.Eval(16))
	require.NoError(t, err)
	defer p.Close()
	s := newSlot(t, p)
	for _, tc := range []struct {
		image string
		ok    bool
	}{{string(jpg), true}, {"not an image", false}} {
		ctx := &recycle.Context{Context: context.Background()}
		err := p.Record("jpg", "cls")(ctx, engine.Record{Key: "k", Shard: "s", Fields: map[string][]byte{"jpg": []byte(tc.image), "cls": []byte("1")}}, s)
		assert.Equal(t, tc.ok, err == nil, "%v", err)
		assert.Equal(t, tc.ok, ctx.Released())
	}
}

// A bad record in a shard fails its sample in the loader, with the
// shard, key and member named.
func TestRecordErrorsThroughTheLoader(t *testing.T) {
	t.Parallel()
	jpg, err := os.ReadFile(filepath.Join(testdata, "rgb420.jpg"))
	require.NoError(t, err)
	p, err := vision.NewPipeline(vision.Eval(16))
	require.NoError(t, err)
	defer p.Close()
	for i, tc := range []struct {
		bad []member
		msg string
	}{
		{[]member{{"b.jpg", jpg}, {"b.cls", []byte("zero")}}, `sample "b": .cls: label "zero" is not a decimal integer`},
		{[]member{{"b.cls", []byte("1")}}, `sample "b" has no .jpg member`},
		{[]member{{"b.jpeg", jpg[:len(jpg)-40]}, {"b.json", []byte(`{"label": 1}`)}}, `sample "b": .jpeg: vision: truncated or corrupt image`},
	} {
		shard := filepath.Join(t.TempDir(), fmt.Sprintf("bad-%d.tar", i))
		writeTar(t, shard, append([]member{{"a.jpg", jpg}, {"a.cls", []byte("0")}}, tc.bad...))
		src, err := shards.New(context.Background(), shard, p.Schema(), p.Record("jpg", "cls"))
		require.NoError(t, err)
		stream, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{})
		require.NoError(t, err)
		l, err := engine.New(stream, engine.Config{BatchSize: 1})
		require.NoError(t, err)
		var got error
		for _, err := range l.Epoch(context.Background(), 0) {
			if err != nil {
				got = err
				break
			}
		}
		require.NoError(t, l.Close())
		assert.ErrorContains(t, got, shard+": "+tc.msg)
	}
}
