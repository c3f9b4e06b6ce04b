package vision

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/internal/csrc"
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
		return nil, prefixed(err)
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
		return prefixed(err)
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

// Check returns the error that Decode would refuse data with before it
// decodes: no bytes or more than MaxFileBytes, a format it does not know,
// more pixels than MaxPixels, a JPEG whose markers or scans are damaged
// (walked whole, as every Decode walks it). It does not decode a JPEG
// that passes (a damaged scan whose markers are intact is found only
// where a decoder reaches it), so it costs about 1% of a decode; another
// format is decoded, which is its check. shards write and shards verify
// check every image so.
func (p *Pipeline) Check(data []byte) error {
	if err := p.check(data); err != nil {
		return prefixed(err)
	}
	return nil
}

// check is Check, its error without the package's prefix.
func (p *Pipeline) check(data []byte) error {
	switch {
	case len(data) == 0:
		return fmt.Errorf("no bytes: %w", ErrNotImage)
	case p.o.maxBytes > 0 && int64(len(data)) > p.o.maxBytes:
		return fmt.Errorf("%w: %d bytes, the limit is %d (MaxFileBytes)", ErrFileTooLarge, len(data), p.o.maxBytes)
	}
	if sniff(data) == formatJPEG {
		h, err := parseJPEG(data)
		if err == nil {
			err = checkPixels(h.w, h.h, p.o.maxPixels)
		}
		if err == nil {
			err = checkJPEG(data)
		}
		if err != nil || h.comps == 1 || h.comps == 3 || h.comps == 4 {
			return err
		}
	}
	_, err := decodeGo(data, p.o.maxPixels)
	return err
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
		return prefixed(err)
	}
	defer p.put(sc)
	data, err := sc.read(path, p.o.maxBytes)
	if err != nil {
		return prefixed(err)
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
		sc.close()
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
	enc    *csrc.JPEGEncoder // ShrinkJPEG's, made on its first call; nil where TurboJPEG does not load
	pix    []byte            // ShrinkJPEG's pixels, reused
	encTry bool              // enc was tried
}

// close frees the scratch's C state.
func (sc *scratch) close() {
	sc.n.close()
	if sc.enc != nil {
		sc.enc.Close()
		sc.enc = nil
	}
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
			return nil, prefixed(err)
		}
	}
	return sc, nil
}

func (p *Pipeline) put(sc *scratch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		sc.close()
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
	return p.decodeWith(sc, &p.t, data, geom, dst)
}

// decodeWith runs transform t on one encoded image. A t of Size 0 writes
// the whole resized image (ResizeW x ResizeH, Shrink) instead of a
// Size x Size window; dst is checked against it once the geometry is
// known.
func (p *Pipeline) decodeWith(sc *scratch, t *Transform, data []byte, geom func(w, h int) Geometry, dst []byte) error {
	if t.Size > 0 && len(dst) != t.Size*t.Size*3*t.Output.elemBytes() {
		return fmt.Errorf("image field of %d bytes, the transform writes %d", len(dst), t.Size*t.Size*3*t.Output.elemBytes())
	}
	if t.Size == 0 {
		inner := geom
		geom = func(w, h int) Geometry {
			g := inner(w, h)
			if n := g.ResizeW * g.ResizeH * 3 * t.Output.elemBytes(); len(dst) != n {
				panic(fmt.Sprintf("vision: Shrink: %d bytes for a %dx%d image", len(dst), g.ResizeW, g.ResizeH)) // a bug of Shrink's
			}
			return g
		}
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

// Shrink decodes an image and resizes it, keeping its aspect ratio, so
// that its shorter side is at most short pixels (an image that small
// already keeps its size), and returns its pixels, RGB, row by row (HWC),
// and its size: what shards write --resize re-encodes. It decodes as
// Decode does, by the Pipeline's decoder and Mode (Pillow's antialiased
// bilinear filter; in the Fast mode, with DCT scaling where the image is
// at least twice the size it shrinks to), after the same checks, and
// ignores the rest of the Transform.
func (p *Pipeline) Shrink(data []byte, short int) (pix []byte, w, h int, err error) {
	sc, err := p.get()
	if err != nil {
		return nil, 0, 0, prefixed(err)
	}
	defer p.put(sc)
	return p.shrink(sc, data, short, nil)
}

// shrink is Shrink with sc, its pixels in buf where it has room.
func (p *Pipeline) shrink(sc *scratch, data []byte, short int, buf []byte) (pix []byte, w, h int, err error) {
	switch {
	case short < 1:
		return nil, 0, 0, fmt.Errorf("vision: Shrink: short side %d, want >= 1", short)
	case len(data) == 0:
		return nil, 0, 0, prefixed(fmt.Errorf("no bytes: %w", ErrNotImage))
	case p.o.maxBytes > 0 && int64(len(data)) > p.o.maxBytes:
		return nil, 0, 0, prefixed(fmt.Errorf("%w: %d bytes, the limit is %d (MaxFileBytes)", ErrFileTooLarge, len(data), p.o.maxBytes))
	}
	iw, ih, err := imageSize(data)
	if err != nil {
		return nil, 0, 0, prefixed(err)
	}
	if err := checkPixels(iw, ih, p.o.maxPixels); err != nil {
		return nil, 0, 0, prefixed(err)
	}
	w, h = iw, ih
	if s := min(iw, ih); s > short {
		w, h = max(1, int((int64(iw)*int64(short)+int64(s)/2)/int64(s))), max(1, int((int64(ih)*int64(short)+int64(s)/2)/int64(s)))
	}
	t := Transform{Mode: p.t.Mode, Output: Uint8HWC} // Size 0: the whole resized image
	pix = grow(buf, w*h*3)
	geom := func(iw, ih int) Geometry { return Geometry{Box: Box{W: iw, H: ih}, ResizeW: w, ResizeH: h} }
	if err := p.decodeWith(sc, &t, data, geom, pix); err != nil {
		return nil, 0, 0, prefixed(err)
	}
	return pix, w, h, nil
}

// turboJPEGLibs are the names TurboJPEG's library is loaded by.
var turboJPEGLibs = []string{"libturbojpeg.so.0", "libturbojpeg.so", "libturbojpeg.0.dylib", "turbojpeg.dll"}

// encoderNote logs, once, which JPEG encoder ShrinkJPEG uses.
var encoderNote sync.Once

// ShrinkJPEG is Shrink, its pixels then encoded as a JPEG of quality q
// (4:2:0): by TurboJPEG (libturbojpeg.so.0, Debian's libturbojpeg0,
// loaded at run time), else, with the reason logged once, by Go's
// image/jpeg (about a third of its speed).
func (p *Pipeline) ShrinkJPEG(data []byte, short, q int) ([]byte, error) {
	if q < 1 || q > 100 {
		return nil, fmt.Errorf("vision: ShrinkJPEG: quality %d, want 1 to 100", q)
	}
	sc, err := p.get()
	if err != nil {
		return nil, prefixed(err)
	}
	defer p.put(sc)
	pix, w, h, err := p.shrink(sc, data, short, sc.pix)
	if err != nil {
		return nil, err
	}
	sc.pix = pix
	if !sc.encTry {
		sc.encTry = true
		var errs []error
		for _, name := range turboJPEGLibs {
			if sc.enc, err = csrc.OpenJPEGEncoder(name); err == nil {
				break
			}
			errs = append(errs, err)
		}
		encoderNote.Do(func() {
			if sc.enc != nil {
				slog.Info("tensorbatch: JPEG encoder", "encoder", "TurboJPEG")
			} else {
				slog.Info("tensorbatch: JPEG encoder", "encoder", "go image/jpeg", "reason", errors.Join(errs...))
			}
		})
	}
	if sc.enc != nil {
		return sc.enc.Encode(nil, pix, w, h, q)
	}
	img := &image.RGBA{Pix: make([]byte, 4*w*h), Stride: 4 * w, Rect: image.Rect(0, 0, w, h)}
	for i := range w * h {
		copy(img.Pix[4*i:4*i+3], pix[3*i:3*i+3])
		img.Pix[4*i+3] = 255
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: q}); err != nil {
		return nil, fmt.Errorf("vision: ShrinkJPEG: %w", err)
	}
	return buf.Bytes(), nil
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

// prefixed returns err with the package's "vision: " before it, once: a
// sentinel error (ErrNotImage, ErrCorrupt...) says it already.
func prefixed(err error) error {
	if strings.HasPrefix(err.Error(), "vision: ") {
		return err
	}
	return fmt.Errorf("vision: %w", err)
}
