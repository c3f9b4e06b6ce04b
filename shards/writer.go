package shards

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// WriterConfig configures a Writer.
type WriterConfig struct {
	// Format is "tar" (WebDataset, the default) or "parquet" (Hugging
	// Face's layout for an image dataset: an image struct of bytes and
	// path, and an int64 label).
	Format string
	// ShardBytes is the size a shard reaches before the next one starts
	// (a shard holds at least one sample); 0 means DefaultShardBytes.
	ShardBytes int64
	// Prefix names the shards, Prefix-000000.tar on; "" means "shard".
	Prefix string
	// OnShard, when set, is called with each shard's path and entry once
	// it is complete under its name, before the next one starts: to
	// upload it (Opener.Put) and remove it, as WebDataset's ShardWriter's
	// post does. Its error is Write's (or Close's).
	OnShard func(path string, e IndexEntry) error
}

// DefaultShardBytes is WriterConfig.ShardBytes when 0, as WebDataset's
// ShardWriter and Mosaic's MDSWriter default near it.
const DefaultShardBytes = 256 << 20

// Writer writes samples, in order, into shards of about ShardBytes in a
// local folder, and then the folder's shardlist.json (WebDataset's wids
// format, which Source reads the counts from). Each shard is written to
// a temporary name and renamed when complete, so a folder never holds a
// half-written shard under a shard's name when the process dies. A shard
// is not fsynced, as WebDataset's and Mosaic's writers do not: after a
// power loss, check the last shards (tensorbatch shards verify). Abort
// removes what was written. A Writer is for one goroutine.
type Writer struct {
	dir  string
	cfg  WriterConfig
	list Index

	f     *os.File // the shard being written; nil between shards
	bw    *bufio.Writer
	tmp   string
	tw    *tar.Writer
	pw    *parquet.GenericWriter[ParquetImageRow]
	count int   // samples in f
	size  int64 // bytes written to f (tar: members with headers)
	keys  map[string]bool
}

// ParquetImageRow is a row of the Parquet shards a Writer writes, as
// Hugging Face's datasets writes an image classification dataset: the
// sample's key, its image (bytes, and a path whose extension says the
// format, so that Source also gives them under "jpg", "png"...) and its
// label. Source reads its fields as "__key__", "image" and the extension,
// and "label" (decimal text, as a WebDataset ".cls").
type ParquetImageRow struct {
	Key   string            `parquet:"__key__"`
	Image ParquetImageBytes `parquet:"image"`
	Label int64             `parquet:"label"`
}

// ParquetImageBytes is datasets.Image's struct.
type ParquetImageBytes struct {
	Bytes []byte `parquet:"bytes"`
	Path  string `parquet:"path"`
}

// NewWriter returns a Writer of shards into the local folder dir, which
// it makes if needed.
func NewWriter(dir string, cfg WriterConfig) (*Writer, error) {
	switch cfg.Format {
	case "":
		cfg.Format = "tar"
	case "tar", "parquet":
	default:
		return nil, fmt.Errorf("shards: NewWriter: WriterConfig.Format is %q, want \"tar\" or \"parquet\"", cfg.Format)
	}
	switch {
	case cfg.ShardBytes < 0:
		return nil, fmt.Errorf("shards: NewWriter: WriterConfig.ShardBytes is %d, want >= 0 (0 means %d)", cfg.ShardBytes, DefaultShardBytes)
	case cfg.ShardBytes == 0:
		cfg.ShardBytes = DefaultShardBytes
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "shard"
	}
	if strings.ContainsAny(cfg.Prefix, `/\`) {
		return nil, fmt.Errorf("shards: NewWriter: WriterConfig.Prefix %q has a path separator", cfg.Prefix)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("shards: NewWriter: %w", err)
	}
	return &Writer{dir: dir, cfg: cfg, list: Index{Kind: "wids-shard-index-v1", Version: 1, Name: cfg.Prefix}}, nil
}

// Write adds a sample: its key and its fields by extension ("jpg",
// "cls"...), written as tar members key.ext in sorted order of ext. A
// Parquet shard takes an image field (the first of "jpg", "jpeg", "png",
// "webp", "bmp", "tif", "tiff", "ppm", "pgm", "pbm", "pnm", as
// vision.RecordImage takes one) and a "cls" label. A key
// repeated within a shard, a key with a dot or an empty one is an error,
// as the reader would refuse it.
func (w *Writer) Write(key string, fields map[string][]byte) error {
	switch {
	case key == "":
		return fmt.Errorf("shards: Writer: an empty key")
	case strings.Contains(filepath.Base(key), "."):
		return fmt.Errorf("shards: Writer: key %q has a dot in its base name, which a reader takes for its extension", key)
	case len(fields) == 0:
		return fmt.Errorf("shards: Writer: sample %q has no field", key)
	}
	if w.f == nil {
		if err := w.start(); err != nil {
			return err
		}
	}
	if w.keys[key] {
		return fmt.Errorf("shards: Writer: key %q twice in shard %s", key, w.name(len(w.list.Shards)))
	}
	w.keys[key] = true
	var err error
	if w.tw != nil {
		err = w.writeTar(key, fields)
	} else {
		err = w.writeParquet(key, fields)
	}
	if err != nil {
		return fmt.Errorf("shards: Writer: sample %q: %w", key, err)
	}
	w.count++
	if w.size >= w.cfg.ShardBytes {
		return w.finish()
	}
	return nil
}

func (w *Writer) writeTar(key string, fields map[string][]byte) error {
	for _, ext := range slices.Sorted(maps.Keys(fields)) {
		data := fields[ext]
		if ext == "" || strings.ContainsAny(ext, `/\`) {
			return fmt.Errorf("field %q: want an extension such as \"jpg\"", ext)
		}
		if err := w.tw.WriteHeader(&tar.Header{Name: key + "." + ext, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := w.tw.Write(data); err != nil {
			return err
		}
		w.size += 512 + (int64(len(data))+511)/512*512
	}
	return nil
}

// imageExts are the fields a Parquet row's image is taken from, in order.
var imageExts = []string{"jpg", "jpeg", "png", "webp", "bmp", "tif", "tiff", "ppm", "pgm", "pbm", "pnm"}

func (w *Writer) writeParquet(key string, fields map[string][]byte) error {
	row := ParquetImageRow{Key: key}
	for _, ext := range imageExts {
		if b, ok := fields[ext]; ok {
			row.Image = ParquetImageBytes{Bytes: b, Path: filepath.Base(key) + "." + ext}
			break
		}
	}
	if row.Image.Path == "" {
		return fmt.Errorf("no image field (one of %q) for a Parquet row", imageExts)
	}
	cls, ok := fields["cls"]
	if !ok {
		return fmt.Errorf("no cls field for a Parquet row's label")
	}
	if _, err := fmt.Sscan(string(cls), &row.Label); err != nil {
		return fmt.Errorf("cls %q is not an integer label", cls)
	}
	if _, err := w.pw.Write([]ParquetImageRow{row}); err != nil {
		return err
	}
	w.size += int64(len(row.Image.Bytes) + len(key) + 8)
	return nil
}

// name is the file name of shard i.
func (w *Writer) name(i int) string {
	return fmt.Sprintf("%s-%06d.%s", w.cfg.Prefix, i, w.cfg.Format)
}

// start opens the next shard under a temporary name.
func (w *Writer) start() error {
	f, err := os.CreateTemp(w.dir, "."+w.name(len(w.list.Shards))+".*.tmp")
	if err != nil {
		return fmt.Errorf("shards: Writer: %w", err)
	}
	w.f, w.tmp, w.count, w.size, w.keys = f, f.Name(), 0, 0, map[string]bool{}
	// 256 KiB writes, not 1 MiB: bench/RESULTS.md, "tensorbatch shards
	// write", has the runs that chose it.
	w.bw = bufio.NewWriterSize(f, 256<<10)
	if w.cfg.Format == "tar" {
		w.tw = tar.NewWriter(w.bw)
	} else {
		// No statistics, page bounds or column index of the image bytes:
		// each would copy whole images into the file's metadata.
		w.pw = parquet.NewGenericWriter[ParquetImageRow](w.bw, parquet.Compression(&parquet.Snappy),
			parquet.DataPageStatistics(false), parquet.SkipPageBounds("image", "bytes"),
			parquet.ColumnIndexSizeLimit(func([]string) int { return 16 }),
			parquet.KeyValueMetadata("huggingface", `{"info": {"features": {"__key__": {"dtype": "string", "_type": "Value"}, "image": {"_type": "Image"}, "label": {"dtype": "int64", "_type": "Value"}}}}`))
	}
	return nil
}

// finish completes the shard being written: closes it, renames it to its
// name and lists it.
func (w *Writer) finish() error {
	var err error
	if w.tw != nil {
		err = w.tw.Close()
	} else {
		err = w.pw.Close()
	}
	if ferr := w.bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	name := w.name(len(w.list.Shards))
	if err == nil {
		err = os.Chmod(w.tmp, 0o644) // CreateTemp's 0600 is for the name only
	}
	if err == nil {
		err = os.Rename(w.tmp, filepath.Join(w.dir, name))
	}
	w.f, w.tw, w.pw = nil, nil, nil
	if err != nil {
		os.Remove(w.tmp)
		return fmt.Errorf("shards: Writer: shard %s: %w", name, err)
	}
	fi, err := os.Stat(filepath.Join(w.dir, name))
	if err != nil {
		return fmt.Errorf("shards: Writer: %w", err)
	}
	e := IndexEntry{URL: name, Samples: w.count, Bytes: fi.Size()}
	w.list.Shards = append(w.list.Shards, e)
	if w.cfg.OnShard != nil {
		if err := w.cfg.OnShard(filepath.Join(w.dir, name), e); err != nil {
			return fmt.Errorf("shards: Writer: shard %s: %w", name, err)
		}
	}
	return nil
}

// Close completes the last shard and writes shardlist.json, and returns
// the list.
func (w *Writer) Close() (Index, error) {
	if w.f != nil {
		if err := w.finish(); err != nil {
			return Index{}, err
		}
	}
	if w.list.Shards == nil {
		w.list.Shards = []IndexEntry{} // a list with no shard is [], not null, for Python's readers
	}
	data, err := json.MarshalIndent(w.list, "", "  ")
	if err != nil {
		return Index{}, err
	}
	if err := regfile.WriteFile(filepath.Join(w.dir, "shardlist.json"), append(data, '\n'), 0o644); err != nil {
		return Index{}, fmt.Errorf("shards: Writer: %w", err)
	}
	return w.list, nil
}

// Abort removes the shard being written and the shards written so far
// (those OnShard removed are gone already).
func (w *Writer) Abort() error {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.tmp)
		w.f, w.tw, w.pw = nil, nil, nil
	}
	var err error
	for _, e := range w.list.Shards {
		if rerr := os.Remove(filepath.Join(w.dir, e.URL)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	w.list.Shards = nil
	return err
}
