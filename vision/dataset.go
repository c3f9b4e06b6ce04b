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

// Option configures a Dataset.
type Option func(*options)

type options struct {
	exts      []string
	maxPixels int64
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

// Fields names the image and label fields of the schema ("image" and
// "label" by default).
func Fields(image, label string) Option { return func(o *options) { o.image, o.label = image, label } }

// Root resolves a FileList's relative paths against dir instead of the
// list's own folder.
func Root(dir string) Option { return func(o *options) { o.root = dir } }

// Dataset is a map-style engine.Dataset of images: each Fill reads one
// file and decodes, crops, resizes, flips and normalizes it straight into
// the slot's image field, and writes its class index (int64) into the
// label field. Errors name the file. It is safe for concurrent Fills;
// Close releases its per-worker decoders.
type Dataset struct {
	samples []Sample
	classes []string
	t       Transform
	o       options
	schema  collate.Schema
	dec     Decoder
	lib     *jpegLib

	mu     sync.Mutex
	free   []*scratch // per-worker state not in use
	closed bool
}

// New returns a dataset of samples; classes names the labels (it may be
// nil).
func New(samples []Sample, classes []string, t Transform, opts ...Option) (*Dataset, error) {
	t, err := t.validate()
	if err != nil {
		return nil, err
	}
	o := options{exts: IMGExtensions, maxPixels: DefaultMaxPixels, image: "image", label: "label"}
	for _, f := range opts {
		f(&o)
	}
	if o.maxPixels < 0 {
		return nil, fmt.Errorf("vision: MaxPixels(%d), want >= 0", o.maxPixels)
	}
	if o.image == "" || o.label == "" || o.image == o.label {
		return nil, fmt.Errorf("vision: Fields(%q, %q): want two different names", o.image, o.label)
	}
	dec, lib, err := jpegDecoder()
	if err != nil {
		return nil, err
	}
	d := &Dataset{samples: samples, classes: classes, t: t, o: o, dec: dec, lib: lib}
	d.schema = collate.Schema{t.Field(o.image), {Name: o.label, DType: collate.Int64}}
	if err := d.schema.Validate(); err != nil {
		return nil, fmt.Errorf("vision: %w", err)
	}
	return d, nil
}

// Len returns the number of samples.
func (d *Dataset) Len() int { return len(d.samples) }

// Schema returns the image field (Transform.Field) and the label field
// (int64).
func (d *Dataset) Schema() collate.Schema { return d.schema }

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
func (d *Dataset) Transform() Transform { return d.t }

// Decoder returns the JPEG decoder the dataset uses and why.
func (d *Dataset) Decoder() Decoder { return d.dec }

// Fill writes sample s.Index(): the image into the image field, its label
// into the label field. It writes every byte of both, so the loader may
// skip zeroing (engine.Config.SkipZero).
func (d *Dataset) Fill(ctx context.Context, s *engine.Slot) error {
	i := s.Index()
	if i < 0 || i >= len(d.samples) {
		return fmt.Errorf("vision: index %d out of range [0, %d)", i, len(d.samples))
	}
	smp := d.samples[i]
	if err := d.Decode(smp.Path, s.Rand(), s.Tensor(d.o.image).Bytes()); err != nil {
		return err
	}
	collate.As[int64](s.Tensor(d.o.label))[0] = int64(smp.Label)
	return nil
}

// Decode reads the image at path and writes it, transformed with the
// geometry drawn from rng, into dst (the bytes of one image field). It is
// Fill without a slot; rng may be nil for an evaluation transform, which
// draws nothing.
func (d *Dataset) Decode(path string, rng *rand.Rand, dst []byte) error {
	return d.decodeFile(path, func(w, h int) Geometry { return d.t.Geometry(w, h, rng) }, dst)
}

// decodeFile reads path and decodes it with the geometry geom gives for
// its size.
func (d *Dataset) decodeFile(path string, geom func(w, h int) Geometry, dst []byte) error {
	sc, err := d.get()
	if err != nil {
		return err
	}
	defer d.put(sc)
	data, err := sc.read(path)
	if err != nil {
		return fmt.Errorf("vision: %w", err)
	}
	if err := d.decode(sc, data, geom, dst); err != nil {
		return fmt.Errorf("vision: %s: %w", path, err)
	}
	return nil
}

// Close frees the per-worker decoders. Fills after Close still work, with
// new decoders freed when they finish.
func (d *Dataset) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for _, sc := range d.free {
		sc.n.close()
	}
	d.free = nil
	return nil
}

// scratch is one worker's state: file bytes, plan, and the C decoder,
// reused from image to image so that the libjpeg path allocates nothing
// in steady state.
type scratch struct {
	path   []byte // NUL-terminated, for the system call
	data   []byte
	pl     plan
	plKey  planKey // what pl was built for (the transform is the dataset's)
	region []byte
	gs     goScratch
	n      native
}

// planKey is what a plan is built from, besides the transform.
type planKey struct {
	g             Geometry
	denom, sw, sh int
}

// build builds sc.pl, or keeps it where the last image had the same
// geometry (evaluation, on images of one size).
func (sc *scratch) build(g Geometry, t *Transform, denom, sw, sh int) {
	k := planKey{g, denom, sw, sh}
	if sc.plKey == k {
		return
	}
	buildPlan(&sc.pl, g, t, denom, sw, sh)
	sc.plKey = k
}

func (d *Dataset) get() (*scratch, error) {
	d.mu.Lock()
	if k := len(d.free); k > 0 {
		sc := d.free[k-1]
		d.free = d.free[:k-1]
		d.mu.Unlock()
		return sc, nil
	}
	d.mu.Unlock()
	sc := &scratch{}
	if hasNative {
		if err := sc.n.init(d.lib); err != nil {
			return nil, fmt.Errorf("vision: %w", err)
		}
	}
	return sc, nil
}

func (d *Dataset) put(sc *scratch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		sc.n.close()
		return
	}
	d.free = append(d.free, sc)
}

// jpegOpts is how a JPEG is decoded by libjpeg-turbo.
type jpegOpts struct {
	denom     int  // DCT scaling 1/denom
	fastDCT   bool // libjpeg's fast integer IDCT (JDCT_IFAST)
	maxPixels int64
}

// decode runs the transform on one encoded image.
func (d *Dataset) decode(sc *scratch, data []byte, geom func(w, h int) Geometry, dst []byte) error {
	t := &d.t
	if len(dst) != t.Size*t.Size*3*t.Output.elemBytes() {
		return fmt.Errorf("image field of %d bytes, the transform writes %d", len(dst), t.Size*t.Size*3*t.Output.elemBytes())
	}
	path := collate.ActiveKernels()
	if sniff(data) == formatJPEG && d.lib != nil {
		h, err := parseJPEG(data)
		if err != nil {
			return err
		}
		if err := checkPixels(h.w, h.h, d.o.maxPixels); err != nil {
			return err
		}
		if h.comps == 1 || h.comps == 3 || h.comps == 4 {
			g := geom(h.w, h.h)
			o := jpegOpts{denom: 1, maxPixels: d.o.maxPixels}
			if t.Mode == Fast {
				// DCT scaling and the fast IDCT, as Pillow's draft mode and
				// tf.data's decode_jpeg do; not Pillow's merged upsampling,
				// which jpeg_skip_scanlines breaks (TestDecodeIndependentOfHistory).
				o.denom, o.fastDCT = dctDenom(g), true
			}
			sw, sh := ceilDiv(h.w, o.denom), ceilDiv(h.h, o.denom)
			sc.build(g, t, o.denom, sw, sh)
			if path != collate.KernelsGo {
				return sc.n.jpeg(path, data, h, o, &sc.pl, dst)
			}
			stride := (sc.pl.X1 - sc.pl.X0) * 4
			sc.region = grow(sc.region, stride*(sc.pl.Y1-sc.pl.Y0))
			if err := sc.n.jpegRegion(data, h, o, &sc.pl, sc.region, stride); err != nil {
				return err
			}
			resampleGo(dst, sc.region, stride, &sc.pl, &sc.gs)
			return nil
		}
		// Other component counts: Go's decoder says what it thinks.
	}
	img, err := decodeGo(data, d.o.maxPixels)
	if err != nil {
		return err
	}
	b := img.Bounds()
	g := geom(b.Dx(), b.Dy())
	sc.build(g, t, 1, b.Dx(), b.Dy())
	stride := (sc.pl.X1 - sc.pl.X0) * 4
	sc.region = grow(sc.region, stride*(sc.pl.Y1-sc.pl.Y0))
	toRGBX(sc.region, stride, img, sc.pl.X0, sc.pl.Y0, sc.pl.X1, sc.pl.Y1)
	if hasNative && path != collate.KernelsGo {
		return sc.n.resample(path, &sc.pl, sc.region, stride, dst)
	}
	resampleGo(dst, sc.region, stride, &sc.pl, &sc.gs)
	return nil
}

// dctDenom is the largest DCT scaling (1/2, 1/4, 1/8) that leaves the box
// at least as large as its resized size in both directions.
func dctDenom(g Geometry) int {
	for _, d := range []int{8, 4, 2} {
		if g.Box.W >= d*g.ResizeW && g.Box.H >= d*g.ResizeH {
			return d
		}
	}
	return 1
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
