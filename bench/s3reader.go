package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
	"github.com/tensorbatch/tensorbatch/internal/cputime"
	"github.com/tensorbatch/tensorbatch/internal/s3test"
	"github.com/tensorbatch/tensorbatch/shards"
	"github.com/tensorbatch/tensorbatch/vision"
)

// The rows of issue 24: tensorbatch's S3 reader against a bare
// aws-sdk-go-v2 loop over the same objects on the same versitygw
// (GetObject, then io.Copy to io.Discard, or archive/tar and the same
// JPEG decode), and an epoch from a warm shard cache against the same
// shards on local disk. Each pass reads every shard, s3Goroutines
// shards at a time, with no loader around it, so that the ratio is the
// reader's; passes alternate (A, B, B, A, ...) after a warm-up pass of
// each, and every ratio is from the passes of one round.

// s3ReaderBench holds the rows.
type s3ReaderBench struct {
	skipped     string
	rounds      int
	shards      int
	rawRecords  int
	rawBytes    int
	recordSizes []int // the raw records rows' member sizes
	jpegRecords int
	side        int
	rows        []s3ReaderRow
	loadBefore  string
	loadAfter   string
	cacheFill   int64 // requests of epoch 1 through the cache
	cacheLater  int64 // requests of the epochs after it
	elapsed     time.Duration
}

// s3ReaderRow is one ratio: ours (A) against the reference (B).
type s3ReaderRow struct {
	Row      string    `json:"row"`
	Ours     string    `json:"ours"`
	Ref      string    `json:"reference"`
	MB       float64   `json:"mb"` // a pass's shard bytes
	OursS    []float64 `json:"ours_s"`
	RefS     []float64 `json:"reference_s"`
	Ratios   []float64 `json:"ratios"`     // ref time ÷ ours: our rate ÷ the reference's
	CPU      []float64 `json:"cpu_ratios"` // the same for this process's CPU time
	Median   float64   `json:"median"`
	CPUMed   float64   `json:"cpu_median"`
	Target   float64   `json:"target"` // 0: none (a row for context)
	Met      bool      `json:"met"`
	Sameness string    `json:"sameness"` // what both sides do
}

const s3Goroutines = 2 // this machine's cores; both sides alike

func (sb *s3ReaderBench) sizes(o *options) {
	sb.shards, sb.rawRecords, sb.rawBytes, sb.jpegRecords, sb.side, sb.rounds = 8, 16, 256<<10, 64, 256, 15
	sb.recordSizes = []int{4 << 10, 64 << 10, 256 << 10, 4 << 20}
	if o.quick {
		sb.shards, sb.rawRecords, sb.rawBytes, sb.jpegRecords, sb.side, sb.rounds = 4, 8, 64<<10, 8, 64, 3
		sb.recordSizes = []int{4 << 10, 64 << 10}
	}
}

func (sb *s3ReaderBench) run(o *options) error {
	t0 := time.Now()
	defer func() { sb.elapsed = time.Since(t0) }()
	sb.sizes(o)
	if _, err := s3test.Binary(); err != nil {
		sb.skipped = err.Error()
		return nil
	}
	dir, err := os.MkdirTemp("", "tb-bench-s3reader-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := s3test.Start(filepath.Join(dir, "s3"))
	if err != nil {
		return err
	}
	defer srv.Stop()
	restore := setEnv(srv.Env()) // bench/sources.go
	defer restore()
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	// The bare loop's client: the SDK's defaults, path-style as for any
	// custom endpoint, asking for no response checksum, as the Opener
	// does (versitygw sends none either way; asking makes the SDK log so
	// to stderr at every GetObject).
	sdk := s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.UsePathStyle = true
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	sb.loadBefore = loadAverage()
	defer func() { sb.loadAfter = loadAverage() }()

	pipe, err := vision.NewPipeline(vision.Transform{Size: sb.side, ResizeSize: sb.side, Output: vision.Uint8CHW, Mode: vision.Fast})
	if err != nil {
		return err
	}
	defer pipe.Close()
	raw, err := sb.bucket(srv, dir, "raw", sb.rawRecords, func(id int) []byte { return s3test.Raw(id, sb.rawBytes) })
	if err != nil {
		return err
	}
	jpg, err := sb.bucket(srv, dir, "jpeg", sb.jpegRecords, func(id int) []byte { return s3test.JPEG(id, sb.side) })
	if err != nil {
		return err
	}
	rawSchema := collate.Schema{{Name: "image", DType: collate.Uint8, Shape: []int{sb.rawBytes}}, {Name: "label", DType: collate.Int64}}

	// Raw copy: the same bytes to io.Discard.
	opener := &shards.Opener{}
	defer opener.CloseIdleConnections()
	if err := sb.compare(fmt.Sprintf("raw copy (%d KiB records)", sb.rawBytes>>10), raw,
		"shards.Opener.Open + io.Copy to io.Discard", func(ctx context.Context, i int) error {
			rc, err := opener.Open(ctx, raw.names[i])
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(io.Discard, rc)
			return err
		},
		"GetObject + io.Copy to io.Discard", raw.sdkCopy(sdk), 0.9,
		"the same objects' bytes to io.Discard"); err != nil {
		return err
	}
	// Raw records: the Source, each record copied into a sample, against
	// the bare loop over the same objects, from 4 KiB to 4 MiB members
	// (shards of about 4 MiB); and the same DecodeFunc without
	// shards.Release, for context.
	for _, size := range sb.recordSizes {
		set, err := sb.bucket(srv, dir, fmt.Sprintf("raw-%d", size), max(2, sb.rawRecords*sb.rawBytes/size),
			func(id int) []byte { return s3test.Raw(id, size) })
		if err != nil {
			return err
		}
		schema := collate.Schema{{Name: "image", DType: collate.Uint8, Shape: []int{size}}, {Name: "label", DType: collate.Int64}}
		for _, release := range []bool{true, false} {
			decode, ours, target, same := decodeRaw, "shards.Source, DecodeFunc calls shards.Release", 0.9,
				"not the same work: the Source also parses the tar and copies each record into a sample"
			if !release {
				decode, ours, target, same = decodeRawKept, "the same, without shards.Release", 0,
					"as the row above, with a DecodeFunc that keeps the records' bytes (no shards.Release): each member in new memory; for context"
			}
			src, err := shards.FromNames(set.names, schema, decode, shards.UseOpener(opener), shards.IndexFile(""))
			if err != nil {
				return err
			}
			defer src.Close()
			if err := sb.compare(fmt.Sprintf("raw records (%s)", kib(size)), set, ours, set.sourcePass(src),
				"GetObject + io.Copy to io.Discard", set.sdkCopy(sdk), target, same); err != nil {
				return err
			}
		}
	}
	// JPEG: the same decode of the same bytes on both sides.
	jpgSrc, err := shards.FromNames(jpg.names, pipe.Schema(), pipe.Record("jpg", "cls"), shards.UseOpener(opener), shards.IndexFile(""))
	if err != nil {
		return err
	}
	defer jpgSrc.Close()
	if err := sb.compare(fmt.Sprintf("JPEG %d² decode", sb.side), jpg,
		"shards.Source + vision.Pipeline.Record", jpg.sourcePass(jpgSrc),
		"GetObject + archive/tar + vision.Pipeline.Decode", jpg.sdkDecode(sdk, pipe), 0.9,
		"each record's JPEG decoded by the same vision.Pipeline (eval transform, Fast, uint8 CHW)"); err != nil {
		return err
	}
	// The cache: epoch 2 onwards against local files.
	cacheOpener := &shards.Opener{}
	defer cacheOpener.CloseIdleConnections()
	cached, err := shards.FromNames(raw.names, rawSchema, decodeRaw, shards.UseOpener(cacheOpener),
		shards.IndexFile(""), shards.Cache(filepath.Join(dir, "cache"), 1<<40))
	if err != nil {
		return err
	}
	defer cached.Close()
	local, err := shards.FromNames(raw.files, rawSchema, decodeRaw)
	if err != nil {
		return err
	}
	defer local.Close()
	if err := raw.each(raw.sourcePass(cached)); err != nil { // epoch 1: downloads
		return err
	}
	sb.cacheFill = cached.StorageStats().Requests
	if err := sb.compare(fmt.Sprintf("epoch 2 from the cache (raw %d KiB records)", sb.rawBytes>>10), raw,
		"shards.Cache, warm", raw.sourcePass(cached),
		"the same shards on local disk", raw.sourcePass(local), 0.95,
		"both shards.Source, every record decoded into a sample"); err != nil {
		return err
	}
	sb.cacheLater = cached.StorageStats().Requests - sb.cacheFill
	if sb.cacheLater != 0 {
		return fmt.Errorf("the epochs after the first from a warm cache made %d requests, want 0", sb.cacheLater)
	}
	return nil
}

// kib names a size in KiB, or MiB from 1 MiB.
func kib(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// s3Set is a set of shards: local files, and the same in a bucket.
type s3Set struct {
	bucket  string
	files   []string
	names   []string // s3://
	keys    []string
	records int
	bytes   int64
}

// bucket writes the shards of a set (records of a .cls and a .jpg member
// made by member) under dir and uploads them to a bucket of its name.
func (sb *s3ReaderBench) bucket(srv *s3test.Server, dir, name string, records int, member func(id int) []byte) (*s3Set, error) {
	set := &s3Set{bucket: "issue24-" + name, records: records}
	if err := srv.CreateBucket(set.bucket); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		return nil, err
	}
	for s := range sb.shards {
		data := s3test.Shard(s*records, records, member)
		key := fmt.Sprintf("shard-%04d.tar", s)
		file := filepath.Join(dir, name, key)
		if err := os.WriteFile(file, data, 0o644); err != nil {
			return nil, err
		}
		if err := srv.Put(set.bucket, key, data); err != nil {
			return nil, err
		}
		set.files = append(set.files, file)
		set.keys = append(set.keys, key)
		set.names = append(set.names, "s3://"+set.bucket+"/"+key)
		set.bytes += int64(len(data))
	}
	return set, nil
}

// each runs f on every shard index, s3Goroutines at a time.
func (set *s3Set) each(f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var next atomic.Int64
	errs := make([]error, s3Goroutines)
	var wg sync.WaitGroup
	for g := range s3Goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(set.names) {
					return
				}
				if err := f(ctx, i); err != nil {
					errs[g] = err
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// sdkCopy is the bare loop: GetObject and io.Copy to io.Discard.
func (set *s3Set) sdkCopy(c *s3.Client) func(ctx context.Context, i int) error {
	return func(ctx context.Context, i int) error {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(set.bucket), Key: aws.String(set.keys[i])})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		n, err := io.Copy(io.Discard, out.Body)
		if err == nil && n != aws.ToInt64(out.ContentLength) {
			err = fmt.Errorf("%s: %d bytes of %d", set.keys[i], n, aws.ToInt64(out.ContentLength))
		}
		return err
	}
}

// sdkDecode is the bare loop with a real consumer: GetObject, archive/tar,
// and Pipeline.Decode of each .jpg member into a sample's bytes.
func (set *s3Set) sdkDecode(c *s3.Client, pipe *vision.Pipeline) func(ctx context.Context, i int) error {
	return func(ctx context.Context, i int) error {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(set.bucket), Key: aws.String(set.keys[i])})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		dst := make([]byte, pipe.Schema()[0].Bytes())
		n, err := s3test.DecodeTarJPEGs(out.Body, func(b []byte) error { return pipe.Decode(b, nil, dst) })
		if err != nil {
			return err
		}
		if n != set.records {
			return fmt.Errorf("%s: %d images of %d", set.keys[i], n, set.records)
		}
		return nil
	}
}

// sourcePass reads every record of every shard of src and decodes it
// into a sample.
func (set *s3Set) sourcePass(src *shards.Source) func(ctx context.Context, i int) error {
	var epoch atomic.Int64
	return func(ctx context.Context, i int) error {
		layout, err := collate.NewLayout(src.Schema(), 1)
		if err != nil {
			return err
		}
		buf := make([]byte, layout.Size())
		names := src.Names()
		r, err := src.Open(ctx, engine.ShardInfo{Name: names[i], Samples: set.records})
		if err != nil {
			return err
		}
		defer r.Close()
		e := int(epoch.Add(1))
		for k := 0; ; k++ {
			rec, err := r.Next(ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := src.Decode(ctx, rec, enginetest.NewSlot(1, e, i*set.records+k, layout, buf, 0)); err != nil {
				return err
			}
		}
	}
}

// compare runs a warm-up pass of each side, then sb.rounds rounds of
// both, alternating which goes first, and adds the row.
func (sb *s3ReaderBench) compare(row string, set *s3Set, ours string, oursF func(context.Context, int) error,
	ref string, refF func(context.Context, int) error, target float64, sameness string) error {
	r := s3ReaderRow{Row: row, Ours: ours, Ref: ref, MB: float64(set.bytes) / 1e6, Target: target, Sameness: sameness}
	pass := func(f func(context.Context, int) error) (wall, cpu time.Duration, err error) {
		c0, t0 := cputime.Process(), time.Now()
		err = set.each(f)
		return time.Since(t0), cputime.Process() - c0, err
	}
	for k := range sb.rounds + 1 {
		var ow, oc, rw, rc time.Duration
		var err error
		if k%2 == 0 {
			if ow, oc, err = pass(oursF); err == nil {
				rw, rc, err = pass(refF)
			}
		} else {
			if rw, rc, err = pass(refF); err == nil {
				ow, oc, err = pass(oursF)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", row, err)
		}
		if k == 0 {
			continue
		}
		r.OursS, r.RefS = append(r.OursS, ow.Seconds()), append(r.RefS, rw.Seconds())
		r.Ratios = append(r.Ratios, rw.Seconds()/ow.Seconds())
		if oc > 0 {
			r.CPU = append(r.CPU, rc.Seconds()/oc.Seconds())
		}
	}
	r.Median = median(r.Ratios)
	if len(r.CPU) > 0 {
		r.CPUMed = median(r.CPU)
	}
	r.Met = target > 0 && r.Median >= target
	sb.rows = append(sb.rows, r)
	return nil
}

// loadAverage is /proc/loadavg's three load averages, or "".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], ", ")
}

func (sb *s3ReaderBench) report(w io.Writer, dir string) error {
	fmt.Fprintf(w, "## S3 reader against a bare SDK loop; shard cache against local disk (issue 24)\n\n")
	if sb.skipped != "" {
		fmt.Fprintf(w, "> Skipped: %s.\n\n", sb.skipped)
		return nil
	}
	fmt.Fprintf(w, "%d tar shards a set on versitygw (127.0.0.1, sharing the cores), each pass every shard, %d goroutines on both sides, no loader: raw records of %d KiB (%d a shard; the raw records rows: each size's shards about as large), JPEGs of %d² (%d a shard). A warm-up pass of each side, then %d rounds of one pass of each, alternating which goes first; every ratio is from one round (the reference's time ÷ ours: our rate ÷ its), median over rounds; \"CPU\" is the same for this process's CPU time (the client's; the server's is alike on both sides). Load average %s before, %s after. Took %.0f s.\n\n",
		sb.shards, s3Goroutines, sb.rawBytes>>10, sb.rawRecords, sb.side, sb.jpegRecords, sb.rounds, sb.loadBefore, sb.loadAfter, sb.elapsed.Seconds())
	fmt.Fprintln(w, "| row | ours | reference | MB | ours MB/s | reference MB/s | ratio (median) | rounds | CPU ratio | target | met? |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range sb.rows {
		target, met := "—", "—"
		if r.Target > 0 {
			target, met = fmt.Sprintf("≥ %.2f", r.Target), map[bool]string{true: "yes", false: "**no**"}[r.Met]
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.1f | %.0f | %.0f | **%.2f×** | %s | %.2f× | %s | %s |\n", r.Row, r.Ours, r.Ref, r.MB,
			r.MB/median(r.OursS), r.MB/median(r.RefS), r.Median, fmtRates(r.Ratios), r.CPUMed, target, met)
	}
	fmt.Fprintln(w)
	for _, r := range sb.rows {
		fmt.Fprintf(w, "- %s: %s.\n", r.Row, r.Sameness)
	}
	fmt.Fprintf(w, "- Requests to the server: %d in the cache's first epoch, %d in the epochs after it (target 0).\n\n", sb.cacheFill, sb.cacheLater)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(map[string]any{"rounds": sb.rounds, "goroutines": s3Goroutines, "load_before": sb.loadBefore,
		"load_after": sb.loadAfter, "rows": sb.rows, "cache_first_epoch_requests": sb.cacheFill, "cache_later_requests": sb.cacheLater}, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "s3reader.json"), js, 0o644)
}
