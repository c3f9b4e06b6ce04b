package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/tensorbatch/tensorbatch/corpus"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/cputime"
	"github.com/tensorbatch/tensorbatch/shards"
	"github.com/tensorbatch/tensorbatch/vision"
)

// benchOpts are bench's flags.
type benchOpts struct {
	transform, mode, image, label string
	workers                       string
	autotune                      bool
	batch, batches, seqLen        int
	step                          time.Duration
	plot                          string
}

func newBenchCmd() *cobra.Command {
	var o benchOpts
	c := &cobra.Command{
		Use:   "bench DATA",
		Short: "Measure how fast DATA loads here",
		Long: `bench loads DATA with the loader, as a training job would, at several
worker counts and with autotune, and reports for each the samples (images
or tokens) a second, the CPU time a sample (all the process's threads:
decoding, copying, the loader) and the fraction of the time the training
loop waited for data. DATA is:
  - an image folder in ImageFolder layout, decoded with --transform;
  - WebDataset or Parquet shards (a pattern, a folder that holds them,
    a remote one ending in "/", a shardlist.json), their --image and
    --label members decoded with --transform;
  - a Megatron-LM corpus (PREFIX of PREFIX.idx and PREFIX.bin, or either
    file), in sequences of --seq-len tokens;
  - a token file (nanoGPT's train.bin, uint16 tokens), in sequences of
    --seq-len tokens.
--step simulates a training step of that long a batch (the loop sleeps),
so the data-bound fraction says whether this data would keep up with it.
--plot draws workers against throughput. Samples that fail (up to 100, or 1% of
an epoch) are skipped: bench measures speed, shards verify finds them.`,
		Example: `  tensorbatch bench ~/data/imagenet/train --transform train224 --workers 1,2,4,8
  tensorbatch bench '/data/shards/train-{0000..0099}.tar' --mode fast --step 50ms --plot workers.png
  tensorbatch bench /data/corpus/web_text_document --seq-len 2048 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return bench(cmd, args[0], o) },
	}
	f := c.Flags()
	f.StringVar(&o.transform, "transform", "train224", "train224, eval224, trainN or evalN: torchvision's ImageNet recipe at size N")
	f.StringVar(&o.mode, "mode", "exact", `"exact" (torchvision's pixels) or "fast"`)
	f.StringVar(&o.image, "image", "", `shards: the image member; "" takes the first of jpg, jpeg, png, webp... a sample has, as vision.Pipeline.Record does`)
	f.StringVar(&o.label, "label", "", `shards: the label member; "" takes the first of cls, label, json a sample has`)
	f.StringVar(&o.workers, "workers", "", "worker counts to run, e.g. 1,2,4 (default 1, 2, 4... up to the CPUs)")
	f.BoolVar(&o.autotune, "autotune", true, "also run with Workers AutoWorkers and PrefetchFactor AutoPrefetch")
	f.IntVar(&o.batch, "batch-size", 0, "samples a batch (default 64 for images, 8 for tokens)")
	f.IntVar(&o.batches, "batches", 50, "batches a run times (after one untimed batch)")
	f.IntVar(&o.seqLen, "seq-len", 2048, "corpora: tokens a sequence")
	f.DurationVar(&o.step, "step", 0, "a simulated training step a batch")
	f.StringVar(&o.plot, "plot", "", "draw workers against throughput into this PNG file")
	return c
}

// benchRow is one run of bench.
type benchRow struct {
	Workers      string  `json:"workers"`
	SamplesPerS  float64 `json:"samples_per_s"`
	TokensPerS   float64 `json:"tokens_per_s,omitempty"`
	CPUPerSample float64 `json:"cpu_seconds_per_sample"`
	DataBound    float64 `json:"data_bound_fraction"`
	Batches      int     `json:"batches"`
}

// benchData is what bench loads: a way to make the dataset, what a
// sample is, and its tokens (0: images).
type benchData struct {
	kind   string // "images", "shards", "megatron", "tokens"
	open   func(ctx context.Context) (engine.Dataset, func(), error)
	tokens int // a sample's tokens; 0 for images
}

func bench(cmd *cobra.Command, data string, o benchOpts) error {
	ctx := cmd.Context()
	switch {
	case o.batches < 1:
		return usagef("--batches is %d, want >= 1", o.batches)
	case o.batch < 0:
		return usagef("--batch-size is %d, want >= 1 (0: the default)", o.batch)
	case o.seqLen < 1:
		return usagef("--seq-len is %d, want >= 1", o.seqLen)
	}
	d, err := benchSource(data, o)
	if err != nil {
		return err
	}
	if o.batch == 0 {
		o.batch = 64
		if d.tokens > 0 {
			o.batch = 8
		}
	}
	counts, err := workerCounts(o.workers)
	if err != nil {
		return err
	}
	var rows []benchRow
	runs := make([]int, len(counts))
	copy(runs, counts)
	if o.autotune {
		runs = append(runs, engine.AutoWorkers)
	}
	bar := newProgress(cmd, int64(len(runs)*(o.batches+1)), "batches", false)
	for _, w := range runs {
		row, err := benchRun(ctx, d, o, w, bar)
		if err != nil {
			bar.done()
			return err
		}
		rows = append(rows, row)
	}
	bar.done()
	if o.plot != "" {
		if err := benchPlot(o.plot, data, d, rows); err != nil {
			return err
		}
	}
	out := struct {
		Data    string     `json:"data"`
		Kind    string     `json:"kind"`
		CPUs    int        `json:"cpus"`
		Batch   int        `json:"batch_size"`
		Step    float64    `json:"step_seconds"`
		Rows    []benchRow `json:"rows"`
		Plotted string     `json:"plot,omitempty"`
	}{data, d.kind, runtime.NumCPU(), o.batch, o.step.Seconds(), rows, o.plot}
	return emit(cmd, out, func(w io.Writer) error {
		unit := "images/s"
		if d.tokens > 0 {
			unit = "tokens/s"
		}
		fmt.Fprintf(w, "%s (%s) on %d CPUs, batches of %d, step %v\n", data, d.kind, out.CPUs, o.batch, o.step)
		fmt.Fprintf(w, "%8s %14s %16s %11s\n", "workers", unit, "CPU/sample", "data-bound")
		for _, r := range rows {
			v := r.SamplesPerS
			if d.tokens > 0 {
				v = r.TokensPerS
			}
			fmt.Fprintf(w, "%8s %14.0f %16v %10.0f%%\n", r.Workers, v, time.Duration(r.CPUPerSample*1e9).Round(time.Microsecond), 100*r.DataBound)
		}
		if o.plot != "" {
			fmt.Fprintf(w, "plot: %s\n", o.plot)
		}
		return nil
	})
}

// benchSource says what data is and how to load it.
func benchSource(data string, o benchOpts) (benchData, error) {
	t, err := parseTransform(o.transform, o.mode)
	if err != nil {
		return benchData{}, err
	}
	// A Megatron corpus named by its .bin or .idx is the corpus, not a
	// token file.
	if p, ok := strings.CutSuffix(data, ".bin"); ok && isFile(p+".idx") {
		data = p
	} else if p, ok := strings.CutSuffix(data, ".idx"); ok && isFile(data) {
		data = p
	}
	if isFile(data + ".idx") {
		return benchData{kind: "megatron", tokens: o.seqLen, open: func(context.Context) (engine.Dataset, func(), error) {
			d, err := corpus.Megatron(data, corpus.MegatronConfig{SeqLength: o.seqLen, Seed: 1})
			if err != nil {
				return nil, nil, err
			}
			return d, func() { d.Close() }, nil
		}}, nil
	}
	// A local folder is shards where it holds some, with or without its
	// "/" (which a shell's completion adds), else an ImageFolder.
	if st, err := os.Stat(data); err == nil && st.IsDir() {
		if !holdsShards(data) {
			return benchData{kind: "images", open: func(context.Context) (engine.Dataset, func(), error) {
				d, err := vision.ImageFolder(data, t)
				if err != nil {
					return nil, nil, err
				}
				return d, func() { d.Close() }, nil
			}}, nil
		}
		data = strings.TrimSuffix(data, "/") + "/"
	}
	if st, err := os.Stat(data); err == nil && st.Mode().IsRegular() && strings.HasSuffix(data, ".bin") {
		return benchData{kind: "tokens", tokens: o.seqLen + 1, open: func(context.Context) (engine.Dataset, func(), error) {
			d, err := corpus.Tokens(data, corpus.TokenConfig{Context: o.seqLen, Random: true})
			if err != nil {
				return nil, nil, err
			}
			return d, func() { d.Close() }, nil
		}}, nil
	}
	return benchData{kind: "shards", open: func(ctx context.Context) (engine.Dataset, func(), error) {
		p, err := vision.NewPipeline(t)
		if err != nil {
			return nil, nil, err
		}
		src, err := shards.New(ctx, data, p.Schema(), p.Record(o.image, o.label))
		if err != nil {
			p.Close()
			return nil, nil, err
		}
		ds, err := engine.FromIterable(ctx, src, engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 256})
		if err != nil {
			src.Close()
			p.Close()
			return nil, nil, err
		}
		return ds, func() { src.Close(); p.Close() }, nil
	}}, nil
}

// isFile reports whether name is a regular file.
func isFile(name string) bool {
	st, err := os.Stat(name)
	return err == nil && st.Mode().IsRegular()
}

// holdsShards reports whether the folder dir has a shard (a .tar or
// .parquet file) directly in it, as shards.List lists a folder.
func holdsShards(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n := strings.ToLower(e.Name())
		if strings.HasSuffix(n, ".tar") || strings.HasSuffix(n, ".parquet") {
			return true
		}
	}
	return false
}

// parseTransform reads train224, eval224, trainN, evalN and a mode.
func parseTransform(s, mode string) (vision.Transform, error) {
	var t vision.Transform
	size := 0
	switch {
	case strings.HasPrefix(s, "train"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, "train"))
		if err != nil {
			return t, usagef("--transform %q: want trainN or evalN, e.g. train224", s)
		}
		t, size = vision.Train(n), n
	case strings.HasPrefix(s, "eval"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, "eval"))
		if err != nil {
			return t, usagef("--transform %q: want trainN or evalN, e.g. eval224", s)
		}
		t, size = vision.Eval(n), n
	default:
		return t, usagef("--transform %q: want trainN or evalN, e.g. train224", s)
	}
	if size < 1 {
		return t, usagef("--transform %q: the size must be positive", s)
	}
	switch mode {
	case "exact":
		t.Mode = vision.Exact
	case "fast":
		t.Mode = vision.Fast
	default:
		return t, usagef(`--mode %q: want "exact" or "fast"`, mode)
	}
	return t, nil
}

// workerCounts parses --workers: a list, or 1, 2, 4... up to the CPUs.
func workerCounts(s string) ([]int, error) {
	if s == "" {
		var out []int
		for w := 1; w < runtime.NumCPU(); w *= 2 {
			out = append(out, w)
		}
		return append(out, runtime.NumCPU()), nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, usagef("--workers %q: want counts like 1,2,4", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchRun times o.batches batches at workers w (AutoWorkers: tuned).
func benchRun(ctx context.Context, d benchData, o benchOpts, w int, bar *progress) (benchRow, error) {
	ds, done, err := d.open(ctx)
	if err != nil {
		return benchRow{}, err
	}
	defer done()
	// Bad samples are skipped (up to 100, or 1%), as a job might: bench measures
	// speed; shards verify finds them.
	cfg := engine.Config{BatchSize: o.batch, Workers: w, Shuffle: d.kind != "shards", Seed: 1, DropLast: true,
		OnError: engine.ErrorPolicy{Skip: 100, SkipFraction: 0.01}}
	if w == engine.AutoWorkers {
		cfg.PrefetchFactor = engine.AutoPrefetch
	}
	l, err := engine.New(ds, cfg)
	if err != nil {
		return benchRow{}, err
	}
	defer l.Close()
	row := benchRow{Workers: strconv.Itoa(w)}
	if w == engine.AutoWorkers {
		row.Workers = "auto"
	}
	var start time.Time
	var cpu0 time.Duration
	var wait0 time.Duration
	samples := 0
	for epoch := 0; row.Batches < o.batches; epoch++ {
		got := 0
		for b, err := range l.Epoch(ctx, epoch) {
			if err != nil {
				return benchRow{}, err
			}
			bar.add(1)
			if start.IsZero() { // the first batch is untimed: start-up, page cache
				start, cpu0, wait0 = time.Now(), cputime.Process(), l.Stats().ConsumerWait
				got++
				continue
			}
			samples += b.Len()
			row.Batches++
			got++
			if o.step > 0 {
				time.Sleep(o.step)
			}
			if row.Batches == o.batches {
				break
			}
		}
		if got == 0 {
			return benchRow{}, errors.New("an epoch delivered no batch: the data has fewer samples than a batch")
		}
	}
	elapsed := time.Since(start)
	row.SamplesPerS = float64(samples) / elapsed.Seconds()
	row.TokensPerS = row.SamplesPerS * float64(d.tokens)
	row.CPUPerSample = (cputime.Process() - cpu0).Seconds() / float64(samples)
	row.DataBound = min(1, (l.Stats().ConsumerWait-wait0).Seconds()/elapsed.Seconds())
	return row, nil
}

// benchPlot draws throughput against workers.
func benchPlot(file, data string, d benchData, rows []benchRow) error {
	p := plot.New()
	p.Title.Text = "tensorbatch bench " + filepath.Base(data)
	p.X.Label.Text = "workers"
	p.Y.Label.Text = "images/s"
	if d.tokens > 0 {
		p.Y.Label.Text = "tokens/s"
	}
	var pts plotter.XYs
	for _, r := range rows {
		w, err := strconv.Atoi(r.Workers)
		if err != nil {
			continue // autotune: a line of its own below
		}
		v := r.SamplesPerS
		if d.tokens > 0 {
			v = r.TokensPerS
		}
		pts = append(pts, plotter.XY{X: float64(w), Y: v})
	}
	if err := plotutil.AddLinePoints(p, "fixed workers", pts); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Workers == "auto" && len(pts) > 0 {
			v := r.SamplesPerS
			if d.tokens > 0 {
				v = r.TokensPerS
			}
			line, err := plotter.NewLine(plotter.XYs{{X: pts[0].X, Y: v}, {X: pts[len(pts)-1].X, Y: v}})
			if err != nil {
				return err
			}
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
			p.Add(line)
			p.Legend.Add("autotune", line)
		}
	}
	return p.Save(6*vg.Inch, 4*vg.Inch, file)
}
