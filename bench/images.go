package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/vision"
)

// The image rows of make bench (issue 10): real JPEGs from disk to the
// batch. Per core, in one run and interleaved so that the ratios hold on
// a noisy machine: TurboJPEG's full decode (C), PIL's decode, torchvision's
// transforms in a plain loop, and tensorbatch's transforms (Workers 0).
// Then the loaders: tensorbatch against PyTorch's DataLoader + ImageFolder
// at several worker counts.

type imageOpts struct {
	dir        string
	count      int
	hiresCount int
	workers    string
	rounds     int
	skip       bool
	noSources  bool
}

var imgOpts imageOpts

// registerImageFlags adds the image bench's flags to fs.
func registerImageFlags(fs *flag.FlagSet) {
	fs.StringVar(&imgOpts.dir, "images", "", "ImageFolder of JPEGs for the image rows; empty: <out>/imagenet-like-<n>, made by scripts/make_imagenet_like.py")
	fs.IntVar(&imgOpts.count, "image-count", 1000, "JPEGs the image rows make and use (quick: 200)")
	fs.StringVar(&imgOpts.workers, "image-workers", "0,1,2,4", "worker counts of the image loader table (quick: 0,2)")
	fs.IntVar(&imgOpts.hiresCount, "hires-count", 200, "JPEGs of the high-resolution per-core rows (make_imagenet_like.py --hires; quick: 24, no peer); 0 skips them")
	fs.IntVar(&imgOpts.rounds, "image-rounds", 3, "interleaved rounds of the per-core image table (quick: 1)")
	fs.BoolVar(&imgOpts.skip, "no-images", false, "skip the image rows (the source and high-resolution rows too)")
	fs.BoolVar(&imgOpts.noSources, "no-sources", false, "skip the rows of the images as tar and Parquet shards, local and S3")
}

// imageRate is one per-core measurement.
type imageRate struct {
	Name   string    `json:"name"`
	Rates  []float64 `json:"images_per_s"` // one per round
	Median float64   `json:"median_images_per_s"`
	Note   string    `json:"note,omitempty"`
}

// imageLoaderRow is one loader at one worker count.
type imageLoaderRow struct {
	Loader      string  `json:"loader"`
	Workers     int     `json:"workers"`
	ImagesPerS  float64 `json:"images_per_s"` // the second epoch, wall time
	FirstBatchS float64 `json:"first_batch_s"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
}

type imageBench struct {
	hires    bool   // the high-resolution set: per core only
	onlyDir  bool   // make or find the folder, measure nothing (the source rows alone)
	skipped  string // why the rows are missing
	dir      string
	n        int
	decoder  string
	rates    []imageRate
	ratios   map[string][]float64 // per round: ours ÷ baseline in the same round
	loaders  []imageLoaderRow
	elapsed  time.Duration
	hasPeer  bool
	peerNote string
}

const imageSize = 224

func (ib *imageBench) run(o *options, p *peer) error {
	t0 := time.Now()
	defer func() { ib.elapsed = time.Since(t0) }()
	if imgOpts.skip {
		ib.skipped = "-no-images"
		return nil
	}
	count, workers, rounds := imgOpts.count, imgOpts.workers, imgOpts.rounds
	if o.quick {
		count, workers, rounds = min(count, 200), "0,2", 1
	}
	set, args := "imagenet-like", []string{}
	if ib.hires {
		// Per core only: the loaders are the ImageNet-like rows' business.
		count, workers, set, args = imgOpts.hiresCount, "", "hires", []string{"--hires"}
		if o.quick {
			count = min(count, 24)
		}
		if count <= 0 {
			ib.skipped = "-hires-count 0"
			return nil
		}
	}
	if !ib.hires {
		ib.dir = imgOpts.dir
	}
	if ib.dir == "" {
		ib.dir = filepath.Join(o.out, fmt.Sprintf("%s-%d", set, count))
		script := filepath.Join(repoRoot(), "scripts", "make_imagenet_like.py")
		if out, err := exec.Command(peerPython, append([]string{script, ib.dir, "-n", strconv.Itoa(count)}, args...)...).CombinedOutput(); err != nil {
			ib.skipped = fmt.Sprintf("%s could not make the JPEG folder (Debian's python3-pil and mate-backgrounds, from scripts/install-deps.sh): %v: %s",
				script, err, bytes.TrimSpace(out))
			return nil
		}
	}
	if ib.onlyDir {
		return nil
	}
	ds, err := vision.ImageFolder(ib.dir, vision.Train(imageSize))
	if err != nil {
		return err
	}
	defer ds.Close()
	ib.n = ds.Len()
	ib.decoder = ds.DecoderInfo().String()
	if p != nil && o.peer != "off" && !(ib.hires && o.quick) {
		ib.hasPeer = true
	}
	var ws []int
	for _, f := range splitInts(workers) {
		ws = append(ws, f)
	}
	// The loaders first, so that the per-core table's images in memory do
	// not count in tensorbatch's peak RSS.
	if o.peer != "only" {
		for _, w := range ws {
			row, err := ib.ourLoader(ds, w)
			if err != nil {
				return err
			}
			ib.loaders = append(ib.loaders, row)
		}
	}
	if ib.hasPeer {
		for _, w := range ws {
			var out struct {
				ImagesPerS  float64 `json:"images_per_s"`
				FirstBatchS float64 `json:"first_batch_s"`
				PeakRSSMB   float64 `json:"peak_rss_mb"`
				Version     string  `json:"version"`
			}
			if err := peerImages(&out, "loader", ib.dir, "--workers", strconv.Itoa(w)); err != nil {
				return err
			}
			ib.loaders = append(ib.loaders, imageLoaderRow{Loader: "pytorch " + out.Version, Workers: w, ImagesPerS: out.ImagesPerS,
				FirstBatchS: out.FirstBatchS, PeakRSSMB: out.PeakRSSMB})
		}
	}
	return ib.perCore(ds, rounds, o.peer != "only")
}

func splitInts(s string) []int {
	var out []int
	for _, f := range bytes.Split([]byte(s), []byte(",")) {
		if v, err := strconv.Atoi(string(bytes.TrimSpace(f))); err == nil && v >= 0 {
			out = append(out, v)
		}
	}
	return out
}

// ourLoader runs three epochs of the training transform through a Loader.
func (ib *imageBench) ourLoader(ds *vision.Dataset, w int) (imageLoaderRow, error) {
	return loaderRow(ds, engine.Config{BatchSize: 32, Shuffle: true, DropLast: true, Workers: w})
}

// peerImages runs scripts/peer_images.py and decodes its JSON into out.
func peerImages(out any, args ...string) error { return peerJSON("peer_images.py", out, args...) }

// peerJSON runs scripts/<name> and decodes its JSON into out.
func peerJSON(name string, out any, args ...string) error {
	script := filepath.Join(repoRoot(), "scripts", name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, peerPython, append([]string{script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v: %v: %s", name, args, err, stderr.Bytes())
	}
	return json.Unmarshal(stdout.Bytes(), out)
}

// perCore measures every per-core rate once a round. In-process work
// (TurboJPEG and tensorbatch) is interleaved block by block: each block of
// imageBlock images is run imageReps times by every method in turn, and a
// method's time is the sum of its fastest pass of each block, so a noisy
// machine (which only ever adds time) hits all of them alike. The peer
// measures PIL and torchvision the same way in its own process.
func (ib *imageBench) perCore(ds *vision.Dataset, rounds int, ours bool) error {
	samples := ds.Samples()
	var blobs [][]byte
	for _, s := range samples {
		b, err := os.ReadFile(s.Path)
		if err != nil {
			return err
		}
		blobs = append(blobs, b)
	}
	type measure struct {
		name, note string
		block      func(i0, i1 int) error  // in-process: one block of images
		rate       func() (float64, error) // the peer: a whole process
	}
	var ms []measure
	turbo, err := openTurbo(blobs)
	if err != nil {
		ib.rates = append(ib.rates, imageRate{Name: "TurboJPEG decode only (C)", Note: err.Error()})
	} else {
		defer turbo.close()
		ms = append(ms, measure{name: "TurboJPEG decode only (C)", note: "tjDecompress2 to RGB, default flags, from memory",
			block: func(i0, i1 int) error { return turbo.decode(blobs[i0:i1]) }})
	}
	if ours {
		for _, tc := range []struct {
			name, note string
			t          vision.Transform
		}{
			{"tensorbatch train transform, Fast", "read the file, RandomResizedCrop + flip + ToTensor + Normalize into float32 CHW; Mode Fast (fast IDCT, box chroma upsampling, DCT scaling where the crop is >= 2x the output, 16-bit resize)", vision.Transform{Train: true, Size: imageSize, Mode: vision.Fast}},
			{"tensorbatch train transform, Exact", "the same, Mode Exact, the default (PIL's pixels)", vision.Train(imageSize)},
			{"tensorbatch eval transform, Fast", "read the file, Resize(256) + CenterCrop(224) + ToTensor + Normalize; Fast", vision.Transform{Size: imageSize, Mode: vision.Fast}},
			{"tensorbatch eval transform, Exact", "the same, Exact", vision.Eval(imageSize)},
			{"tensorbatch train transform, uint8 HWC", "train transform to uint8 HWC (normalize on the GPU); Fast", vision.Transform{Train: true, Size: imageSize, Output: vision.Uint8HWC, Mode: vision.Fast}},
		} {
			d, err := vision.New(samples, nil, tc.t)
			if err != nil {
				return err
			}
			defer d.Close()
			dst := make([]byte, d.Schema()[0].Bytes())
			rng := rand.New(rand.NewPCG(1, 2))
			ms = append(ms, measure{name: tc.name, note: tc.note, block: func(i0, i1 int) error {
				for _, s := range samples[i0:i1] {
					if err := d.Decode(s.Path, rng, dst); err != nil {
						return err
					}
				}
				return nil
			}})
		}
		// The Fast train and eval transforms on the same files' bytes,
		// through the Pipeline that shard sources use (issue 23): what
		// TurboJPEG's row decodes from, memory, so those ratios compare
		// like with like. The train row's rng draws the crops the folder
		// row's draws: same seed, same images, same order.
		for _, tc := range []struct {
			name, note string
			t          vision.Transform
		}{
			{bytesRow, "the Fast train row's work on the same files' bytes in memory (vision.Pipeline.Decode: what a tar or Parquet source calls), no file read", vision.Transform{Train: true, Size: imageSize, Mode: vision.Fast}},
			{evalBytesRow, "the Fast eval row's work on the bytes in memory, as the row above", vision.Transform{Size: imageSize, Mode: vision.Fast}},
		} {
			pipe, err := vision.NewPipeline(tc.t)
			if err != nil {
				return err
			}
			defer pipe.Close()
			dst := make([]byte, pipe.Schema()[0].Bytes())
			rng := rand.New(rand.NewPCG(1, 2))
			if !tc.t.Train {
				rng = nil
			}
			ms = append(ms, measure{name: tc.name, note: tc.note,
				block: func(i0, i1 int) error {
					for _, b := range blobs[i0:i1] {
						if err := pipe.Decode(b, rng, dst); err != nil {
							return err
						}
					}
					return nil
				}})
		}
	}
	if ib.hasPeer {
		for _, pm := range []struct{ name, note, mode, flag string }{
			{"PIL decode only", "Image.open(BytesIO).load(), from memory", "decode", ""},
			{"torchvision train transform", "default_loader + RandomResizedCrop, flip, ToTensor, Normalize; plain loop, one thread", "transform", ""},
			{"torchvision eval transform", "default_loader + Resize(256), CenterCrop, ToTensor, Normalize; plain loop, one thread", "transform", "--eval"},
		} {
			args := []string{pm.mode, ib.dir, "--block", strconv.Itoa(imageBlock), "--reps", strconv.Itoa(imageReps)}
			if pm.flag != "" {
				args = append(args, pm.flag)
			}
			ms = append(ms, measure{name: pm.name, note: pm.note, rate: func() (float64, error) {
				var out struct {
					ImagesPerS float64 `json:"images_per_s"`
				}
				err := peerImages(&out, args...)
				return out.ImagesPerS, err
			}})
		}
	}
	byName := map[string]*imageRate{}
	for _, m := range ms {
		ib.rates = append(ib.rates, imageRate{Name: m.name, Note: m.note})
	}
	for i := range ib.rates {
		byName[ib.rates[i].Name] = &ib.rates[i]
	}
	ib.ratios = map[string][]float64{}
	n := len(samples)
	for range rounds {
		round := map[string]float64{}
		best := make(map[string]float64)
		for i0 := 0; i0 < n; i0 += imageBlock {
			i1 := min(i0+imageBlock, n)
			// A GC cycle outside the timings, so that none runs inside a
			// timed block.
			runtime.GC()
			if i0 == 0 { // warm-up: caches, lazily loaded code
				for _, m := range ms {
					if m.block != nil {
						if err := m.block(i0, i1); err != nil {
							return fmt.Errorf("%s: %w", m.name, err)
						}
					}
				}
			}
			fastest := map[string]float64{}
			for range imageReps {
				for _, m := range ms {
					if m.block == nil {
						continue
					}
					t0 := time.Now()
					if err := m.block(i0, i1); err != nil {
						return fmt.Errorf("%s: %w", m.name, err)
					}
					if d := time.Since(t0).Seconds(); fastest[m.name] == 0 || d < fastest[m.name] {
						fastest[m.name] = d
					}
				}
			}
			for k, v := range fastest {
				best[k] += v
			}
		}
		for _, m := range ms {
			r := 0.0
			if m.block != nil {
				r = float64(n) / best[m.name]
			} else {
				var err error
				if r, err = m.rate(); err != nil {
					return fmt.Errorf("%s: %w", m.name, err)
				}
			}
			round[m.name] = r
			byName[m.name].Rates = append(byName[m.name].Rates, r)
		}
		for _, q := range imageRatios {
			if a, b := round[q[0]], round[q[1]]; a > 0 && b > 0 {
				ib.ratios[q[0]+" ÷ "+q[1]] = append(ib.ratios[q[0]+" ÷ "+q[1]], a/b)
			}
		}
	}
	for i := range ib.rates {
		ib.rates[i].Median = imgMedian(ib.rates[i].Rates)
	}
	return nil
}

// The per-core method: blocks of imageBlock images, each run imageReps
// times, the fastest pass counted.
const (
	imageBlock = 25
	imageReps  = 3
)

// bytesRow and evalBytesRow are the per-core rows of Pipeline.Decode on
// bytes.
const (
	bytesRow     = "tensorbatch train transform, Fast, Pipeline.Decode on bytes"
	evalBytesRow = "tensorbatch eval transform, Fast, Pipeline.Decode on bytes"
)

// imageRatios are the per-core targets: ours over a baseline, in
// the same round.
var imageRatios = [][2]string{
	{bytesRow, "tensorbatch train transform, Fast"},
	{"tensorbatch train transform, Fast", "TurboJPEG decode only (C)"},
	{"tensorbatch train transform, Exact", "TurboJPEG decode only (C)"},
	{"tensorbatch eval transform, Fast", "TurboJPEG decode only (C)"},
	{bytesRow, "TurboJPEG decode only (C)"},
	{evalBytesRow, "TurboJPEG decode only (C)"},
	{"tensorbatch eval transform, Exact", "TurboJPEG decode only (C)"},
	{"tensorbatch train transform, Fast", "torchvision train transform"},
	{"tensorbatch eval transform, Fast", "torchvision eval transform"},
	{"PIL decode only", "TurboJPEG decode only (C)"},
}

// imageTargets are the targets for the ratios above.
var imageTargets = map[string]string{
	bytesRow + " ÷ tensorbatch train transform, Fast":                 "≥ 0.95 (issue 23)",
	"tensorbatch train transform, Fast ÷ TurboJPEG decode only (C)":   "≥ 1.25 (issue 23; 1.2 in issue 10)",
	"tensorbatch eval transform, Fast ÷ TurboJPEG decode only (C)":    "≥ 1.2 (issue 23; 1.5 in issue 10)",
	bytesRow + " ÷ TurboJPEG decode only (C)":                         "≥ 1.25 (issue 23), both from memory",
	evalBytesRow + " ÷ TurboJPEG decode only (C)":                     "≥ 1.2 (issue 23), both from memory",
	"tensorbatch train transform, Fast ÷ torchvision train transform": "≥ 4",
}

func imgMedian(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (ib *imageBench) report(w io.Writer, dir string) error {
	title, what := "Images: real JPEGs to the batch", "ImageNet-like, 10 classes, quality 90"
	if ib.hires {
		title, what = "Images: high-resolution JPEGs, per core (issue 23)", "640-1280 px, half 4:4:4 and half 4:2:0, one in four progressive, quality 90"
	}
	if ib.onlyDir {
		return nil
	}
	fmt.Fprintf(w, "## %s\n\n", title)
	if ib.skipped != "" {
		fmt.Fprintf(w, "> Skipped: %s.\n\n", ib.skipped)
		return nil
	}
	fmt.Fprintf(w, "%d JPEGs of %s (%s), output %d×%d; JPEG decoder: %s. Took %.0f s.\n\n",
		ib.n, ib.dir, what, imageSize, imageSize, ib.decoder, ib.elapsed.Seconds())
	fmt.Fprintf(w, "### Per core (one goroutine, one thread; blocks of %d images, fastest of %d passes each)\n", imageBlock, imageReps)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| work | images/s (median) | rounds | how |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, r := range ib.rates {
		fmt.Fprintf(w, "| %s | %.0f | %s | %s |\n", r.Name, r.Median, fmtRates(r.Rates), r.Note)
	}
	fmt.Fprintln(w)
	// A process's rate can stay slow for a whole round (the Python peer's
	// most of all), and a noisy machine only ever adds time, so each
	// side's best round is given beside the same-round ratios.
	best := map[string]float64{}
	for _, r := range ib.rates {
		for _, v := range r.Rates {
			best[r.Name] = max(best[r.Name], v)
		}
	}
	fmt.Fprintln(w, "| ratio (same round) | median | rounds | best round ÷ best round | target |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for _, q := range imageRatios {
		k := q[0] + " ÷ " + q[1]
		if v, ok := ib.ratios[k]; ok {
			fmt.Fprintf(w, "| %s | %.2f× | %s | %.2f× | %s |\n", k, imgMedian(v), fmtRates(v), best[q[0]]/best[q[1]], imageTargets[k])
		}
	}
	fmt.Fprintln(w)
	if len(ib.loaders) > 0 {
		fmt.Fprintln(w, "### Loaders: train transform (Exact), batch 32, shuffle, persistent workers, second epoch")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| Workers | tensorbatch images/s | first batch | peak RSS | PyTorch fork images/s | first batch | peak RSS | tensorbatch ÷ PyTorch |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
		for _, r := range ib.loaders {
			if r.Loader != "tensorbatch" {
				continue
			}
			line := fmt.Sprintf("| %d | %.0f | %.3f s | %.0f MB |", r.Workers, r.ImagesPerS, r.FirstBatchS, r.PeakRSSMB)
			if t, ok := ib.peerRow(r.Workers); ok {
				line += fmt.Sprintf(" %.0f | %.3f s | %.0f MB | %.2f× |", t.ImagesPerS, t.FirstBatchS, t.PeakRSSMB, r.ImagesPerS/t.ImagesPerS)
			} else {
				line += " — | — | — | — |"
			}
			fmt.Fprintln(w, line)
		}
		fmt.Fprintln(w)
	}
	return ib.write(dir)
}

func (ib *imageBench) peerRow(w int) (imageLoaderRow, bool) {
	for _, r := range ib.loaders {
		if r.Loader != "tensorbatch" && r.Workers == w {
			return r, true
		}
	}
	return imageLoaderRow{}, false
}

func fmtRates(v []float64) string {
	var b bytes.Buffer
	for i, x := range v {
		if i > 0 {
			b.WriteString(", ")
		}
		if x < 20 {
			fmt.Fprintf(&b, "%.2f", x)
		} else {
			fmt.Fprintf(&b, "%.0f", x)
		}
	}
	return b.String()
}

// write saves images.json, images.csv and the loader plot.
func (ib *imageBench) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(map[string]any{"dir": ib.dir, "images": ib.n, "decoder": ib.decoder,
		"per_core": ib.rates, "ratios": ib.ratios, "loaders": ib.loaders}, "", " ")
	if err != nil {
		return err
	}
	base := "images"
	if ib.hires {
		base = "hires"
	}
	if err := os.WriteFile(filepath.Join(dir, base+".json"), js, 0o644); err != nil {
		return err
	}
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Write([]string{"table", "name", "workers", "images_per_s", "first_batch_s", "peak_rss_mb"})
	for _, r := range ib.rates {
		cw.Write([]string{"per_core", r.Name, "", strconv.FormatFloat(r.Median, 'f', 1, 64), "", ""})
	}
	for _, r := range ib.loaders {
		cw.Write([]string{"loader", r.Loader, strconv.Itoa(r.Workers), strconv.FormatFloat(r.ImagesPerS, 'f', 1, 64),
			strconv.FormatFloat(r.FirstBatchS, 'f', 3, 64), strconv.FormatFloat(r.PeakRSSMB, 'f', 0, 64)})
	}
	cw.Flush()
	if err := os.WriteFile(filepath.Join(dir, base+".csv"), b.Bytes(), 0o644); err != nil {
		return err
	}
	if len(ib.loaders) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Images: train transform, %d JPEGs, batch 32", ib.n)
	p.X.Label.Text, p.Y.Label.Text = "workers", "images/s"
	var lines []any
	for _, fam := range []string{"tensorbatch", "pytorch"} {
		var pts plotter.XYs
		for _, r := range ib.loaders {
			if family(r.Loader) == fam {
				pts = append(pts, plotter.XY{X: float64(r.Workers), Y: r.ImagesPerS})
			}
		}
		if len(pts) > 0 {
			lines = append(lines, fam, pts)
		}
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	_, err = save(p, dir, "images")
	return err
}
