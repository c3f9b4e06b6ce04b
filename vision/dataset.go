package vision

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// Sample is one image of a dataset and its class index.
type Sample struct {
	Path  string
	Label int
}

// Option configures a Pipeline and the Datasets built on one. Extensions
// and Root apply to ImageFolder and FileList only.
type Option func(*options)

type options struct {
	exts      []string
	maxPixels int64
	maxBytes  int64
	image     string
	label     string
	root      string
}

// Extensions replaces the file extensions ImageFolder accepts
// (IMGExtensions by default); matched case-insensitively.
func Extensions(exts ...string) Option { return func(o *options) { o.exts = exts } }

// MaxPixels sets the largest image, in pixels, that is decoded
// (DefaultMaxPixels by default; 0 means no limit). A header declaring
// more is refused before any pixel memory is allocated.
func MaxPixels(n int64) Option { return func(o *options) { o.maxPixels = n } }

// MaxFileBytes sets the largest file, in bytes, that is read as an image
// (DefaultMaxFileBytes by default; 0 means no limit). A larger file is
// refused from its size before it is read, and a file that grows past the
// limit while it is read (or that reports no size, as /proc files do)
// stops there, with an error naming it and the limit (ErrFileTooLarge).
// Bytes given to Pipeline.Decode or a Record are held to the same limit.
func MaxFileBytes(n int64) Option { return func(o *options) { o.maxBytes = n } }

// FieldNames names the image and label fields of the schema ("image" and
// "label" by default).
func FieldNames(image, label string) Option {
	return func(o *options) { o.image, o.label = image, label }
}

// Root resolves a FileList's relative paths against dir instead of the
// list's own folder.
func Root(dir string) Option { return func(o *options) { o.root = dir } }

// Dataset is a map-style engine.Dataset of images: each Fill reads one
// file and decodes, crops, resizes, flips and normalizes it straight into
// the slot's image field, and writes its class index (int64) into the
// label field. Decoding is its Pipeline's: a Dataset is a list of files
// over one Pipeline, so a folder and a shard give the same bits for the
// same image and RNG. Errors name the file. It is safe for concurrent
// Fills; Close releases its Pipeline. Its Fingerprint, which a loader's
// State records, names its transform, classes and files.
type Dataset struct {
	samples []Sample
	classes []string
	p       *Pipeline

	filesOnce sync.Once
	files     string // vision.files of the Fingerprint
}

// New returns a dataset of samples; classes names the labels (it may be
// nil).
func New(samples []Sample, classes []string, t Transform, opts ...Option) (*Dataset, error) {
	p, err := NewPipeline(t, opts...)
	if err != nil {
		return nil, err
	}
	return &Dataset{samples: samples, classes: classes, p: p}, nil
}

// Len returns the number of samples.
func (d *Dataset) Len() int { return len(d.samples) }

// Schema returns the image field (Transform.Field) and the label field
// (int64): its Pipeline's.
func (d *Dataset) Schema() collate.Schema { return d.p.schema }

// Samples returns the samples, in index order.
func (d *Dataset) Samples() []Sample { return d.samples }

// Classes returns the class names, in label order.
func (d *Dataset) Classes() []string { return d.classes }

// ClassToIdx returns the label of every class name, as torchvision's
// class_to_idx.
func (d *Dataset) ClassToIdx() map[string]int {
	m := make(map[string]int, len(d.classes))
	for i, c := range d.classes {
		m[c] = i
	}
	return m
}

// Transform returns the transform with its defaults filled in.
func (d *Dataset) Transform() Transform { return d.p.t }

// DecoderInfo returns the JPEG decoder the dataset uses and why.
func (d *Dataset) DecoderInfo() DecoderInfo { return d.p.dec }

// WritesEveryByte reports true: Fill writes every byte of the image and
// the label, padding included (engine.FullWriter, so the loader does not
// zero the batch first).
func (d *Dataset) WritesEveryByte() bool { return true }

// Fill writes sample s.Index(): the image into the image field, its label
// into the label field.
func (d *Dataset) Fill(ctx context.Context, s *engine.Slot) error {
	i := s.Index()
	if i < 0 || i >= len(d.samples) {
		return fmt.Errorf("vision: index %d out of range [0, %d)", i, len(d.samples))
	}
	smp := d.samples[i]
	if err := d.Decode(smp.Path, s.Rand(), s.Tensor(d.p.o.image).Bytes()); err != nil {
		return err
	}
	collate.As[int64](s.Tensor(d.p.o.label))[0] = int64(smp.Label)
	return nil
}

// Decode reads the image at path and writes it, transformed with the
// geometry drawn from rng, into dst (the bytes of one image field). It is
// Fill without a slot, and Pipeline.Decode on a file: only a regular
// file is read, and one larger than MaxFileBytes is refused before it is
// read. rng may be nil for an evaluation transform, which draws nothing.
func (d *Dataset) Decode(path string, rng *rand.Rand, dst []byte) error {
	if err := d.p.checkRand(rng); err != nil {
		return fmt.Errorf("vision: %s: %w", path, err)
	}
	return d.p.decodeFile(path, func(w, h int) Geometry { return d.p.t.Geometry(w, h, rng) }, dst)
}

// Close closes the dataset's Pipeline, freeing its per-worker decoders;
// a Fill after Close is an error (errors.Is fs.ErrClosed). Close the
// Loader first.
func (d *Dataset) Close() error { return d.p.Close() }
