package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/internal/s3test"
	"github.com/tensorbatch/tensorbatch/shards"
)

// imageFolder makes an ImageFolder tree of classes × per images of
// random sizes (JPEG, and a PNG a class), plus a file that is not an
// image and a JPEG cut short, and returns its root and the good images'
// paths by class.
func imageFolder(t *testing.T, classes, per int) (string, map[string][]string) {
	t.Helper()
	root := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	good := map[string][]string{}
	for c := range classes {
		name := fmt.Sprintf("class%d", c)
		require.NoError(t, os.MkdirAll(filepath.Join(root, name), 0o755))
		for i := range per {
			w, h := 40+r.IntN(200), 40+r.IntN(200)
			img := image.NewRGBA(image.Rect(0, 0, w, h))
			for y := range h {
				for x := range w {
					img.Set(x, y, color.RGBA{uint8(x * c), uint8(y + i), uint8(r.IntN(256)), 255})
				}
			}
			var buf bytes.Buffer
			ext := ".jpg"
			if i == 0 {
				ext = ".png"
				require.NoError(t, png.Encode(&buf, img))
			} else {
				require.NoError(t, jpeg.Encode(&buf, img, &jpeg.Options{Quality: 80}))
			}
			p := filepath.Join(root, name, fmt.Sprintf("img%03d%s", i, ext))
			require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
			good[name] = append(good[name], p)
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "class0", "notes.jpg"), []byte("not a jpeg"), 0o644))
	cutClass := fmt.Sprintf("class%d", min(1, classes-1))
	whole, err := os.ReadFile(good[cutClass][1])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, cutClass, "cut.jpg"), whole[:len(whole)/2], 0o644))
	return root, good
}

// tarMembersPy prints each member of the tars given, in order, as
// "shard name size sha256", with Python's tarfile, an independent reader.
const tarMembersPy = `
import hashlib, os, sys, tarfile
for path in sys.argv[1:]:
    with tarfile.open(path) as tf:
        for m in tf:
            data = tf.extractfile(m).read()
            print(os.path.basename(path), m.name, m.size, hashlib.sha256(data).hexdigest())
`

// The tars that shards write makes are read by Python's tarfile: every
// good image, byte for byte, with its class's label, in the order of the
// shard list; the bad files are left out and reported; the list's counts
// are right; and ls, inspect and verify agree.
func TestShardsWriteTarsReadByPython(t *testing.T) {
	ctx := context.Background()
	root, good := imageFolder(t, 3, 7)
	out := filepath.Join(t.TempDir(), "shards")
	code, stdout, stderr := tb(t, ctx, "shards", "write", root, "--out", out, "--shard-size", "20KiB", "--json")
	require.Equal(t, 0, code, stderr)
	var res writeResult
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	assert.Equal(t, 21, res.Samples)
	assert.Greater(t, res.Shards, 2)
	assert.Equal(t, []string{"class0", "class1", "class2"}, res.Classes)
	require.Len(t, res.Bad, 2)
	assert.ElementsMatch(t, []string{filepath.Join(root, "class0", "notes.jpg"), filepath.Join(root, "class1", "cut.jpg")}, []string{res.Bad[0].Path, res.Bad[1].Path})

	// The images by content, with their labels and extensions.
	want := map[string]string{} // sha256 → "label ext"
	for c, paths := range good {
		for _, p := range paths {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			sum := sha256.Sum256(data)
			ext := strings.TrimPrefix(filepath.Ext(p), ".")
			want[hex.EncodeToString(sum[:])] = fmt.Sprintf("%c %s", c[len(c)-1], ext)
		}
	}
	var tars []string
	for _, s := range res.ShardSet {
		tars = append(tars, filepath.Join(out, s.Name))
	}
	lines := strings.Split(strings.TrimSpace(python(t, tarMembersPy, tars...)), "\n")
	require.Len(t, lines, 2*21, "an image and a cls a sample")
	perShard := map[string]int{}
	for i := 0; i < len(lines); i += 2 {
		cls, img := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		key := strings.TrimSuffix(cls[1], ".cls")
		assert.Equal(t, fmt.Sprintf("%09d", i/2), key, "keys are the samples' positions")
		assert.True(t, strings.HasPrefix(img[1], key+"."), "%v: the image follows its cls", img)
		label, ok := want[img[3]]
		require.True(t, ok, "%v is one of the good images", img)
		ext := strings.TrimPrefix(img[1], key+".")
		assert.Equal(t, label, fmt.Sprintf("%s %s", labelOf(t, tars, cls), ext))
		delete(want, img[3])
		perShard[cls[0]]++
	}
	assert.Empty(t, want, "every good image is written once")
	for _, s := range res.ShardSet {
		assert.Equal(t, perShard[s.Name], s.Samples, s.Name)
	}

	code, stdout, _ = tb(t, ctx, "shards", "ls", out+"/", "--json")
	require.Equal(t, 0, code)
	assert.Contains(t, stdout, `"samples": 21`)
	code, stdout, _ = tb(t, ctx, "shards", "inspect", filepath.Join(out, "shardlist.json"), "--json")
	require.Equal(t, 0, code)
	var in struct {
		Samples int
		Labels  map[string]int
		Fields  map[string]struct{ Count int }
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &in))
	assert.Equal(t, 21, in.Samples)
	assert.Equal(t, map[string]int{"0": 7, "1": 7, "2": 7}, in.Labels)
	assert.Equal(t, 18, in.Fields["jpg"].Count)
	assert.Equal(t, 3, in.Fields["png"].Count)
	code, stdout, _ = tb(t, ctx, "shards", "verify", out+"/")
	assert.Equal(t, 0, code, stdout)
	assert.Contains(t, stdout, "21 samples in")
	assert.Contains(t, stdout, ", 0 bad")
}

// labelOf returns the label of a "shard name size sum" line of a .cls
// member, read from the tar.
func labelOf(t *testing.T, tars []string, cls []string) string {
	t.Helper()
	for _, p := range tars {
		if filepath.Base(p) != cls[0] {
			continue
		}
		f, err := os.Open(p)
		require.NoError(t, err)
		defer f.Close()
		tr := tar.NewReader(f)
		for {
			h, err := tr.Next()
			require.NoError(t, err)
			if h.Name == cls[1] {
				b, err := io.ReadAll(tr)
				require.NoError(t, err)
				return string(b)
			}
		}
	}
	t.Fatalf("no shard %s", cls[0])
	return ""
}

// torchReadPy loads the shards with PyTorch's DataLoader (2 workers), as
// a PyTorch user would, and prints the labels and image sizes it got.
const torchReadPy = `
import io, json, sys, tarfile
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

class Shards(IterableDataset):
    def __init__(self, paths): self.paths = paths
    def __iter__(self):
        info = get_worker_info()
        mine = self.paths if info is None else self.paths[info.id::info.num_workers]
        for p in mine:
            with tarfile.open(p) as tf:
                sample = {}
                for m in tf:
                    key, ext = m.name.split('.', 1)
                    sample[ext] = tf.extractfile(m).read()
                    if 'cls' in sample and len(sample) == 2:
                        img = next(v for k, v in sample.items() if k != 'cls')
                        yield int(sample['cls']), len(img)
                        sample = {}

got = [(int(l), int(n)) for l, n in DataLoader(Shards(sys.argv[1:]), batch_size=None, num_workers=2)]
print(json.dumps(sorted(got)))
`

// PyTorch's DataLoader, over the same tars, gets every sample.
func TestShardsWriteTarsReadByPyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("the PyTorch peer: slow; go test without -short runs it")
	}
	if exec.Command("/usr/bin/python3", "-c", "import torch").Run() != nil {
		if os.Getenv("CI") != "" && os.Getenv("TB_NO_TORCH") == "" {
			t.Fatal("PyTorch is missing (scripts/install-deps.sh installs python3-torch)")
		}
		t.Skip("PyTorch is missing")
	}
	root, good := imageFolder(t, 2, 5)
	out := t.TempDir()
	code, _, stderr := tb(t, context.Background(), "shards", "write", root, "--out", out, "--shard-size", "10KiB")
	require.Equal(t, 0, code, stderr)
	tars, err := filepath.Glob(filepath.Join(out, "*.tar"))
	require.NoError(t, err)
	var got [][2]int
	require.NoError(t, json.Unmarshal([]byte(python(t, torchReadPy, tars...)), &got))
	var want [][2]int
	for c, name := range []string{"class0", "class1"} {
		for _, p := range good[name] {
			fi, err := os.Stat(p)
			require.NoError(t, err)
			want = append(want, [2]int{c, int(fi.Size())})
		}
	}
	slices.SortFunc(want, func(a, b [2]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return a[1] - b[1]
	})
	assert.Equal(t, want, got)
}

// hyparquetRowsJS prints the rows of a Parquet file with hyparquet, a
// JavaScript reader: key, image bytes' sha256, path, label.
const hyparquetRowsJS = `
import { parquetReadObjects, asyncBufferFromFile } from 'hyparquet'
import { createHash } from 'node:crypto'
const file = await asyncBufferFromFile(process.argv[1])
for (const r of await parquetReadObjects({ file, utf8: false })) {
  const key = Buffer.from(r.__key__).toString()
  const sum = createHash('sha256').update(Buffer.from(r.image.bytes)).digest('hex')
  console.log(JSON.stringify({ key, sum, path: Buffer.from(r.image.path).toString(), label: Number(r.label) }))
}
`

// Parquet shards in Hugging Face's layout are read by hyparquet, a
// JavaScript Parquet reader: every good image with its label.
func TestShardsWriteParquetReadByHyparquet(t *testing.T) {
	if testing.Short() {
		t.Skip("the hyparquet peer: slow; go test without -short runs it")
	}
	dir := npmDir(t, "hyparquet")
	root, good := imageFolder(t, 2, 6)
	out := t.TempDir()
	code, stdout, stderr := tb(t, context.Background(), "shards", "write", root, "--out", out, "--format", "parquet", "--shard-size", "30KiB", "--json")
	require.Equal(t, 0, code, stderr)
	var res writeResult
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	want := map[string]int{}
	for c, name := range []string{"class0", "class1"} {
		for _, p := range good[name] {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			sum := sha256.Sum256(data)
			want[hex.EncodeToString(sum[:])] = c
		}
	}
	n := 0
	for _, s := range res.ShardSet {
		cmd := exec.Command("node", "--input-type=module", "-e", hyparquetRowsJS, filepath.Join(out, s.Name))
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", b)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var row struct {
				Key, Sum, Path string
				Label          int
			}
			require.NoError(t, json.Unmarshal([]byte(line), &row), line)
			assert.Equal(t, fmt.Sprintf("%09d", n), row.Key)
			label, ok := want[row.Sum]
			require.True(t, ok, "%+v is a good image", row)
			assert.Equal(t, label, row.Label)
			assert.True(t, strings.HasPrefix(row.Path, row.Key+"."), row.Path)
			delete(want, row.Sum)
			n++
		}
	}
	assert.Empty(t, want)
	assert.Equal(t, 12, n)

	// inspect and verify read them as the loader does: the label column
	// found without --label, every image decodable.
	code, stdout, stderr = tb(t, context.Background(), "shards", "inspect", out+"/", "--json")
	require.Equal(t, 0, code, stderr)
	var in struct {
		Samples     int
		Labels      map[string]int
		LabelMember string `json:"label_member"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &in))
	assert.Equal(t, 12, in.Samples)
	assert.Equal(t, map[string]int{"0": 6, "1": 6}, in.Labels)
	assert.Equal(t, "label", in.LabelMember)
	code, stdout, _ = tb(t, context.Background(), "shards", "verify", out+"/", "--decode")
	assert.Equal(t, 0, code, stdout)
	assert.Contains(t, stdout, "12 samples in")
}

// The output is the same bytes for any --workers, and for the same seed;
// another seed shuffles otherwise.
func TestShardsWriteIsDeterministic(t *testing.T) {
	root, _ := imageFolder(t, 3, 6)
	digest := func(args ...string) string {
		out := t.TempDir()
		code, _, stderr := tb(t, context.Background(), append([]string{"shards", "write", root, "--out", out, "--shard-size", "15KiB"}, args...)...)
		require.Equal(t, 0, code, stderr)
		h := sha256.New()
		files, err := filepath.Glob(filepath.Join(out, "*"))
		require.NoError(t, err)
		for _, f := range files {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
			h.Write(data)
		}
		return hex.EncodeToString(h.Sum(nil))
	}
	assert.Equal(t, digest("--workers", "1"), digest("--workers", "4"))
	a := digest("--shuffle", "--seed", "3", "--workers", "1")
	assert.Equal(t, a, digest("--shuffle", "--seed", "3", "--workers", "3"))
	assert.NotEqual(t, a, digest("--shuffle", "--seed", "4"))
	assert.NotEqual(t, a, digest())
}

// --resize re-encodes every image as a JPEG whose shorter side is at
// most N, keeping its aspect ratio; smaller ones keep their size.
func TestShardsWriteResize(t *testing.T) {
	root, _ := imageFolder(t, 2, 4)
	out := t.TempDir()
	code, _, stderr := tb(t, context.Background(), "shards", "write", root, "--out", out, "--resize", "64", "--quality", "85")
	require.Equal(t, 0, code, stderr)
	tars, _ := filepath.Glob(filepath.Join(out, "*.tar"))
	n := 0
	for _, p := range tars {
		f, err := os.Open(p)
		require.NoError(t, err)
		tr := tar.NewReader(f)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			if !strings.HasSuffix(h.Name, ".jpg") {
				assert.True(t, strings.HasSuffix(h.Name, ".cls"), h.Name)
				continue
			}
			cfg, format, err := image.DecodeConfig(tr)
			require.NoError(t, err)
			assert.Equal(t, "jpeg", format)
			assert.LessOrEqual(t, min(cfg.Width, cfg.Height), 64, h.Name)
			n++
		}
		f.Close()
	}
	assert.Equal(t, 8, n)
}

// verify finds a corrupt image, a missing label and a shard list that
// miscounts, names each by shard and key, and exits 1; write, cancelled,
// leaves no shard behind; a bad flag exits 2.
func TestShardsVerifyFindsBadSamples(t *testing.T) {
	ctx := context.Background()
	root, good := imageFolder(t, 1, 3)
	data, err := os.ReadFile(good["class0"][1])
	require.NoError(t, err)
	dir := t.TempDir()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	member := func(name string, b []byte) {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b))}))
		_, err := tw.Write(b)
		require.NoError(t, err)
	}
	member("a.jpg", data)
	member("a.cls", []byte("0"))
	member("b.jpg", data[:len(data)-100]) // cut: no EOI
	member("b.cls", []byte("1"))
	member("c.jpg", data) // no label
	require.NoError(t, tw.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "s-0.tar"), buf.Bytes(), 0o644))
	code, stdout, _ := tb(t, ctx, "shards", "verify", filepath.Join(dir, "s-{0..0}.tar"))
	assert.Equal(t, 1, code, stdout)
	assert.Contains(t, stdout, "s-0.tar\tb\t")
	assert.Contains(t, stdout, "corrupt")
	assert.Contains(t, stdout, "s-0.tar\tc\t")
	assert.Contains(t, stdout, "3 samples in 1 shards, 2 bad")
	code, stdout, _ = tb(t, ctx, "shards", "verify", filepath.Join(dir, "s-{0..0}.tar"), "--records-only")
	assert.Equal(t, 0, code, stdout)
	assert.Contains(t, stdout, "3 samples in 1 shards, 0 bad")

	list := `{"__kind__": "wids-shard-index-v1", "wids_version": 1, "shardlist": [{"url": "s-0.tar", "nsamples": 4}]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shardlist.json"), []byte(list), 0o644))
	code, stdout, _ = tb(t, ctx, "shards", "verify", filepath.Join(dir, "shardlist.json"), "--json")
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout, "listed with 4")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	out := t.TempDir()
	code, _, stderr := tb(t, cancelled, "shards", "write", root, "--out", out)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "interrupted")
	left, _ := filepath.Glob(filepath.Join(out, "*"))
	assert.Empty(t, left, "an interrupted write leaves nothing")

	code, _, stderr = tb(t, ctx, "shards", "write", root, "--out", out, "--format", "zip")
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "--format")
}

// shards write --out s3://... puts each shard as it is complete, then
// the shardlist.json and classes.json: the bucket ends with the files a
// local --out gets, byte for byte, and the temporary folder is gone.
func TestShardsWriteToObjectStore(t *testing.T) {
	if testing.Short() {
		t.Skip("the S3 emulator: slow; go test without -short runs it")
	}
	root, _ := imageFolder(t, 3, 6)
	local := t.TempDir()
	code, _, stderr := tb(t, context.Background(), "shards", "write", root, "--out", local, "--shard-size", "15KiB")
	require.Equal(t, 0, code, stderr)
	want, err := filepath.Glob(filepath.Join(local, "*"))
	require.NoError(t, err)
	require.Greater(t, len(want), 3)

	srv := s3test.ForTest(t)
	srv.Setenv(t)
	require.NoError(t, srv.CreateBucket("data"))
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	code, _, stderr = tb(t, context.Background(), "shards", "write", root, "--out", "s3://data/train", "--shard-size", "15KiB")
	require.Equal(t, 0, code, stderr)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "the temporary folder is removed")

	o := &shards.Opener{}
	defer o.CloseIdleConnections()
	for _, p := range want {
		r, err := o.Open(context.Background(), "s3://data/train/"+filepath.Base(p))
		require.NoError(t, err)
		got, err := io.ReadAll(r)
		r.Close()
		require.NoError(t, err)
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, data, got, filepath.Base(p))
	}
	code, stdout, stderr := tb(t, context.Background(), "shards", "verify", "s3://data/train/")
	require.Equal(t, 0, code, stdout+stderr)
	assert.Contains(t, stdout, "18 samples")
}

// A folder is read as every shard in it, so write refuses an --out that
// holds shards (here more than this write would make, which would be
// left beside its shardlist.json and read with them), and leaves them as
// they are; a write into an empty folder of it goes on.
func TestShardsWriteRefusesAnOutputWithShards(t *testing.T) {
	ctx := context.Background()
	root, _ := imageFolder(t, 2, 4)
	out := t.TempDir()
	code, _, stderr := tb(t, ctx, "shards", "write", root, "--out", out, "--shard-size", "1B")
	require.Equal(t, 0, code, stderr)
	before, err := filepath.Glob(filepath.Join(out, "*"))
	require.NoError(t, err)
	list, err := os.ReadFile(filepath.Join(out, "shardlist.json"))
	require.NoError(t, err)

	for _, args := range [][]string{{}, {"--format", "parquet"}, {"--prefix", "other"}} {
		code, stdout, stderr := tb(t, ctx, append([]string{"shards", "write", root, "--out", out}, args...)...)
		assert.Equal(t, 2, code, "%v: %s%s", args, stdout, stderr)
		assert.Contains(t, stderr, "already holds")
		after, err := filepath.Glob(filepath.Join(out, "*"))
		require.NoError(t, err)
		assert.Equal(t, before, after, "%v", args)
		again, err := os.ReadFile(filepath.Join(out, "shardlist.json"))
		require.NoError(t, err)
		assert.Equal(t, string(list), string(again))
	}
	code, _, stderr = tb(t, ctx, "shards", "write", root, "--out", filepath.Join(out, "sub"))
	assert.Equal(t, 0, code, stderr)
}

// The size --shard-size reads: a unit's multiple, at least a byte (less
// would be 0, the Writer's default of 256 MiB) that an int64 holds.
func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{"1": 1, "1.5KiB": 3 << 9, "256MiB": 256 << 20, " 2 GB": 2e9, "1B": 1} {
		got, err := parseBytes(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"0", "-1", "0.5", "0.5B", "Inf", "NaN", "1e30", "1e19GiB", "1mib", "MiB", ""} {
		_, err := parseBytes(s)
		assert.Error(t, err, s)
		code, _, stderr := tb(t, context.Background(), "shards", "write", t.TempDir(), "--out", t.TempDir(), "--shard-size", s)
		assert.Equal(t, 2, code, "%q: %s", s, stderr)
		assert.Contains(t, stderr, "--shard-size")
	}
}

// writeImage writes an image of w×h in format (jpeg, png or gif) to path.
func writeImage(t *testing.T, path, format string, w, h int) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	var buf bytes.Buffer
	switch format {
	case "jpeg":
		require.NoError(t, jpeg.Encode(&buf, img, nil))
	case "png":
		require.NoError(t, png.Encode(&buf, img))
	case "gif":
		require.NoError(t, gif.Encode(&buf, img, nil))
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
}

// An image is written as the member of its format, whatever its file is
// called (no extension, another one, the wrong one), so the loader finds
// it and a Parquet shard takes it; a GIF, which the loader does not read,
// is left out.
func TestShardsWriteNamesMembersByFormat(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeImage(t, filepath.Join(dir, "photo"), "jpeg", 30, 20)
	writeImage(t, filepath.Join(dir, "x.jpg.bak"), "png", 20, 30)
	writeImage(t, filepath.Join(dir, "p.jpg"), "png", 25, 25)
	writeImage(t, filepath.Join(dir, "a.gif"), "gif", 25, 25)
	list := filepath.Join(dir, "list.csv")
	require.NoError(t, os.WriteFile(list, []byte("photo,0\nx.jpg.bak,1\np.jpg,2\na.gif,3\n"), 0o644))
	for _, format := range []string{"tar", "parquet"} {
		out := t.TempDir()
		code, stdout, stderr := tb(t, ctx, "shards", "write", list, "--out", out, "--format", format, "--json")
		require.Equal(t, 0, code, "%s: %s", format, stderr)
		var res writeResult
		require.NoError(t, json.Unmarshal([]byte(stdout), &res))
		assert.Equal(t, 3, res.Samples, format)
		require.Len(t, res.Bad, 1, format)
		assert.Equal(t, filepath.Join(dir, "a.gif"), res.Bad[0].Path)
		code, stdout, _ = tb(t, ctx, "shards", "inspect", out+"/", "--json")
		require.Equal(t, 0, code)
		var in struct {
			Fields map[string]struct{ Count int }
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &in))
		assert.Equal(t, 1, in.Fields["jpg"].Count, format)
		assert.Equal(t, 2, in.Fields["png"].Count, format)
		code, stdout, _ = tb(t, ctx, "shards", "verify", out+"/", "--decode")
		assert.Equal(t, 0, code, "%s: %s", format, stdout)
	}
}

// A JSONL list reads as a CSV one does: relative paths from its folder,
// integer labels as they are, names numbered in sorted order, a BOM
// skipped; a negative label, or one that is neither an integer nor a
// name, is an error naming its line, never a label the loader refuses
// or 0.
func TestShardsWriteJSONLLabels(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeImage(t, filepath.Join(dir, "imgs", "a.jpg"), "jpeg", 20, 20)
	writeImage(t, filepath.Join(dir, "imgs", "b.png"), "png", 20, 20)
	write := func(lines string) (int, writeResult, string) {
		list := filepath.Join(dir, "list.jsonl")
		require.NoError(t, os.WriteFile(list, []byte(lines), 0o644))
		code, stdout, stderr := tb(t, ctx, "shards", "write", list, "--out", t.TempDir(), "--json")
		var res writeResult
		if code == 0 {
			require.NoError(t, json.Unmarshal([]byte(stdout), &res))
		}
		return code, res, stderr
	}
	code, res, stderr := write("\ufeff" + `{"path": "imgs/a.jpg", "label": 3}` + "\n" + `{"path": "imgs/b.png", "label": 0}` + "\n")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, 2, res.Samples)
	assert.Empty(t, res.Classes)
	code, res, stderr = write(`{"path": "imgs/a.jpg", "label": "dog"}` + "\n" + `{"path": "imgs/b.png", "label": "cat"}` + "\n")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, []string{"cat", "dog"}, res.Classes)
	for _, label := range []string{"-1", "null", "1.5", "true", `{"id": 1}`} {
		code, _, stderr := write(`{"path": "imgs/a.jpg", "label": 0}` + "\n" + `{"path": "imgs/b.png", "label": ` + label + "}\n")
		assert.Equal(t, 1, code, label)
		assert.Contains(t, stderr, "list.jsonl: line 2", label)
	}
}

// A write that leaves every image out, or lists none, fails (exit 1)
// and leaves no shard list naming no shard.
func TestShardsWriteNothingToWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "c"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c", "x.jpg"), []byte("not a jpeg"), 0o644))
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	for _, src := range []string{dir, empty} {
		out := t.TempDir()
		code, stdout, stderr := tb(t, ctx, "shards", "write", src, "--out", out)
		assert.Equal(t, 1, code, "%s: %s", src, stdout)
		assert.NotEmpty(t, stderr)
		left, err := filepath.Glob(filepath.Join(out, "*"))
		require.NoError(t, err)
		assert.Empty(t, left, src)
	}
}

// Command lines that cannot work exit 2 before any work, naming what is
// wrong: a missing or empty --out, one that cannot be written (HTTP, a
// scheme no store has), a --prefix with a folder in it, --workers below
// 1 for verify (which hung at 0 and panicked below), an unknown
// subcommand (which printed the help and exited 0), shards larger than
// S3 takes. A file:// --out is that folder, not one called "file:".
func TestShardsCommandLineErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_REGION": "us-east-1"} {
		t.Setenv(k, v) // no store is reached
	}
	root, _ := imageFolder(t, 1, 2)
	t.Chdir(t.TempDir()) // a mistaken relative folder would land here
	shardsDir := t.TempDir()
	code, _, stderr := tb(t, ctx, "shards", "write", root, "--out", shardsDir)
	require.Equal(t, 0, code, stderr)
	for _, args := range [][]string{
		{"shards", "write", root},
		{"shards", "write", root, "--out", ""},
		{"shards", "write", root, "--out", "https://example.com/train/"},
		{"shards", "write", root, "--out", "ftp://example.com/train/"},
		{"shards", "write", root, "--out", t.TempDir(), "--prefix", "a/b"},
		{"shards", "write", root, "--out", "s3://bucket/train/", "--shard-size", "5GiB"}, // not after a shard of 5 GiB
		{"shards", "verify", shardsDir + "/", "--workers", "0"},
		{"shards", "verify", shardsDir + "/", "--workers", "-1"},
		{"shards", "wrte", root},
	} {
		code, stdout, stderr := tb(t, ctx, args...)
		assert.Equal(t, 2, code, "%q: %s%s", args, stdout, stderr)
		assert.Contains(t, stderr, "usage", "%q", args)
	}
	left, err := os.ReadDir(".")
	require.NoError(t, err)
	assert.Empty(t, left, "no folder made for a URL")

	out := filepath.Join(t.TempDir(), "by url")
	code, _, stderr = tb(t, ctx, "shards", "write", root, "--out", (&url.URL{Scheme: "file", Path: out}).String())
	require.Equal(t, 0, code, stderr)
	assert.FileExists(t, filepath.Join(out, "shardlist.json"))
	left, err = os.ReadDir(".")
	require.NoError(t, err)
	assert.Empty(t, left)

	// An error of the system's that says "invalid argument" is not a
	// usage error.
	assert.False(t, isUsage(&fs.PathError{Op: "mkdir", Path: "x", Err: syscall.EINVAL}))
}

// inOrder hands results over in order and holds memory for its window,
// not for n: a stream longer than any slice runs, and stops at done's
// error.
func TestInOrder(t *testing.T) {
	stop := errors.New("stop")
	var got []int
	err := inOrder(context.Background(), math.MaxInt, 3, func(i int) (int, error) { return i * i, nil }, func(i, v int) error {
		got = append(got, v)
		if len(got) == 100 {
			return stop
		}
		return nil
	})
	assert.ErrorIs(t, err, stop)
	for i, v := range got {
		assert.Equal(t, i*i, v)
	}
	got = nil
	err = inOrder(context.Background(), 3, 64, func(i int) (int, error) { return i, nil }, func(_, v int) error {
		got = append(got, v)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2}, got)
}

// To an object store as to a folder: a prefix that holds shards already
// is refused, before any work, and left as it is; a bucket's root
// (s3://bucket/) is the bucket's, not a local folder named "s3:".
func TestShardsWriteToObjectStoreRefusesShards(t *testing.T) {
	if testing.Short() {
		t.Skip("the S3 emulator: slow; go test without -short runs it")
	}
	ctx := context.Background()
	root, _ := imageFolder(t, 2, 4)
	srv := s3test.ForTest(t)
	srv.Setenv(t)
	require.NoError(t, srv.CreateBucket("data"))
	t.Chdir(t.TempDir())
	code, _, stderr := tb(t, ctx, "shards", "write", root, "--out", "s3://data/", "--shard-size", "1B")
	require.Equal(t, 0, code, stderr)
	left, err := os.ReadDir(".")
	require.NoError(t, err)
	assert.Empty(t, left, "nothing written here")
	code, stdout, stderr := tb(t, ctx, "shards", "ls", "s3://data/", "--json")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, `"samples": 8`)

	require.NoError(t, srv.Put("data", "stale/shard-000009.tar", nil)) // a stopped write's: shards, no list
	for _, out := range []string{"s3://data/", "s3://data/stale/"} {
		code, _, stderr = tb(t, ctx, "shards", "write", root, "--out", out)
		assert.Equal(t, 2, code, stderr)
		assert.Contains(t, stderr, "already holds")
	}
	code, stdout, stderr = tb(t, ctx, "shards", "ls", "s3://data/", "--json")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, `"samples": 8`)
}

// verify calls a GIF bad, under any member name: the command links
// image/gif (its plots do), so Check takes one here, but a training
// program that links only the loader refuses it.
func TestShardsVerifyRefusesGIF(t *testing.T) {
	dir := t.TempDir()
	writeImage(t, filepath.Join(dir, "a.gif"), "gif", 16, 16)
	data, err := os.ReadFile(filepath.Join(dir, "a.gif"))
	require.NoError(t, err)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, b := range map[string][]byte{"a.jpg": data, "a.cls": []byte("0")} {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b))}))
		_, err := tw.Write(b)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "s.tar"), buf.Bytes(), 0o644))
	code, stdout, stderr := tb(t, context.Background(), "shards", "verify", filepath.Join(dir, "s.tar"))
	assert.Equal(t, 1, code, stdout+stderr)
	assert.Contains(t, stdout, "s.tar\ta\t")
	assert.Contains(t, stdout, "1 bad")
}

// A shard that cannot even be counted (garbage, a tar cut inside a
// header) is listed as bad, and the other shards are still read; --json
// still prints the report.
func TestShardsVerifyGoesOnPastABrokenShard(t *testing.T) {
	ctx := context.Background()
	root, _ := imageFolder(t, 2, 3)
	out := filepath.Join(t.TempDir(), "out")
	code, _, stderr := tb(t, ctx, "shards", "write", root, "--out", out, "--shard-size", "1KiB")
	require.Equal(t, 0, code, stderr)
	tars, err := filepath.Glob(filepath.Join(out, "*.tar"))
	require.NoError(t, err)
	require.Greater(t, len(tars), 2)
	whole, err := os.ReadFile(tars[1])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(tars[1], whole[:300], 0o644)) // cut inside its first header's data
	require.NoError(t, os.Remove(filepath.Join(out, "shardlist.json")))
	code, stdout, stderr := tb(t, ctx, "shards", "verify", out+"/", "--json")
	require.Equal(t, 1, code, stderr)
	var rep struct {
		Shards, Samples int
		Bad             []badSample
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	assert.Equal(t, len(tars), rep.Shards)
	assert.Equal(t, len(tars)-1, rep.Samples, "one sample a shard, the broken one's not read")
	require.Len(t, rep.Bad, 1)
	assert.Equal(t, tars[1], rep.Bad[0].Shard)
	assert.Empty(t, rep.Bad[0].Key)
}
