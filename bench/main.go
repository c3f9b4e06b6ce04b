package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"
	"gonum.org/v1/gonum/stat"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/classic"
)

type options struct {
	quick       bool
	peer        string // auto, off, only
	samples     int
	batch       int
	workers     []int
	epochs      int
	step        time.Duration
	persistW    int
	methods     []string
	backend     string
	out         string
	noPlots     bool
	noShards    bool
	noAutotune  bool
	rng         string
	fill        func(context.Context, *engine.Slot) error
	progressOut io.Writer
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.BoolVar(&o.quick, "quick", false, "a small run for CI: 160 samples, workers 0,1,2, fork and spawn")
	fs.StringVar(&o.peer, "peer", "auto", "PyTorch's DataLoader side by side: auto (when importable), off, or only")
	fs.IntVar(&o.samples, "samples", 1000, "samples per epoch")
	fs.IntVar(&o.batch, "batch", 32, "batch size")
	workers := fs.String("workers", "0,1,2,4,8,16", "worker counts of the workers table")
	fs.IntVar(&o.epochs, "epochs", 3, "epochs of the persistence table")
	fs.DurationVar(&o.step, "step", 20*time.Millisecond, "simulated training step per batch (a wait, as for a GPU)")
	fs.IntVar(&o.persistW, "persist-workers", 4, "workers of the persistence table")
	methods := fs.String("methods", "fork,spawn,forkserver,forkserver-preload", "PyTorch start methods of the persistence table")
	fs.StringVar(&o.backend, "backend", "", "tensorbatch backend: auto, hip, cuda, cpu (default $TENSORBATCH_BACKEND, else auto)")
	fs.StringVar(&o.out, "out", "bench/results", "directory for CSV, JSON and plots")
	fs.BoolVar(&o.noPlots, "no-plots", false, "skip the PNG and SVG plots")
	fs.BoolVar(&o.noShards, "no-shards", false, "skip the streaming-shards, token-window, S3-reader and shard-cache rows")
	fs.BoolVar(&o.noAutotune, "no-autotune", false, "skip the autotune table")
	registerImageFlags(fs) // bench/images.go
	fs.StringVar(&o.rng, "rng", "philox", "how tensorbatch draws randn: philox (collate.FillNormal, vectorised) or math (math/rand/v2 NormFloat64)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.quick {
		o.samples, *workers, o.epochs, o.step, o.persistW, *methods = 160, "0,1,2", 2, 5*time.Millisecond, 2, "fork,spawn"
	}
	for _, f := range strings.Split(*workers, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || w < 0 {
			return nil, fmt.Errorf("bench: -workers: %q is not a worker count", f)
		}
		o.workers = append(o.workers, w)
	}
	o.methods = strings.Split(*methods, ",")
	switch o.rng {
	case "philox":
		o.fill = classic.FillPhilox
	case "math":
		o.fill = classic.FillMath
	default:
		return nil, fmt.Errorf("bench: -rng %q: want philox or math", o.rng)
	}
	switch {
	case o.peer != "auto" && o.peer != "off" && o.peer != "only":
		return nil, fmt.Errorf("bench: -peer %q: want auto, off or only", o.peer)
	case o.samples < o.batch || o.batch <= 0:
		return nil, fmt.Errorf("bench: -samples %d must hold at least one -batch of %d", o.samples, o.batch)
	case o.epochs < 2:
		return nil, fmt.Errorf("bench: -epochs %d: the persistence table needs at least 2", o.epochs)
	}
	o.progressOut = os.Stderr
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// job is one measurement.
type job struct {
	name string
	do   func() error
}

func run(o *options, out io.Writer) error {
	var p *peer
	if o.peer != "off" {
		var err error
		if p, err = findPeer(); err != nil {
			if o.peer == "only" {
				return err
			}
			fmt.Fprintf(out, "> PyTorch is not available (%v).\n> Install it with `scripts/install-deps.sh` (Debian's python3-torch) to see DataLoader side by side; going on with tensorbatch alone.\n\n", err)
			p = nil
		}
	}
	res := &results{opts: o, machine: machine()}
	if p != nil {
		res.peerVersion = p.version
	}
	var jobs []job
	var sb shardBench // bench/shards.go
	var ib imageBench // bench/images.go
	hb := imageBench{hires: true}
	var srcb sourceBench  // bench/sources.go
	var s3b s3ReaderBench // bench/s3reader.go
	add := func(name string, do func() error) { jobs = append(jobs, job{name, do}) }
	ours := o.peer != "only"
	steady := 2 // the workers table reports a steady epoch: workers already up

	if ours {
		for _, w := range o.workers {
			add(fmt.Sprintf("tensorbatch workers=%d", w), func() error {
				return res.add(runLoader(o, "workers", w, true, steady, o.step))
			})
			add(fmt.Sprintf("tensorbatch workers=%d no step, between two plain loops", w), func() error {
				before := plainRate(o)
				rec, err := runLoader(o, "efficiency", w, true, steady, 0)
				rec.PlainPerCore = stat.Mean([]float64{before, plainRate(o)}, nil)
				return res.add(rec, err)
			})
		}
		for _, persistent := range []bool{false, true} {
			add(fmt.Sprintf("tensorbatch persistent=%v", persistent), func() error {
				return res.add(runLoader(o, "persistence", o.persistW, persistent, o.epochs, o.step))
			})
		}
		add("host-to-device bandwidth", func() error { return res.h2dTable(o) })
		if !o.noAutotune {
			add("autotune against fixed settings", func() error { return res.autotuneTable(o) })
		}
		if !o.noShards {
			add("streaming shards and token windows", func() error { return sb.run(o) })
			add("S3 reader against a bare SDK loop, shard cache against local disk", func() error { return s3b.run(o) })
		}
	}
	add("images: real JPEGs, per core and loaders", func() error { return ib.run(o, p) })
	if !imgOpts.skip && !imgOpts.noSources {
		add("images from any source: folder, tar and Parquet shards, S3", func() error { return srcb.run(o, p, &ib) })
	}
	if !imgOpts.skip {
		add("images: high-resolution set, per core", func() error { return hb.run(o, p) })
	}
	if p != nil {
		stepMS := float64(o.step) / 1e6
		for _, w := range o.workers {
			add(fmt.Sprintf("pytorch fork workers=%d", w), func() error {
				return res.add(p.run(o, "workers", "fork", w, true, steady, stepMS))
			})
			add(fmt.Sprintf("pytorch fork workers=%d no step, between two plain loops", w), func() error {
				before, err := p.plainRate(o)
				if err != nil {
					return err
				}
				rec, err := p.run(o, "efficiency", "fork", w, true, steady, 0)
				after, err2 := p.plainRate(o)
				rec.PlainPerCore = stat.Mean([]float64{before, after}, nil)
				return res.add(rec, errors.Join(err, err2))
			})
		}
		for _, m := range o.methods {
			for _, persistent := range []bool{false, true} {
				add(fmt.Sprintf("pytorch %s persistent=%v", m, persistent), func() error {
					return res.add(p.run(o, "persistence", m, o.persistW, persistent, o.epochs, stepMS))
				})
			}
		}
	}
	bar := newProgress(o.progressOut, len(jobs))
	t0 := time.Now()
	for i, j := range jobs {
		bar.show(i, j.name)
		if err := j.do(); err != nil {
			bar.done()
			return fmt.Errorf("%s: %w", j.name, err)
		}
	}
	bar.done()
	res.elapsed = time.Since(t0)
	res.efficiency()
	res.markdown(out)
	if err := sb.report(out, o.out); err != nil {
		return err
	}
	if ours && !o.noShards {
		if err := s3b.report(out, o.out); err != nil {
			return err
		}
	}
	if err := ib.report(out, o.out); err != nil {
		return err
	}
	if !imgOpts.skip {
		if !imgOpts.noSources {
			if err := srcb.report(out, o.out); err != nil {
				return err
			}
		}
		if err := hb.report(out, o.out); err != nil {
			return err
		}
	}
	return res.write(o.out, out)
}

func machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s, %d CPUs, %s/%s, %s", host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// progress is a one-line bar on a terminal, one line a job elsewhere.
type progress struct {
	w     io.Writer
	n     int
	tty   bool
	start time.Time
}

func newProgress(w io.Writer, n int) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &progress{w: w, n: n, tty: tty, start: time.Now()}
}

func (p *progress) show(i int, name string) {
	const width = 30
	filled := width * i / max(p.n, 1)
	line := fmt.Sprintf("[%s%s] %d/%d %5.1fs %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), i+1, p.n, time.Since(p.start).Seconds(), name)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
