package vision

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"sync"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// Pipeline is the fused transform on bytes from any source: a compressed
// image in, one sample's image field out. A Dataset reads files into
// one; a shard source (package shards) hands it records through Record.
// It holds the per-goroutine decoder state (libjpeg-turbo's decompressor,
// the plan, the buffers), reused from image to image, so the
// libjpeg-turbo path allocates nothing per image. It is safe for
// concurrent use; Close frees that state.
//
// The bytes are checked as a file is: more than MaxFileBytes is refused
// (ErrFileTooLarge), more pixels than MaxPixels too (ErrTooManyPixels),
// and a JPEG is walked whole before any of it is decoded, so its validity
// does not depend on the crop (ErrCorrupt).
type Pipeline struct {
	t      Transform
	o      options
	schema collate.Schema
	dec    DecoderInfo
	lib    *jpegLib

	// Idle decoder state, one per goroutine that decoded at once. A
	// free list, not a sync.Pool: a Pool drops its items at every GC,
	// and each would cost a new libjpeg decompressor, and Close could
	// not free what a Pool holds.
	mu     sync.Mutex
	free   []*scratch
	closed bool
}

// errClosed is the error of a Pipeline used after Close: errors.Is
// fs.ErrClosed.
var errClosed error = closedError{}

type closedError struct{}

func (closedError) Error() string        { return "the Pipeline is closed" }
func (closedError) Is(target error) bool { return target == fs.ErrClosed }

// NewPipeline returns the Pipeline of transform t. Of the options,
// MaxPixels, MaxFileBytes and FieldNames apply.
func NewPipeline(t Transform, opts ...Option) (*Pipeline, error) {
	t, err := t.validate()
	if err != nil {
		return nil, err
	}
	o := options{exts: IMGExtensions, maxPixels: DefaultMaxPixels, maxBytes: DefaultMaxFileBytes, image: "image", label: "label"}
	for _, f := range opts {
		f(&o)
	}
	if o.maxPixels < 0 {
		return nil, fmt.Errorf("vision: MaxPixels(%d), want >= 0", o.maxPixels)
	}
	if o.maxBytes < 0 {
		return nil, fmt.Errorf("vision: MaxFileBytes(%d), want >= 0", o.maxBytes)
	}
	if o.image == "" || o.label == "" || o.image == o.label {
		return nil, fmt.Errorf("vision: FieldNames(%q, %q): want two different names", o.image, o.label)
	}
	dec, lib, err := jpegDecoder()
	if err != nil {
		return nil, err
	}
	p := &Pipeline{t: t, o: o, dec: dec, lib: lib}
	p.schema = collate.Schema{t.Field(o.image), {Name: o.label, DType: collate.Int64}}
	if err := p.schema.Validate(); err != nil {
		return nil, fmt.Errorf("vision: %w", err)
	}
	return p, nil
}

// Schema returns the image field (Transform.Field) and the label field
// (int64), as ImageFolder's: the schema of the source that Record
// decodes for.
func (p *Pipeline) Schema() collate.Schema { return p.schema }

// Decode decodes the compressed image data and writes it, transformed
// with the geometry drawn from rng, into dst: the bytes of one sample's
// image field (Slot.Tensor(name).Bytes()), whose length must be the
// field's. Given the same bytes, rng state and Transform, it writes the
// same bits as a Dataset's Fill. rng may be nil for an evaluation
// transform, which draws nothing. Errors wrap ErrNotImage, ErrCorrupt,
// ErrTooManyPixels or ErrFileTooLarge; after Close, fs.ErrClosed.
func (p *Pipeline) Decode(data []byte, rng *rand.Rand, dst []byte) error {
	if err := p.decodeBytes(data, rng, dst); err != nil {
		return fmt.Errorf("vision: %w", err)
	}
	return nil
}

// decodeBytes is Decode without the package's prefix on its errors.
func (p *Pipeline) decodeBytes(data []byte, rng *rand.Rand, dst []byte) error {
	if err := p.checkRand(rng); err != nil {
		return err
	}
	switch {
	case len(data) == 0:
		return fmt.Errorf("no bytes: %w", ErrNotImage)
	case p.o.maxBytes > 0 && int64(len(data)) > p.o.maxBytes:
		return fmt.Errorf("%w: %d bytes, the limit is %d (MaxFileBytes)", ErrFileTooLarge, len(data), p.o.maxBytes)
	}
	sc, err := p.get()
	if err != nil {
		return err
	}
	defer p.put(sc)
	return p.decode(sc, data, func(w, h int) Geometry { return p.t.Geometry(w, h, rng) }, dst)
}

// checkRand refuses a nil rng for a training transform, which draws its
// crop and flip from it.
func (p *Pipeline) checkRand(rng *rand.Rand) error {
	if rng == nil && p.t.Train {
		return errors.New("a training transform draws its crop from rng, which is nil")
	}
	return nil
}

// decodeFile reads path and decodes it with the geometry geom gives for
// its size.
func (p *Pipeline) decodeFile(path string, geom func(w, h int) Geometry, dst []byte) error {
	sc, err := p.get()
	if err != nil {
		return fmt.Errorf("vision: %w", err)
	}
	defer p.put(sc)
	data, err := sc.read(path, p.o.maxBytes)
	if err != nil {
		return fmt.Errorf("vision: %w", err)
	}
	if err := p.decode(sc, data, geom, dst); err != nil {
		return fmt.Errorf("vision: %s: %w", path, err)
	}
	return nil
}

// Close frees the idle decoders, and those in use as their decodes
// finish. A Decode or Record after Close is an error (errors.Is
// fs.ErrClosed). Close is idempotent.
func (p *Pipeline) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, sc := range p.free {
		sc.n.close()
	}
	p.free = nil
	return nil
}

// scratch is one worker's state: file bytes, plan, and the C decoder,
// reused from image to image so that the libjpeg path allocates nothing
// in steady state.
type scratch struct {
	file   regfile.Buffer // the file's bytes
	pl     *plan          // the current image's: one of plans
	plans  [planCacheSize]cachedPlan
	clock  uint64 // counts builds: the least recently used plan goes first
	region []byte
	gs     goScratch
	n      native
}

// planKey is what a plan is built from, besides the transform.
type planKey struct {
	g             Geometry
	denom, sw, sh int
}

// planCacheSize is how many plans a worker keeps: an evaluation
// transform's plan depends only on the image's size, and a data set has a
// few sizes that recur (ImageNet's 500x375, 375x500, 500x333, ...). With
// 4, the 8 sizes of the bench's ImageNet-like set (in the folder's order)
// rebuilt the plan of 313 images of 1000; with 16, of the first of each
// size only. 16 plans of an evaluation transform at 224 take about 200 KiB.
const planCacheSize = 16

// cachedPlan is a plan and what it was built for (the transform is the
// Pipeline's).
type cachedPlan struct {
	key  planKey
	used uint64 // sc.clock when last used; 0: never built
	pl   plan
}

// build points sc.pl at the plan of g for an image decoded at 1/denom
// (sw x sh), built into the least recently used of sc.plans unless one of
// them was built for the same.
func (sc *scratch) build(g Geometry, t *Transform, denom, sw, sh int) {
	k := planKey{g, denom, sw, sh}
	sc.clock++
	lru, slots := 0, sc.plans[:]
	if t.Train {
		// A random crop is drawn per image and does not recur: one plan,
		// whose memory stays in cache, rather than a rotation through all.
		slots = sc.plans[:1]
	}
	for i := range slots {
		c := &slots[i]
		if c.used != 0 && c.key == k {
			c.used, sc.pl = sc.clock, &c.pl
			return
		}
		if c.used < sc.plans[lru].used {
			lru = i
		}
	}
	c := &sc.plans[lru]
	buildPlan(&c.pl, g, t, denom, sw, sh)
	c.key, c.used, sc.pl = k, sc.clock, &c.pl
}

func (p *Pipeline) get() (*scratch, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errClosed
	}
	if k := len(p.free); k > 0 {
		sc := p.free[k-1]
		p.free = p.free[:k-1]
		p.mu.Unlock()
		return sc, nil
	}
	p.mu.Unlock()
	sc := &scratch{}
	if hasNative {
		if err := sc.n.init(p.lib); err != nil {
			return nil, fmt.Errorf("vision: %w", err)
		}
	}
	return sc, nil
}

func (p *Pipeline) put(sc *scratch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		sc.n.close()
		return
	}
	p.free = append(p.free, sc)
}

// jpegOpts is how a JPEG is decoded by libjpeg-turbo.
type jpegOpts struct {
	denom     int  // DCT scaling 1/denom
	fastDCT   bool // libjpeg's fast integer IDCT (JDCT_IFAST)
	box       bool // chroma upsampled by replication (libjpeg's merged upsampler)
	maxPixels int64
}

// decode runs the transform on one encoded image.
func (p *Pipeline) decode(sc *scratch, data []byte, geom func(w, h int) Geometry, dst []byte) error {
	t := &p.t
	if len(dst) != t.Size*t.Size*3*t.Output.elemBytes() {
		return fmt.Errorf("image field of %d bytes, the transform writes %d", len(dst), t.Size*t.Size*3*t.Output.elemBytes())
	}
	path := collate.ActiveKernels()
	if sniff(data) == formatJPEG && p.lib != nil {
		h, err := parseJPEG(data)
		if err != nil {
			return err
		}
		if err := checkPixels(h.w, h.h, p.o.maxPixels); err != nil {
			return err
		}
		if err := checkJPEG(data); err != nil {
			return err
		}
		if h.comps == 1 || h.comps == 3 || h.comps == 4 {
			g := geom(h.w, h.h)
			o := jpegOpts{denom: 1, maxPixels: p.o.maxPixels}
			if t.Mode == Fast {
				// DCT scaling, the fast IDCT and chroma upsampled by
				// replication, as Pillow's draft mode does.
				o.denom, o.fastDCT, o.box = dctDenom(g), true, true
			}
			sw, sh := ceilDiv(h.w, o.denom), ceilDiv(h.h, o.denom)
			sc.build(g, t, o.denom, sw, sh)
			if path != collate.KernelsGo {
				return sc.n.jpeg(path, data, h, o, sc.pl, dst)
			}
			stride := (sc.pl.X1 - sc.pl.X0) * 4
			sc.region = grow(sc.region, stride*(sc.pl.Y1-sc.pl.Y0))
			if err := sc.n.jpegRegion(data, h, o, sc.pl, sc.region, stride); err != nil {
				return err
			}
			resampleGo(dst, sc.region, stride, sc.pl, &sc.gs)
			return nil
		}
		// Other component counts: Go's decoder says what it thinks.
	}
	img, err := decodeGo(data, p.o.maxPixels)
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
		return sc.n.resample(path, sc.pl, sc.region, stride, dst)
	}
	resampleGo(dst, sc.region, stride, sc.pl, &sc.gs)
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
