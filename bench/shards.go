package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"gonum.org/v1/gonum/stat"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/corpus"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/s3test"
	"github.com/tensorbatch/tensorbatch/shards"
	s3store "github.com/tensorbatch/tensorbatch/shards/s3" // s3://, read by the S3 rows
	"github.com/tensorbatch/tensorbatch/vision"
)

// shardRow is one measurement of the streaming table.
type shardRow struct {
	Workload    string  `json:"workload"`
	Source      string  `json:"source"`
	Samples     int     `json:"samples"`
	Bytes       int64   `json:"bytes"`
	Seconds     float64 `json:"seconds"` // median epoch
	SamplesPerS float64 `json:"samples_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	VsRef       float64 `json:"vs_reference"` // ÷ the workload's first row
	Retries     int64   `json:"read_retries"`
}

// shardBench measures streaming: the same WebDataset shards read from
// local files and from a local S3 server (versitygw), and token windows
// against a plain copy of the same bytes.
type shardBench struct {
	rows  []shardRow
	notes []string
}

// shardSizes is the bench's scale: shards × samples, JPEG side, raw
// payload bytes, tokens in the file, context.
type shardSizes struct {
	shards, perShard, side, raw int
	tokens, ctx                 int
	epochs                      int
}

func (sb *shardBench) sizes(o *options) shardSizes {
	if o.quick {
		return shardSizes{shards: 4, perShard: 16, side: 64, raw: 16 << 10, tokens: 1 << 20, ctx: 1024, epochs: 1}
	}
	return shardSizes{shards: 8, perShard: 64, side: 256, raw: 256 << 10, tokens: 1 << 25, ctx: 1024, epochs: 3}
}

func (sb *shardBench) run(o *options) error {
	z := sb.sizes(o)
	dir, err := os.MkdirTemp("", "tb-bench-shards-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := sb.streams(o, z, dir); err != nil {
		return err
	}
	return sb.tokens(o, z, dir)
}

// streams writes two sets of shards (JPEG images to decode, and raw
// bytes to copy) and loads each from disk and from versitygw.
func (sb *shardBench) streams(o *options, z shardSizes, dir string) error {
	type workload struct {
		name   string
		member func(id int) []byte
		schema collate.Schema
		decode shards.DecodeFunc
	}
	side := z.side
	// The JPEGs decode through vision, as every image source does: the
	// eval transform at the image's own size (Resize to side, CenterCrop
	// side) to uint8 CHW, Fast.
	pipe, err := vision.NewPipeline(vision.Transform{Size: side, ResizeSize: side, Output: vision.Uint8CHW, Mode: vision.Fast})
	if err != nil {
		return err
	}
	defer pipe.Close()
	works := []workload{
		{fmt.Sprintf("JPEG %d² decode (vision.Pipeline.Record)", side), func(id int) []byte { return s3test.JPEG(id, side) },
			pipe.Schema(), pipe.Record("jpg", "cls")},
		{fmt.Sprintf("raw %d KiB copy", z.raw>>10), func(id int) []byte { return s3test.Raw(id, z.raw) },
			collate.Schema{{Name: "image", DType: collate.Uint8, Shape: []int{z.raw}}, {Name: "label", DType: collate.Int64}},
			decodeRaw},
	}
	var srv *s3test.Server
	if _, err := s3test.Binary(); err != nil {
		sb.notes = append(sb.notes, fmt.Sprintf("No S3 rows: %v.", err))
	} else {
		if srv, err = s3test.Start(filepath.Join(dir, "s3")); err != nil {
			return err
		}
		defer srv.Stop()
		defer setEnv(srv.Env())() // bench/sources.go
	}
	for wi, w := range works {
		local := filepath.Join(dir, fmt.Sprintf("w%d", wi))
		if err := os.MkdirAll(local, 0o755); err != nil {
			return err
		}
		var names []string
		var size int64
		for s := range z.shards {
			data := s3test.Shard(s*z.perShard, z.perShard, w.member)
			name := filepath.Join(local, fmt.Sprintf("shard-%04d.tar", s))
			if err := os.WriteFile(name, data, 0o644); err != nil {
				return err
			}
			names, size = append(names, name), size+int64(len(data))
		}
		src, err := shards.FromNames(names, w.schema, w.decode)
		if err != nil {
			return err
		}
		sources := []engine.Iterable{src}
		labels := []string{"local files"}
		var opener *shards.Opener
		if srv != nil {
			bucket := fmt.Sprintf("bench%d", wi)
			opener = &shards.Opener{}
			defer opener.CloseIdleConnections()
			if err := upload(opener, bucket, names); err != nil {
				return err
			}
			remote, err := shards.FromNames(mapNames(names, func(n string) string { return "s3://" + bucket + "/" + filepath.Base(n) }),
				w.schema, w.decode, shards.UseOpener(opener))
			if err != nil {
				return err
			}
			sources, labels = append(sources, remote), append(labels, "S3 (versitygw, 127.0.0.1)")
		}
		rows, err := sb.interleaved(z, w.name, labels, sources, size)
		if err != nil {
			return err
		}
		if opener != nil {
			rows[1].Retries = opener.ReadRetries()
		}
		sb.rows = append(sb.rows, rows...)
	}
	return nil
}

func mapNames(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

// upload makes bucket and puts files into it, with their shard list.
func upload(o *shards.Opener, bucket string, files []string) error {
	ctx := context.Background()
	c, err := s3store.NewClient(ctx)
	if err != nil {
		return err
	}
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return err
	}
	put := func(key string, data []byte) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)})
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := put(filepath.Base(f), data); err != nil {
			return err
		}
	}
	list, err := shards.BuildIndex(ctx, o, files)
	if err != nil {
		return err
	}
	js, err := json.Marshal(list)
	if err != nil {
		return err
	}
	return put("shardlist.json", js)
}

// interleaved loads each source's epochs in turn, after a warm-up epoch
// of each (on this shared machine, load from elsewhere then hits both
// alike), and returns a row per source: its median epoch, and its median
// ratio to the first source's epoch next to it.
func (sb *shardBench) interleaved(z shardSizes, work string, labels []string, sources []engine.Iterable, size int64) ([]shardRow, error) {
	ctx := context.Background()
	loaders := make([]*engine.Loader, len(sources))
	n := 0
	for i, src := range sources {
		d, err := engine.FromIterable(ctx, src, engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 64})
		if err != nil {
			return nil, err
		}
		n = d.Len()
		if loaders[i], err = engine.New(d, engine.Config{BatchSize: 16, Workers: 2, SkipZeroing: true, WorldSize: 1, Backend: "cpu"}); err != nil {
			return nil, err
		}
		defer loaders[i].Close()
	}
	return interleave(z.epochs, labels, work, n, size, func(i, e int) error {
		for _, err := range loaders[i].Epoch(ctx, e) {
			if err != nil {
				return fmt.Errorf("%s from %s: %w", work, labels[i], err)
			}
		}
		return nil
	})
}

// interleave times run(i, epoch) for each of the labels in turn, epochs
// times after a warm-up round, and returns their rows.
func interleave(epochs int, labels []string, work string, samples int, size int64, run func(i, epoch int) error) ([]shardRow, error) {
	times := make([][]float64, len(labels))
	ratios := make([][]float64, len(labels))
	for e := range epochs + 1 {
		round := make([]float64, len(labels))
		for i := range labels {
			t0 := time.Now()
			if err := run(i, e); err != nil {
				return nil, err
			}
			round[i] = time.Since(t0).Seconds()
		}
		if e == 0 {
			continue
		}
		for i := range labels {
			times[i] = append(times[i], round[i])
			ratios[i] = append(ratios[i], round[0]/round[i])
		}
	}
	rows := make([]shardRow, len(labels))
	for i, l := range labels {
		s := median(times[i])
		rows[i] = shardRow{Workload: work, Source: l, Samples: samples, Bytes: size, Seconds: s,
			SamplesPerS: float64(samples) / s, MBPerS: float64(size) / s / 1e6, VsRef: median(ratios[i])}
	}
	return rows, nil
}

// median is the empirical median of v (gonum's stat.Quantile).
func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return stat.Quantile(0.5, stat.Empirical, v, nil)
}

// decodeRaw copies a record's .jpg into the sample and keeps nothing of
// it (shards.Release); decodeRawKept is the same without Release.
func decodeRaw(ctx context.Context, rec engine.Record, s *engine.Slot) error {
	shards.Release(ctx)
	return decodeRawKept(ctx, rec, s)
}

func decodeRawKept(_ context.Context, rec engine.Record, s *engine.Slot) error {
	data, err := shards.Field(rec, "jpg")
	if err != nil {
		return err
	}
	copy(s.Tensor("image").Bytes(), data)
	return label(rec, s)
}

func label(rec engine.Record, s *engine.Slot) error {
	v, err := shards.Int(rec, "cls")
	collate.As[int64](s.Tensor("label"))[0] = v
	return err
}

// tokens loads token windows through the loader and copies the same
// windows' bytes with a plain loop on as many goroutines.
func (sb *shardBench) tokens(o *options, z shardSizes, dir string) error {
	path := filepath.Join(dir, "train.bin")
	buf := make([]byte, 2*z.tokens)
	for i := range z.tokens {
		binary.LittleEndian.PutUint16(buf[2*i:], uint16(i*2654435761>>7))
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		return err
	}
	mapped, unmap, err := mapFile(path)
	if err != nil {
		return err
	}
	defer unmap()
	const batch = 32
	for _, out := range []collate.DType{collate.Uint16, collate.Int64} {
		for _, workers := range []int{0, 2} {
			d, err := corpus.Tokens(path, corpus.TokenConfig{Context: z.ctx, Out: out})
			if err != nil {
				return err
			}
			n := d.Len()
			wbytes := int64(z.ctx+1) * int64(out.Size())
			// The reference: the same windows, in the order of the epoch the
			// loader loads in the same round, copied (and widened, for int64)
			// into a batch buffer on as many goroutines as the loader fills
			// on. It is a strict limit: each epoch's order is drawn outside
			// its timing, and each goroutine reuses one cache-hot buffer,
			// where the loader writes each batch in flight into a pinned
			// buffer of its own, which the consumer then holds.
			rounds := z.epochs*3 + 1
			orders := make([][]int, rounds)
			for e := range orders {
				orders[e] = engine.Shuffled{N: n, Seed: 1}.Order(e)
			}
			goroutines := max(workers, 1)
			ref := func(buf []byte, order []int) {
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						dst := make([]byte, batch*int(wbytes))
						for k := g * batch; k < len(order); k += goroutines * batch {
							for j, idx := range order[k:min(k+batch, len(order))] {
								src := buf[idx*z.ctx*2 : (idx*z.ctx+z.ctx+1)*2]
								copyTokens(dst[j*int(wbytes):(j+1)*int(wbytes)], src, out)
							}
						}
					}()
				}
				wg.Wait()
			}
			l, err := engine.New(d, engine.Config{BatchSize: batch, Shuffle: true, Seed: 1, Workers: workers, WorldSize: 1, Backend: "cpu"})
			if err != nil {
				return err
			}
			work := fmt.Sprintf("token windows of %d+1, uint16 → %v, %d workers", z.ctx, out, workers)
			rows, err := interleave(rounds-1, []string{
				fmt.Sprintf("copy loop from the file's mapping, %d goroutine(s) (the limit)", goroutines),
				fmt.Sprintf("copy loop from a heap copy of the file, %d goroutine(s)", goroutines),
				"corpus.Tokens (mmap) through the loader"},
				work, n, int64(n)*wbytes, func(i, e int) error {
					switch i {
					case 0:
						ref(mapped, orders[e])
						return nil
					case 1:
						ref(buf, orders[e])
						return nil
					}
					for _, err := range l.Epoch(context.Background(), e) {
						if err != nil {
							return err
						}
					}
					return nil
				})
			l.Close()
			d.Close()
			if err != nil {
				return err
			}
			sb.rows = append(sb.rows, rows...)
		}
	}
	return nil
}

// copyTokens is the reference's copy: as is, or widened to int64 (on a
// little-endian machine, as the bench's).
func copyTokens(dst, src []byte, out collate.DType) {
	if out == collate.Uint16 {
		copy(dst, src)
		return
	}
	in := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(src))), len(src)/2)
	to := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(dst))), len(in))
	for i, v := range in {
		to[i] = int64(v)
	}
}

// report prints the table and writes shards.json and shards.csv under
// dir.
func (sb *shardBench) report(w io.Writer, dir string) error {
	if len(sb.rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n## Streaming shards and token windows\n\nWebDataset tar shards through engine.FromIterable (2 workers, batch 16, shuffled shards, a shuffle buffer of 64, cpu backend), median of the epochs after a warm-up one: from local files, and the same shards uploaded to a local S3 server (versitygw on 127.0.0.1, sharing the cores). Token windows: corpus.Tokens (mmap'd, batch 32, shuffled) against a plain loop copying the same windows, in the same epoch's order, into a batch buffer on as many goroutines as fill batches: from the file mapped as the dataset maps it (the limit, and the first row), and from a copy of the file on the heap (the whole file read into memory first, which a large token file does not allow; its row's \"vs first row\" shows what the mapping itself costs). Both loops are strict limits: they get each epoch's order for free and reuse one cache-hot buffer a goroutine, where the loader draws the order and writes each batch in flight into its own pinned buffer. Rounds are interleaved, so that load from elsewhere hits both sides alike; \"vs first row\" is the median of the per-round ratios (targets: S3 ≥ 0.9×, token windows ≥ 0.8×).\n\n")
	fmt.Fprintln(w, "| Workload | Source | samples | MB | samples/s | MB/s | vs first row | read retries |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range sb.rows {
		fmt.Fprintf(w, "| %s | %s | %d | %.1f | %.0f | %.0f | %.2f× | %d |\n", r.Workload, r.Source, r.Samples, float64(r.Bytes)/1e6, r.SamplesPerS, r.MBPerS, r.VsRef, r.Retries)
	}
	for _, n := range sb.notes {
		fmt.Fprintf(w, "\n%s\n", n)
	}
	fmt.Fprintf(w, "\nWrote shards.json, shards.csv under %s.\n\n", dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(sb.rows, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "shards.json"), js, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "shards.csv"))
	if err != nil {
		return err
	}
	c := csv.NewWriter(f)
	c.Write([]string{"workload", "source", "samples", "bytes", "seconds", "samples_per_s", "mb_per_s", "vs_reference", "read_retries"})
	for _, r := range sb.rows {
		c.Write([]string{r.Workload, r.Source, strconv.Itoa(r.Samples), strconv.FormatInt(r.Bytes, 10), ff(r.Seconds), ff(r.SamplesPerS), ff(r.MBPerS), ff(r.VsRef), strconv.FormatInt(r.Retries, 10)})
	}
	c.Flush()
	if err := c.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
