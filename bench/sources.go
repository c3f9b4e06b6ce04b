package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/cputime"
	"github.com/tensorbatch/tensorbatch/internal/s3test"
	"github.com/tensorbatch/tensorbatch/shards"
	"github.com/tensorbatch/tensorbatch/vision"
)

// The rows of issue 23, images from any source: the ImageNet-like folder
// of the image rows packed as WebDataset tar shards and as Parquet shards
// (Hugging Face's layout), loaded by the same vision.Pipeline from the
// folder, from the shards on local disk and from the tar shards in a
// local S3 server (versitygw), rounds interleaved; then tensorbatch on the
// tar shards against PyTorch's DataLoader on the same tars
// (scripts/peer_shards.py: an IterableDataset as WebDataset builds one).

// sourceBench holds the rows.
type sourceBench struct {
	skipped   string
	n         int // images
	nShards   int
	bytes     int64 // the images' bytes
	rounds    int
	workers   int
	rows      []sourceRow
	ratios    []sourceRatio
	cpuRatios []sourceRatio    // the folder's CPU an epoch over each source's: no target
	loaders   []imageLoaderRow // tensorbatch and PyTorch on the tar shards
	notes     []string
	elapsed   time.Duration
	peerNote  string
}

// sourceRow is one source's epochs through the loader.
type sourceRow struct {
	Source     string    `json:"source"`
	Seconds    []float64 `json:"epoch_s"`     // one a round
	CPU        []float64 `json:"epoch_cpu_s"` // the process's CPU time in each of those epochs
	ImagesPerS float64   `json:"images_per_s"`
	Retries    int64     `json:"read_retries"`
}

// sourceRatio is one source over another, epoch by epoch in the same
// round.
type sourceRatio struct {
	Name   string    `json:"name"`
	Rounds []float64 `json:"rounds"`
	Median float64   `json:"median"`
	Target string    `json:"target"`
}

// sourceTransform is the transform of the source rows: the training one
// in the default mode (torchvision's pixels), as the image loader table
// and the peer use.
func sourceTransform() vision.Transform { return vision.Train(imageSize) }

const (
	sourceWorkers = 2  // the ratio rows: this machine's cores
	shardBuffer   = 64 // the shuffle buffer of both sides (WebDataset's shuffle(64))
	sourceBatch   = 32
)

// run packs ib's folder into shards under out and measures. quick runs
// one round on at most 64 images, and no peer.
func (sb *sourceBench) run(o *options, p *peer, ib *imageBench) error {
	t0 := time.Now()
	defer func() { sb.elapsed = time.Since(t0) }()
	switch {
	case ib.skipped != "":
		sb.skipped = "no image folder: " + ib.skipped
		return nil
	case o.peer == "only":
		sb.skipped = "-peer=only"
		return nil
	}
	folder, err := vision.ImageFolder(ib.dir, sourceTransform())
	if err != nil {
		return err
	}
	defer folder.Close()
	samples := folder.Samples()
	// An epoch of a few hundred images is a fraction of a second, which
	// a shared machine's neighbours can double: three times the per-core
	// table's rounds.
	sb.rounds, sb.workers = 3*imgOpts.rounds, sourceWorkers
	if o.quick {
		sb.rounds = 1
	}
	sb.rounds = max(sb.rounds, 1)
	sb.n = len(samples)
	// A shard per 64 images, at least 8, so that 4 workers each get some.
	sb.nShards = max(8, sb.n/64)
	dir, err := os.MkdirTemp("", "tb-bench-sources-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tars, parquets, size, err := packShards(samples, sb.nShards, dir)
	if err != nil {
		return err
	}
	sb.bytes = size

	pipe, err := vision.NewPipeline(sourceTransform())
	if err != nil {
		return err
	}
	defer pipe.Close()
	ctx := context.Background()
	type source struct {
		name string
		ds   engine.Dataset
		src  *shards.Source
	}
	iterable := func(names []string, rec shards.DecodeFunc, opts ...shards.Option) (*shards.Source, engine.Dataset, error) {
		src, err := shards.FromNames(names, pipe.Schema(), rec, opts...)
		if err != nil {
			return nil, nil, err
		}
		d, err := engine.FromIterable(ctx, src, engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: shardBuffer})
		return src, d, err
	}
	tarSrc, tarDS, err := iterable(tars, pipe.Record("jpg", "cls"))
	if err != nil {
		return err
	}
	defer tarSrc.Close()
	pqSrc, pqDS, err := iterable(parquets, pipe.Record("image", "label"))
	if err != nil {
		return err
	}
	defer pqSrc.Close()
	sources := []source{
		{"ImageFolder (files on local disk)", folder, nil},
		{"tar shards, local disk", tarDS, tarSrc},
		{"Parquet shards (Hugging Face layout), local disk", pqDS, pqSrc},
	}
	if _, err := s3test.Binary(); err != nil {
		sb.notes = append(sb.notes, fmt.Sprintf("No S3 row: %v.", err))
	} else {
		srv, err := s3test.Start(filepath.Join(dir, "s3"))
		if err != nil {
			return err
		}
		defer srv.Stop()
		restore := setEnv(srv.Env())
		defer restore()
		opener := &shards.Opener{}
		defer opener.CloseIdleConnections()
		if err := upload(opener, "sources", tars); err != nil {
			return err
		}
		s3Src, s3DS, err := iterable(mapNames(tars, func(n string) string { return "s3://sources/" + filepath.Base(n) }),
			pipe.Record("jpg", "cls"), shards.UseOpener(opener))
		if err != nil {
			return err
		}
		defer s3Src.Close()
		sources = append(sources, source{"tar shards, S3 (versitygw on 127.0.0.1)", s3DS, s3Src})
	}

	loaders := make([]*engine.Loader, len(sources))
	for i, s := range sources {
		cfg := engine.Config{BatchSize: sourceBatch, DropLast: true, Workers: sb.workers, SkipZeroing: true, WorldSize: 1}
		if s.src == nil {
			cfg.Shuffle = true // a map-style folder; the shards shuffle themselves
		}
		if loaders[i], err = engine.New(s.ds, cfg); err != nil {
			return err
		}
		defer loaders[i].Close()
	}
	sb.rows = make([]sourceRow, len(sources))
	for i, s := range sources {
		sb.rows[i].Source = s.name
	}
	delivered := 0
	for e := range sb.rounds + 1 { // a warm-up epoch of each first
		for i := range sources {
			n := 0
			t0, c0 := time.Now(), cputime.Process()
			for b, err := range loaders[i].Epoch(ctx, e) {
				if err != nil {
					return fmt.Errorf("%s: %w", sources[i].name, err)
				}
				n += b.Len()
			}
			if e > 0 {
				sb.rows[i].Seconds = append(sb.rows[i].Seconds, time.Since(t0).Seconds())
				sb.rows[i].CPU = append(sb.rows[i].CPU, (cputime.Process() - c0).Seconds())
			}
			if i == 0 {
				delivered = n
			} else if n != delivered {
				return fmt.Errorf("%s delivered %d images an epoch, the folder %d", sources[i].name, n, delivered)
			}
		}
	}
	for i, s := range sources {
		sb.rows[i].ImagesPerS = float64(delivered) / median(sb.rows[i].Seconds)
		if s.src != nil {
			sb.rows[i].Retries = s.src.ReadRetries()
		}
	}
	// Each ratio from the same round: a rate over another is the other's
	// epoch time over its own.
	ratio := func(name string, a, b int, target string) {
		if a >= len(sb.rows) {
			return
		}
		r := sourceRatio{Name: name, Target: target}
		for k := range sb.rows[a].Seconds {
			r.Rounds = append(r.Rounds, sb.rows[b].Seconds[k]/sb.rows[a].Seconds[k])
		}
		r.Median = median(r.Rounds)
		sb.ratios = append(sb.ratios, r)
	}
	ratio("tar shards, local ÷ folder", 1, 0, "≥ 0.95")
	ratio("Parquet shards, local ÷ folder", 2, 0, "≥ 0.95")
	ratio("tar shards, S3 ÷ tar shards, local", 3, 1, "≥ 0.9")
	// The CPU an epoch costs, beside its time: on a machine shared with
	// other jobs an epoch's time moves with theirs, round by round, while
	// what this process spends on the same images (decoding, reading the
	// shards, collecting their garbage) moves far less, so this ratio
	// shows what a source costs above the folder where the time ratios
	// are noise. Informational: the targets are the time ratios.
	sb.cpuRatios = nil
	for _, i := range []int{1, 2, 3} {
		if i >= len(sb.rows) || median(sb.rows[0].CPU) <= 0 {
			break
		}
		r := sourceRatio{Name: "CPU an epoch, folder ÷ " + sb.rows[i].Source}
		for k := range sb.rows[i].CPU {
			r.Rounds = append(r.Rounds, sb.rows[0].CPU[k]/sb.rows[i].CPU[k])
		}
		r.Median = median(r.Rounds)
		sb.cpuRatios = append(sb.cpuRatios, r)
	}
	for _, l := range loaders {
		l.Close()
	}
	return sb.againstPeer(o, p, tarDS, filepath.Dir(tars[0]))
}

// againstPeer loads the tar shards with tensorbatch and with PyTorch at
// each of the image table's worker counts: the best epoch of the two
// after the first, as the image loader table does.
func (sb *sourceBench) againstPeer(o *options, p *peer, ds engine.Dataset, tarDir string) error {
	workers := imgOpts.workers
	if workers == "" {
		workers = "0,1,2,4"
	}
	if o.quick {
		workers = "2"
	}
	for _, w := range splitInts(workers) {
		row, err := loaderRow(ds, engine.Config{BatchSize: sourceBatch, DropLast: true, Workers: w, SkipZeroing: true, WorldSize: 1})
		if err != nil {
			return err
		}
		sb.loaders = append(sb.loaders, row)
	}
	switch {
	case p == nil || o.peer == "off":
		sb.peerNote = "no PyTorch"
		return nil
	case o.quick:
		sb.peerNote = "-quick runs no peer"
		return nil
	}
	for _, w := range splitInts(workers) {
		var out struct {
			ImagesPerS  float64 `json:"images_per_s"`
			FirstBatchS float64 `json:"first_batch_s"`
			PeakRSSMB   float64 `json:"peak_rss_mb"`
			Version     string  `json:"version"`
		}
		if err := peerJSON("peer_shards.py", &out, "loader", tarDir, "--workers", strconv.Itoa(w)); err != nil {
			return err
		}
		sb.loaders = append(sb.loaders, imageLoaderRow{Loader: "pytorch " + out.Version, Workers: w, ImagesPerS: out.ImagesPerS,
			FirstBatchS: out.FirstBatchS, PeakRSSMB: out.PeakRSSMB})
	}
	return nil
}

// setEnv sets the environment kv ("K=V"; an empty V unsets K) and returns
// a function that restores what was there.
func setEnv(kv []string) (restore func()) {
	type old struct {
		k, v string
		ok   bool
	}
	var olds []old
	for _, e := range kv {
		k, v, _ := bytes.Cut([]byte(e), []byte("="))
		ov, ok := os.LookupEnv(string(k))
		olds = append(olds, old{string(k), ov, ok})
		if len(v) == 0 {
			os.Unsetenv(string(k))
		} else {
			os.Setenv(string(k), string(v))
		}
	}
	return func() {
		for _, o := range olds {
			if o.ok {
				os.Setenv(o.k, o.v)
			} else {
				os.Unsetenv(o.k)
			}
		}
	}
}

// hfImage and hfRow are a row of an image classification dataset as
// Hugging Face's datasets writes it: a datasets.Image struct and a
// ClassLabel.
type hfImage struct {
	Bytes []byte `parquet:"bytes,optional"`
	Path  string `parquet:"path,optional"`
}

type hfRow struct {
	Image hfImage `parquet:"image"`
	Label int64   `parquet:"label"`
}

// parquetRowGroup is the rows of a Parquet row group, near what datasets
// writes for images (it caps a row group's bytes).
const parquetRowGroup = 64

// packShards writes samples, in a shuffled order (a fixed seed; as a
// dataset is shuffled before it is sharded), into n WebDataset tar
// shards (<key>.jpg, <key>.cls) under dir/tar and n Parquet shards under
// dir/parquet. It returns their names and the images' bytes.
func packShards(samples []vision.Sample, n int, dir string) (tars, parquets []string, size int64, err error) {
	order := rand.New(rand.NewPCG(23, 23)).Perm(len(samples))
	for _, sub := range []string{"tar", "parquet"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, nil, 0, err
		}
	}
	for s := range n {
		lo, hi := s*len(order)/n, (s+1)*len(order)/n
		var tbuf bytes.Buffer
		tw := tar.NewWriter(&tbuf)
		var rows []hfRow
		for _, i := range order[lo:hi] {
			smp := samples[i]
			data, err := os.ReadFile(smp.Path)
			if err != nil {
				return nil, nil, 0, err
			}
			size += int64(len(data))
			key := fmt.Sprintf("%08d", i)
			for _, m := range []struct {
				ext  string
				data []byte
			}{{"jpg", data}, {"cls", []byte(strconv.Itoa(smp.Label))}} {
				if err := tw.WriteHeader(&tar.Header{Name: key + "." + m.ext, Mode: 0o644, Size: int64(len(m.data))}); err != nil {
					return nil, nil, 0, err
				}
				if _, err := tw.Write(m.data); err != nil {
					return nil, nil, 0, err
				}
			}
			rows = append(rows, hfRow{Image: hfImage{Bytes: data, Path: filepath.Base(smp.Path)}, Label: int64(smp.Label)})
		}
		if err := tw.Close(); err != nil {
			return nil, nil, 0, err
		}
		name := filepath.Join(dir, "tar", fmt.Sprintf("train-%04d.tar", s))
		if err := os.WriteFile(name, tbuf.Bytes(), 0o644); err != nil {
			return nil, nil, 0, err
		}
		tars = append(tars, name)
		name = filepath.Join(dir, "parquet", fmt.Sprintf("train-%05d-of-%05d.parquet", s, n))
		if err := writeParquet(name, rows); err != nil {
			return nil, nil, 0, err
		}
		parquets = append(parquets, name)
	}
	return tars, parquets, size, nil
}

// writeParquet writes rows as datasets does: Snappy, row groups of
// parquetRowGroup rows.
func writeParquet(name string, rows []hfRow) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := parquet.NewGenericWriter[hfRow](f, parquet.Compression(&parquet.Snappy))
	for len(rows) > 0 {
		k := min(parquetRowGroup, len(rows))
		if _, err := w.Write(rows[:k]); err != nil {
			f.Close()
			return err
		}
		if err := w.Flush(); err != nil { // ends the row group
			f.Close()
			return err
		}
		rows = rows[k:]
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// loaderRow runs three epochs of ds through a Loader with cfg: the best
// epoch after the first, the first batch, the peak RSS.
func loaderRow(ds engine.Dataset, cfg engine.Config) (imageLoaderRow, error) {
	resetPeakRSS()
	l, err := engine.New(ds, cfg)
	if err != nil {
		return imageLoaderRow{}, err
	}
	defer l.Close()
	row := imageLoaderRow{Loader: "tensorbatch", Workers: cfg.Workers}
	for e := range 3 {
		t0 := time.Now()
		n := 0
		for b, err := range l.Epoch(context.Background(), e) {
			if err != nil {
				return row, err
			}
			if n == 0 && e == 0 {
				row.FirstBatchS = time.Since(t0).Seconds()
			}
			n += b.Len()
		}
		if e > 0 { // the steady rate: the best epoch after the first, as the peer reports it
			row.ImagesPerS = max(row.ImagesPerS, float64(n)/time.Since(t0).Seconds())
		}
	}
	row.PeakRSSMB = peakRSSMB()
	return row, nil
}

func (sb *sourceBench) report(w io.Writer, dir string) error {
	fmt.Fprintf(w, "## Images from any source (issue 23)\n\n")
	if sb.skipped != "" {
		fmt.Fprintf(w, "> Skipped: %s.\n\n", sb.skipped)
		return nil
	}
	fmt.Fprintf(w, "The image rows' %d JPEGs (%.1f MB) as an ImageFolder, and packed in a shuffled order into %d WebDataset tar shards and %d Parquet shards (Hugging Face's layout: image {bytes, path}, label; Snappy, row groups of %d), loaded by one vision.Pipeline (train transform, Exact), batch %d, drop last, Workers %d; shards: shuffled shards and a shuffle buffer of %d; the folder: shuffled. A warm-up epoch of each, then %d round(s) of one epoch of each in turn; images/s from the median epoch, every ratio from the epochs of the same round (median over rounds). Took %.0f s.\n\n",
		sb.n, float64(sb.bytes)/1e6, sb.nShards, sb.nShards, parquetRowGroup, sourceBatch, sb.workers, shardBuffer, sb.rounds, sb.elapsed.Seconds())
	fmt.Fprintln(w, "| source | images/s | epochs (s) | CPU an epoch (s) | read retries |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for _, r := range sb.rows {
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %d |\n", r.Source, r.ImagesPerS, fmtSeconds(r.Seconds), fmtSeconds(r.CPU), r.Retries)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| ratio (same round) | median | rounds | target |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, r := range sb.ratios {
		fmt.Fprintf(w, "| %s | %.2f× | %s | %s |\n", r.Name, r.Median, fmtRates(r.Rounds), r.Target)
	}
	for _, r := range sb.cpuRatios {
		fmt.Fprintf(w, "| %s | %.2f× | %s | none (informational) |\n", r.Name, r.Median, fmtRates(r.Rounds))
	}
	for _, n := range sb.notes {
		fmt.Fprintf(w, "\n%s\n", n)
	}
	fmt.Fprintln(w)
	if len(sb.loaders) > 0 {
		fmt.Fprintln(w, "### tar shards: tensorbatch against PyTorch (IterableDataset over tarfile, split by get_worker_info(), torchvision's transform; fork, persistent workers), best epoch after the first of 3")
		fmt.Fprintln(w)
		if sb.peerNote != "" {
			fmt.Fprintf(w, "No peer: %s.\n\n", sb.peerNote)
		}
		fmt.Fprintln(w, "| Workers | tensorbatch images/s | first batch | peak RSS | PyTorch images/s | first batch | peak RSS | tensorbatch ÷ PyTorch |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
		for _, r := range sb.loaders {
			if r.Loader != "tensorbatch" {
				continue
			}
			line := fmt.Sprintf("| %d | %.0f | %.3f s | %.0f MB |", r.Workers, r.ImagesPerS, r.FirstBatchS, r.PeakRSSMB)
			if t, ok := peerAt(sb.loaders, r.Workers); ok {
				target := ""
				if r.Workers == 2 {
					target = " (target at Workers 2: ≥ 4×)"
				}
				line += fmt.Sprintf(" %.0f | %.3f s | %.0f MB | %.2f×%s |", t.ImagesPerS, t.FirstBatchS, t.PeakRSSMB, r.ImagesPerS/t.ImagesPerS, target)
			} else {
				line += " — | — | — | — |"
			}
			fmt.Fprintln(w, line)
		}
		fmt.Fprintln(w)
	}
	return sb.write(dir)
}

// peerAt is the PyTorch row of rows at w workers.
func peerAt(rows []imageLoaderRow, w int) (imageLoaderRow, bool) {
	for _, r := range rows {
		if r.Loader != "tensorbatch" && r.Workers == w {
			return r, true
		}
	}
	return imageLoaderRow{}, false
}

func fmtSeconds(v []float64) string {
	var b bytes.Buffer
	for i, x := range v {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%.3f", x)
	}
	return b.String()
}

// write saves sources.json and sources.csv under dir.
func (sb *sourceBench) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(map[string]any{"images": sb.n, "shards": sb.nShards, "bytes": sb.bytes, "workers": sb.workers,
		"rounds": sb.rounds, "sources": sb.rows, "ratios": sb.ratios, "cpu_ratios": sb.cpuRatios, "loaders": sb.loaders}, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sources.json"), js, 0o644); err != nil {
		return err
	}
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Write([]string{"table", "name", "workers", "images_per_s", "ratio"})
	for _, r := range sb.rows {
		cw.Write([]string{"source", r.Source, strconv.Itoa(sb.workers), strconv.FormatFloat(r.ImagesPerS, 'f', 1, 64), ""})
	}
	for _, r := range sb.ratios {
		cw.Write([]string{"ratio", r.Name, strconv.Itoa(sb.workers), "", strconv.FormatFloat(r.Median, 'f', 3, 64)})
	}
	for _, r := range sb.loaders {
		cw.Write([]string{"tar loader", r.Loader, strconv.Itoa(r.Workers), strconv.FormatFloat(r.ImagesPerS, 'f', 1, 64), ""})
	}
	cw.Flush()
	return os.WriteFile(filepath.Join(dir, "sources.csv"), b.Bytes(), 0o644)
}
