package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
	"github.com/tensorbatch/tensorbatch/shards"
	"github.com/tensorbatch/tensorbatch/vision"
)

// writeOpts are shards write's flags.
type writeOpts struct {
	out, format, prefix string
	shardBytes          string
	workers             int
	seed                uint64
	shuffle, exact      bool
	resize, quality     int
}

func newShardsWriteCmd() *cobra.Command {
	var o writeOpts
	c := &cobra.Command{
		Use:   "write SRC --out DIR",
		Short: "Write WebDataset tar or Parquet shards from a folder or a file list",
		Long: `write turns images into shards the loader streams: SRC is a folder in
ImageFolder layout (one subfolder a class, as torchvision's ImageFolder
reads it), or a file list: CSV ("path,label" lines, as vision.FileList
reads it) or JSONL ({"path": ..., "label": ...} lines, as it reads them
too). Labels are
integers >= 0 (class indices) or, where one is not, class names,
numbered in sorted order.

The shards go to DIR, a local folder or an object store's prefix
(s3://bucket/prefix/, gs://, az://), with the shardlist.json the loader
reads the counts from. DIR must hold no shards yet: a folder is read as
every shard in it, so an earlier write's would be read with these. To a
store, each shard is put as it is complete and removed here, so the
local disk holds one shard at a time; the shardlist.json goes last, so
a write that fails or is stopped leaves shards but no list (remove them
before writing there again). Each sample is key.<ext> (the image, by its
format: "jpg" for a JPEG, "png", "webp"...) and key.cls (its label) in
a tar; in Parquet, Hugging Face's image layout (__key__, image {bytes,
path}, label). Keys are the samples' positions in the output,
"000000000" on, so the output is the same for the same input and seed,
whatever --workers is. A write that leaves every image out fails.

Every image goes through the loader's own checks first (a regular file,
at most 64 MiB, a known format, at most the pixel limit, a JPEG walked
whole: vision.Pipeline.Check); one the loader would refuse is reported
with its reason and left out.`,
		Example: `  tensorbatch shards write ~/data/imagenet/train --out /data/shards/train --shuffle --seed 1
  tensorbatch shards write train.csv --out s3://bucket/train/ --format parquet --shard-size 512MiB
  tensorbatch shards write photos/ --out small/ --resize 256 --quality 90 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return shardsWrite(cmd, args[0], o) },
	}
	f := c.Flags()
	f.StringVarP(&o.out, "out", "o", "", "where the shards go: a folder, or s3://, gs://, az:// prefix (required)")
	f.StringVar(&o.format, "format", "tar", `"tar" (WebDataset) or "parquet" (Hugging Face's layout)`)
	f.StringVar(&o.prefix, "prefix", "shard", "shard names: PREFIX-000000.tar on")
	f.StringVar(&o.shardBytes, "shard-size", "256MiB", "the size a shard reaches before the next one starts")
	f.IntVar(&o.workers, "workers", runtime.GOMAXPROCS(0), "goroutines that read, check and resize images")
	f.BoolVar(&o.shuffle, "shuffle", false, "shuffle the samples (by --seed), spreading classes across shards")
	f.Uint64Var(&o.seed, "seed", 0, "the shuffle's seed")
	f.IntVar(&o.resize, "resize", 0, "re-encode each image as a JPEG whose shorter side is at most N pixels (0: copy as is)")
	f.IntVar(&o.quality, "quality", 90, "the JPEG quality of --resize")
	f.BoolVar(&o.exact, "exact", false, "--resize with Pillow's pixels (its antialiased bilinear filter, bit for bit), without the DCT-scaled decode of large images")
	c.MarkFlagRequired("out")
	return c
}

// maxS3Shard is the most --shard-size to S3: a shard of it and one more
// sample (an image of at most vision.DefaultMaxFileBytes) is at most the
// 5 GiB one PutObject takes.
const maxS3Shard = 5<<30 - 2*vision.DefaultMaxFileBytes

// source is an image to write: its file and label.
type source struct {
	path  string
	label int
}

// badFile is an image left out, and why.
type badFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// writeResult is what shards write reports.
type writeResult struct {
	Out      string      `json:"out"`
	Format   string      `json:"format"`
	Shards   int         `json:"shards"`
	Samples  int         `json:"samples"`
	Bytes    int64       `json:"bytes"`
	Classes  []string    `json:"classes,omitempty"`
	Bad      []badFile   `json:"bad"`
	Seconds  float64     `json:"seconds"`
	List     string      `json:"shard_list"`
	Decode   string      `json:"decode"`
	ShardSet []shardInfo `json:"shard_files"`
}

type shardInfo struct {
	Name    string `json:"name"`
	Samples int    `json:"samples"`
	Bytes   int64  `json:"bytes"`
}

func shardsWrite(cmd *cobra.Command, src string, o writeOpts) error {
	ctx := cmd.Context()
	shardBytes, err := parseBytes(o.shardBytes)
	switch {
	case err != nil:
		return usagef("--shard-size: %v", err)
	case o.format != "tar" && o.format != "parquet":
		return usagef(`--format is %q, want "tar" or "parquet"`, o.format)
	case o.workers < 1:
		return usagef("--workers is %d, want >= 1", o.workers)
	case o.resize < 0 || o.quality < 1 || o.quality > 100:
		return usagef("--resize must be >= 0 and --quality in 1..100")
	case strings.ContainsAny(o.prefix, `/\`):
		return usagef("--prefix %q has a path separator", o.prefix)
	case strings.HasPrefix(o.out, "s3://") && shardBytes > maxS3Shard:
		// Found here, not after the first shard is written.
		return usagef("--shard-size %s: S3 takes at most 5 GiB an object (one PutObject), and a shard passes --shard-size by up to a sample: at most %s", o.shardBytes, humanBytes(maxS3Shard))
	}
	start := time.Now()
	out, err := newOutput(o.out)
	if err != nil {
		return err
	}
	defer out.close()
	if err := out.checkEmpty(ctx, o.out); err != nil {
		return err
	}
	samples, classes, err := listImages(src)
	if err != nil {
		return err
	}
	if o.shuffle {
		r := rand.New(rand.NewPCG(o.seed, 0x5348524453)) // "SHRDS"
		r.Shuffle(len(samples), func(i, j int) { samples[i], samples[j] = samples[j], samples[i] })
	}
	w, err := shards.NewWriter(out.dir, shards.WriterConfig{Format: o.format, ShardBytes: shardBytes, Prefix: o.prefix, OnShard: out.onShard(ctx)})
	if err != nil {
		return err
	}
	bar := newProgress(cmd, int64(len(samples)), "images", false)
	res := writeResult{Out: o.out, Format: o.format, Classes: classes}
	check, err := newChecker(o.exact)
	if err != nil {
		return err
	}
	defer check.Close()
	err = inOrder(ctx, len(samples), o.workers, func(i int) (prepared, error) {
		return prepare(samples[i], check, o)
	}, func(i int, p prepared) error {
		bar.add(1)
		if p.bad != "" {
			res.Bad = append(res.Bad, badFile{samples[i].path, p.bad})
			return nil
		}
		key := fmt.Sprintf("%09d", res.Samples)
		if err := w.Write(key, map[string][]byte{p.ext: p.data, "cls": []byte(strconv.Itoa(samples[i].label))}); err != nil {
			return err
		}
		res.Samples++
		return nil
	})
	bar.done()
	if err == nil && res.Samples == 0 {
		err = fmt.Errorf("%s: no image to write (%d left out)", src, len(res.Bad))
		for _, b := range res.Bad {
			fmt.Fprintf(cmd.ErrOrStderr(), "left out %s: %s\n", b.Path, b.Reason)
		}
	}
	if err != nil {
		w.Abort()
		return err
	}
	list, err := w.Close()
	if err != nil {
		return err
	}
	if err := writeClasses(out.dir, classes); err != nil {
		return err
	}
	if err := out.finish(ctx, "shardlist.json", "classes.json"); err != nil {
		return err
	}
	for _, e := range list.Shards {
		res.ShardSet = append(res.ShardSet, shardInfo{e.URL, e.Samples, e.Bytes})
		res.Bytes += e.Bytes
	}
	res.Shards, res.Seconds = len(list.Shards), time.Since(start).Seconds()
	res.List = strings.TrimSuffix(o.out, "/") + "/shardlist.json"
	res.Decode = fmt.Sprintf(`p.Record(%q, "cls")`, "jpg")
	if o.format == "parquet" {
		res.Decode = `p.Record("jpg", "label")`
	}
	if res.Bad == nil {
		res.Bad = []badFile{}
	}
	return emit(cmd, res, func(out io.Writer) error {
		fmt.Fprintf(out, "wrote %d samples in %d %s shards (%s) to %s in %.1fs\n", res.Samples, res.Shards, o.format, humanBytes(res.Bytes), o.out, res.Seconds)
		for _, b := range res.Bad {
			fmt.Fprintf(out, "left out %s: %s\n", b.Path, b.Reason)
		}
		fmt.Fprintf(out, "read them with shards.New(ctx, %q, p.Schema(), %s)\n", strings.TrimSuffix(o.out, "/")+"/", res.Decode)
		return nil
	})
}

// listImages returns the images of src, a folder or a file list, with
// their labels, and the class names when labels are names.
func listImages(src string) ([]source, []string, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return nil, nil, err
	}
	var ds *vision.Dataset
	switch {
	case fi.IsDir():
		ds, err = vision.ImageFolder(src, vision.Eval(32))
	default: // CSV or JSONL
		ds, err = vision.FileList(src, vision.Eval(32))
	}
	if err != nil {
		return nil, nil, err
	}
	defer ds.Close()
	var out []source
	for _, s := range ds.Samples() {
		out = append(out, source{s.Path, s.Label})
	}
	return out, ds.Classes(), nil
}

// checker checks images as the loader does, and shrinks them.
type checker struct{ p *vision.Pipeline }

// newChecker returns a checker whose shrinking is Pillow's, bit for bit,
// when exact; else the Fast mode's (DCT-scaled decode of large images).
func newChecker(exact bool) (*checker, error) {
	mode := vision.Fast
	if exact {
		mode = vision.Exact
	}
	p, err := vision.NewPipeline(vision.Transform{Size: 16, Mode: mode, Output: vision.Uint8HWC})
	if err != nil {
		return nil, err
	}
	return &checker{p}, nil
}

func (c *checker) Close() error { return c.p.Close() }

// check returns why the loader would refuse an image, or "": its checks
// before a decode (vision.Pipeline.Check: size, format, pixels, a JPEG
// walked whole), and with decode a whole decode too, which finds a
// damaged scan whose markers are intact.
func (c *checker) check(data []byte, decode bool) string {
	err := c.p.Check(data)
	if err == nil && decode {
		var dst [16 * 16 * 3]byte
		err = c.p.Decode(data, nil, dst[:])
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// prepared is a sample ready to write: its image bytes and their
// extension, or why it is left out.
type prepared struct {
	data []byte
	ext  string
	bad  string
}

// prepare reads, checks and, with --resize, re-encodes one image.
func prepare(s source, c *checker, o writeOpts) (prepared, error) {
	data, err := regfile.ReadFile(s.path, vision.DefaultMaxFileBytes)
	if err != nil {
		return prepared{bad: err.Error()}, nil
	}
	if why := c.check(data, false); why != "" {
		return prepared{bad: why}, nil
	}
	if o.resize > 0 {
		if data, err = c.p.ShrinkJPEG(data, o.resize, o.quality); err != nil {
			return prepared{bad: err.Error()}, nil
		}
	}
	// The member is named by the image's format, not its file's name
	// (which may have another extension, or none); Check took the format.
	return prepared{data: data, ext: vision.ImageFormat(data)}, nil
}

// inOrder runs work(i) for i in [0, n) on workers goroutines and hands
// each result to done in order of i, on the calling goroutine, holding
// at most 4×workers results ahead (and memory for those only, not for n).
// The first error, or ctx's, stops it.
func inOrder[T any](ctx context.Context, n, workers int, work func(i int) (T, error), done func(i int, v T) error) error {
	type result struct {
		v   T
		err error
	}
	workers = min(workers, n)
	if workers < 1 {
		return ctx.Err()
	}
	// Result i goes to ring[i%window]: a worker claims i only holding one
	// of window tokens, which done's loop gives back once it has taken
	// result i-window out of the same place.
	window := 4 * workers
	ring := make([]chan result, window)
	for k := range ring {
		ring[k] = make(chan result, 1)
	}
	var mu sync.Mutex
	next := 0 // the next i to hand out
	sem := make(chan struct{}, window)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel() // before the wait: a worker may wait for a token
		wg.Wait()
	}()
	claim := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= n || ctx.Err() != nil {
			return 0, false
		}
		i := next
		next++
		return i, true
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				i, ok := claim()
				if !ok {
					<-sem
					return
				}
				v, err := work(i)
				ring[i%window] <- result{v, err}
			}
		}()
	}
	for i := range n {
		var r result
		select {
		case r = <-ring[i%window]:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		<-sem
		if r.err != nil {
			return r.err
		}
		if err := done(i, r.v); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// writeClasses writes classes.json beside the shards when the labels are
// class names.
func writeClasses(dir string, classes []string) error {
	if len(classes) == 0 {
		return nil
	}
	data, err := json.MarshalIndent(classes, "", "  ")
	if err != nil {
		return err
	}
	return regfile.WriteFile(filepath.Join(dir, "classes.json"), append(data, '\n'), 0o644)
}

// parseBytes reads a size: 1048576, 512KiB, 256MiB, 1GiB, 500MB, 2GB.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	num, mult := s, int64(1)
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = v, u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	n := v * float64(mult)
	// Not NaN, and whole bytes an int64 holds: int64 of less than a byte
	// would be 0 (the Writer's default), of NaN or more, garbage.
	if err != nil || !(n >= 1 && n < math.MaxInt64) {
		return 0, fmt.Errorf("%q is not a size from 1 byte (want 256MiB, 1GiB, 500MB...)", s)
	}
	return int64(n), nil
}

// humanBytes prints a byte count.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
