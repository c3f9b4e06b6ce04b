package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/shards"
	"github.com/tensorbatch/tensorbatch/vision"
)

// newShardsCmd is the shards group: write, ls, inspect, verify.
func newShardsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "shards",
		Short: "Write, list, inspect and verify WebDataset and Parquet shards",
		Long: `shards works on WebDataset tar and Parquet shards, local or remote. A
SHARDS argument is what shards.New takes: a brace pattern
("train-{0000..0999}.tar"), a folder ("/data/train/",
"s3://bucket/train/"), or a shard list (".../shardlist.json": the shards
it names, with its counts).`,
	}
	c.AddCommand(newShardsWriteCmd(), newShardsLsCmd(), newShardsInspectCmd(), newShardsVerifyCmd())
	return c
}

// readSchema and readNothing are the schema and decoder of a Source read
// for its records alone: eachRecord gives each record back through
// Decode, and readNothing says that nothing of it is kept, so that the
// Source reads the next records into its bytes.
var (
	readSchema  = collate.Schema{{Name: "none", DType: collate.Uint8}}
	readNothing = func(ctx context.Context, _ engine.Record, _ *engine.Slot) error {
		shards.Release(ctx)
		return nil
	}
)

// openShards returns the Source of arg (see newShardsCmd), for reading
// records, and its shards with their counts.
func openShards(ctx context.Context, arg string) (*shards.Source, []engine.ShardInfo, error) {
	src, err := shards.New(ctx, arg, readSchema, readNothing)
	if err != nil {
		return nil, nil, err
	}
	infos, err := src.Shards(ctx)
	if err != nil {
		src.Close()
		return nil, nil, err
	}
	return src, infos, nil
}

// countEach counts the shards of src one by one, as Source.Shards does
// for all of them, where that failed: the shards that fail are bad, the
// others are read.
func countEach(ctx context.Context, src *shards.Source) (infos []engine.ShardInfo, bad []badSample, err error) {
	for _, name := range src.Names() {
		one, err := shards.FromNames([]string{name}, readSchema, readNothing, shards.UseOpener(src.Opener()))
		if err != nil {
			return nil, nil, err
		}
		in, err := one.Shards(ctx)
		one.Close()
		switch {
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case err != nil:
			bad = append(bad, badSample{Shard: name, Reason: err.Error()})
		default:
			infos = append(infos, in...)
		}
	}
	return infos, bad, nil
}

func newShardsLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls SHARDS",
		Short: "List shards and their sample counts",
		Long: `ls lists the shards SHARDS names, each with its samples: from the shard
list where there is one, else by reading the shard's headers.`,
		Example: `  tensorbatch shards ls '/data/train/shard-{000000..000099}.tar'
  tensorbatch shards ls s3://bucket/train/ --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, infos, err := openShards(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer src.Close()
			type row struct {
				Name    string `json:"name"`
				Samples int    `json:"samples"`
			}
			out := struct {
				Shards  []row `json:"shards"`
				Samples int   `json:"samples"`
			}{Shards: []row{}}
			for _, in := range infos {
				out.Shards = append(out.Shards, row{in.Name, in.Samples})
				out.Samples += in.Samples
			}
			return emit(cmd, out, func(w io.Writer) error {
				for _, r := range out.Shards {
					fmt.Fprintf(w, "%8d  %s\n", r.Samples, r.Name)
				}
				fmt.Fprintf(w, "%8d  samples in %d shards\n", out.Samples, len(out.Shards))
				return nil
			})
		},
	}
}

// fieldStats is what inspect says of one member type.
type fieldStats struct {
	Count    int     `json:"count"`
	MinBytes int     `json:"min_bytes"`
	MaxBytes int     `json:"max_bytes"`
	Mean     float64 `json:"mean_bytes"`
	total    int64
}

func (f *fieldStats) add(n int) {
	if f.Count == 0 || n < f.MinBytes {
		f.MinBytes = n
	}
	f.MaxBytes = max(f.MaxBytes, n)
	f.Count++
	f.total += int64(n)
	f.Mean = float64(f.total) / float64(f.Count)
}

func newShardsInspectCmd() *cobra.Command {
	var label string
	c := &cobra.Command{
		Use:   "inspect SHARDS",
		Short: "Count samples, member types and sizes, and the labels' distribution",
		Long: `inspect reads every record of SHARDS and reports the shards, the
samples, each member type (extension, or Parquet column) with its count
and sizes, and the distribution of the label field's values.`,
		Example: `  tensorbatch shards inspect /data/train/
  tensorbatch shards inspect 'train-{0000..0009}.parquet' --label label --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			src, infos, err := openShards(ctx, args[0])
			if err != nil {
				return err
			}
			defer src.Close()
			out := struct {
				Shards  int                    `json:"shards"`
				Samples int                    `json:"samples"`
				Fields  map[string]*fieldStats `json:"fields"`
				Labels  map[string]int         `json:"labels"`
				// LabelMember is the member the labels were read from.
				LabelMember string `json:"label_member,omitempty"`
			}{Shards: len(infos), Fields: map[string]*fieldStats{}, Labels: map[string]int{}}
			bar := newProgress(cmd, totalSamples(infos), "samples", false)
			for _, in := range infos {
				err := eachRecord(ctx, src, in, func(rec engine.Record) error {
					out.Samples++
					bar.add(1)
					for k, v := range rec.Fields {
						if out.Fields[k] == nil {
							out.Fields[k] = &fieldStats{}
						}
						out.Fields[k].add(len(v))
					}
					for _, k := range labelMembers(label) {
						if v, ok := rec.Fields[k]; ok {
							out.Labels[strings.TrimSpace(string(v))]++
							out.LabelMember = k
							break
						}
					}
					return nil
				})
				if err != nil {
					bar.done()
					return err
				}
			}
			bar.done()
			return emit(cmd, out, func(w io.Writer) error {
				fmt.Fprintf(w, "%d samples in %d shards\n", out.Samples, out.Shards)
				for _, k := range slices.Sorted(mapKeys(out.Fields)) {
					f := out.Fields[k]
					fmt.Fprintf(w, "  %-12s %8d samples, %s to %s, mean %s\n", k, f.Count, humanBytes(int64(f.MinBytes)), humanBytes(int64(f.MaxBytes)), humanBytes(int64(f.Mean)))
				}
				if len(out.Labels) > 0 {
					fmt.Fprintf(w, "%d labels in %q:\n", len(out.Labels), out.LabelMember)
					keys := slices.Sorted(mapKeys(out.Labels))
					sortLabels(keys)
					for _, k := range keys {
						fmt.Fprintf(w, "  %-12s %8d  %5.1f%%\n", k, out.Labels[k], 100*float64(out.Labels[k])/float64(out.Samples))
					}
				}
				return nil
			})
		},
	}
	c.Flags().StringVar(&label, "label", "", `the member (or column) that holds the label; "" takes the first of cls, label a sample has`)
	return c
}

// labelMembers are the members inspect takes a label from: label, or
// where it is "", the first of cls and label (a Parquet column) a sample
// has.
func labelMembers(label string) []string {
	if label != "" {
		return []string{label}
	}
	return []string{"cls", "label"}
}

// sortLabels orders labels numerically when they are all integers.
func sortLabels(keys []string) {
	for _, k := range keys {
		if _, err := strconv.Atoi(k); err != nil {
			return
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := strconv.Atoi(keys[i])
		b, _ := strconv.Atoi(keys[j])
		return a < b
	})
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// eachRecord reads shard in of src (whose DecodeFunc is readNothing)
// record by record, fn keeping nothing of a record once it returns; a
// shard with more or fewer records than its count is an error, as the
// loader's is.
func eachRecord(ctx context.Context, src *shards.Source, in engine.ShardInfo, fn func(engine.Record) error) error {
	rr, err := src.Open(ctx, in)
	if err != nil {
		return err
	}
	defer rr.Close()
	n := 0
	for {
		rec, err := rr.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s, record %d: %w", in.Name, n, err)
		}
		n++
		if err := fn(rec); err != nil {
			return err
		}
		src.Decode(ctx, rec, nil) // readNothing: the record's buffers go back
	}
	if n != in.Samples {
		return fmt.Errorf("%s: %d records, listed with %d", in.Name, n, in.Samples)
	}
	return nil
}

// badSample is a sample verify found the loader would refuse.
type badSample struct {
	Shard  string `json:"shard"`
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

func newShardsVerifyCmd() *cobra.Command {
	var image, label string
	var workers int
	var decode, recordsOnly bool
	c := &cobra.Command{
		Use:   "verify SHARDS",
		Short: "Check every sample as the loader would; exit 1 if any is bad",
		Long: `verify reads every sample of SHARDS with the loader's own checks: the
shard list's counts against the shards' records, the members each sample
needs (--image, --label, taken as vision.Pipeline.Record takes them), the
label an integer, and the image checked as the loader checks it before
decoding (its size and format, the pixel limit, a JPEG walked whole; with
--decode, decoded whole too). It lists each bad sample as shard, key and
reason, and exits 1 when there is one (0 when the data is clean), so a
CI job can gate on it. It reads the shards on --workers goroutines, all
cores by default.`,
		Example: `  tensorbatch shards verify /data/train/ && echo clean
  tensorbatch shards verify 's3://bucket/train-{0000..0999}.tar' --image jpg --label cls --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if workers < 1 {
				return usagef("--workers is %d, want >= 1", workers)
			}
			src, err := shards.New(ctx, args[0], readSchema, readNothing)
			if err != nil {
				return err
			}
			defer src.Close()
			// A shard that cannot be counted is a bad shard: the others
			// are still read.
			var bad []badSample
			infos, err := src.Shards(ctx)
			if err != nil && ctx.Err() == nil {
				infos, bad, err = countEach(ctx, src)
			}
			if err != nil {
				return err
			}
			shardCount := len(infos) + len(bad)
			check, err := newChecker(false)
			if err != nil {
				return err
			}
			defer check.Close()
			bar := newProgress(cmd, totalSamples(infos), "samples", false)
			var mu sync.Mutex
			samples := 0
			report := func(b badSample) {
				mu.Lock()
				bad = append(bad, b)
				mu.Unlock()
			}
			err = inOrder(ctx, len(infos), workers, func(i int) (int, error) {
				in := infos[i]
				n := 0
				err := eachRecord(ctx, src, in, func(rec engine.Record) error {
					n++
					bar.add(1)
					if recordsOnly {
						return nil
					}
					if why := checkRecord(rec, image, label, check, decode); why != "" {
						report(badSample{in.Name, rec.Key, why})
					}
					return nil
				})
				if err != nil && ctx.Err() == nil {
					report(badSample{in.Name, "", err.Error()})
				}
				return n, ctx.Err()
			}, func(_ int, n int) error {
				samples += n
				return nil
			})
			bar.done()
			if err != nil {
				return err
			}
			slices.SortFunc(bad, func(a, b badSample) int {
				return strings.Compare(a.Shard+"\x00"+a.Key, b.Shard+"\x00"+b.Key)
			})
			out := struct {
				Shards  int         `json:"shards"`
				Samples int         `json:"samples"`
				Bad     []badSample `json:"bad"`
			}{shardCount, samples, bad}
			if out.Bad == nil {
				out.Bad = []badSample{}
			}
			if err := emit(cmd, out, func(w io.Writer) error {
				for _, b := range bad {
					key := b.Key
					if key == "" {
						key = "(the shard)"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\n", b.Shard, key, b.Reason)
				}
				fmt.Fprintf(w, "%d samples in %d shards, %d bad\n", samples, shardCount, len(bad))
				return nil
			}); err != nil {
				return err
			}
			if len(bad) > 0 {
				return &badDataError{len(bad)}
			}
			return nil
		},
	}
	c.Flags().StringVar(&image, "image", "", `the image member; "" takes the first of jpg, jpeg, png, webp... a sample has, as the loader does`)
	c.Flags().StringVar(&label, "label", "", `the label member; "" takes the first of cls, label, json a sample has, as the loader does`)
	c.Flags().BoolVar(&recordsOnly, "records-only", false, "check only that the shards read whole and match their listed counts, not images or labels (data that is not images)")
	c.Flags().IntVar(&workers, "workers", runtime.GOMAXPROCS(0), "shards read at once")
	c.Flags().BoolVar(&decode, "decode", false, "also decode every image whole, which finds damage a JPEG's markers do not show (slower)")
	return c
}

// checkRecord returns why the loader (vision.Pipeline.Record) would
// refuse rec, or "": a missing or malformed member, an image Check
// refuses, or, with decode, one a whole decode refuses.
func checkRecord(rec engine.Record, image, label string, c *checker, decode bool) string {
	if err := c.p.CheckRecord(rec, image, label); err != nil {
		return err.Error()
	}
	if decode {
		_, data, _ := vision.RecordImage(rec, image)
		return c.check(data, true)
	}
	return ""
}

// totalSamples is the samples of the shards infos.
func totalSamples(infos []engine.ShardInfo) int64 {
	var n int64
	for _, in := range infos {
		n += int64(in.Samples)
	}
	return n
}
