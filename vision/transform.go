package vision

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tensorbatch/tensorbatch/collate"
)

// Output is the layout and element type of the image field.
type Output int

// The outputs. The float ones are torchvision's ToTensor then Normalize:
// ((v / 255) - mean) / std per channel, in float32, CHW; half and bfloat16
// round that to nearest even. The uint8 ones are the resized pixels, for
// normalizing on the GPU (a quarter of the bytes over PCIe, as DALI and
// FFCV do).
const (
	Float32CHW Output = iota
	Float16CHW
	BFloat16CHW
	Uint8HWC
	Uint8CHW
)

func (o Output) String() string {
	if o < Float32CHW || o > Uint8CHW {
		return fmt.Sprintf("Output(%d)", int(o))
	}
	return [...]string{"float32 CHW", "float16 CHW", "bfloat16 CHW", "uint8 HWC", "uint8 CHW"}[o]
}

func (o Output) dtype() collate.DType {
	switch o {
	case Float16CHW:
		return collate.Float16
	case BFloat16CHW:
		return collate.BFloat16
	case Uint8HWC, Uint8CHW:
		return collate.Uint8
	}
	return collate.Float32
}

func (o Output) elemBytes() int { return o.dtype().Size() }

// Mode trades faithfulness to torchvision for speed.
type Mode int

const (
	// Exact (the default) decodes the crop at full resolution and resizes
	// it as Pillow does: the output matches torchvision with its PIL
	// backend for the same crop box (within ±1 of 255 before
	// normalization; bit for bit where the JPEG decoder is the same
	// libjpeg-turbo).
	Exact Mode = iota
	// Fast decodes JPEGs as Pillow's draft mode does: with libjpeg's fast
	// integer IDCT, the chroma of 4:2:0 and 4:2:2 files upsampled by
	// replication (libjpeg's merged upsampler) instead of smoothly, and
	// with DCT scaling (1/2, 1/4, 1/8) when the crop is at least that many
	// times the output in both directions, so a large photo is never
	// decoded at full size. It resizes with Pillow's filter in 16-bit
	// fixed point, the vertical pass first. Against Exact: about 45 dB
	// PSNR where no DCT scaling applies (JPEG; at least 40 dB, tested),
	// within 2 of 255 for the other formats, at least 35 dB with DCT
	// scaling (tested); faster than Exact on ImageNet-sized JPEGs, and
	// than TurboJPEG's full decode of the same files (BenchmarkDecode's
	// train and train-fast; the per-core rows of go run ./bench). The
	// mode for training throughput.
	Fast
)

func (m Mode) String() string {
	switch m {
	case Exact:
		return "exact"
	case Fast:
		return "fast"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ImageNet's channel statistics, torchvision's usual Normalize.
var (
	ImageNetMean = [3]float32{0.485, 0.456, 0.406}
	ImageNetStd  = [3]float32{0.229, 0.224, 0.225}
)

// Transform is torchvision's classic pipeline, fused into one pass from
// compressed bytes to the slot. Training: RandomResizedCrop(Size, Scale,
// Ratio), RandomHorizontalFlip, ToTensor, Normalize(Mean, Std).
// Evaluation: Resize(ResizeSize), CenterCrop(Size), ToTensor,
// Normalize(Mean, Std). Interpolation is bilinear with Pillow's
// antialiasing. Zero fields mean the defaults; Train and Eval return them
// filled in.
type Transform struct {
	Train      bool       // RandomResizedCrop and flip; else Resize and CenterCrop
	Size       int        // output height and width; 0 means 224
	ResizeSize int        // evaluation: the shorter side before the crop; 0 means Size/0.875 (256 for 224)
	Scale      [2]float64 // training: the crop's area fraction; zero means (0.08, 1)
	Ratio      [2]float64 // training: the crop's aspect ratio; zero means (3/4, 4/3)
	NoFlip     bool       // training: no horizontal flip (it is drawn with probability 1/2)
	Mean, Std  [3]float32 // Normalize; a zero Std means ImageNet's Mean and Std
	Output     Output
	Mode       Mode
}

// Train returns the training transform of torchvision's ImageNet recipe
// at size: RandomResizedCrop(size), RandomHorizontalFlip(), ToTensor(),
// Normalize(ImageNet's mean and std).
func Train(size int) Transform { return Transform{Train: true, Size: size}.withDefaults() }

// Eval returns the evaluation transform of torchvision's ImageNet recipe
// at size: Resize(size/0.875), CenterCrop(size), ToTensor(),
// Normalize(ImageNet's mean and std).
func Eval(size int) Transform { return Transform{Size: size}.withDefaults() }

func (t Transform) withDefaults() Transform {
	if t.Size == 0 {
		t.Size = 224
	}
	if t.ResizeSize == 0 && !t.Train {
		t.ResizeSize = int(math.Floor(float64(t.Size) / 0.875))
	}
	if t.Scale == [2]float64{} {
		t.Scale = [2]float64{0.08, 1}
	}
	if t.Ratio == [2]float64{} {
		t.Ratio = [2]float64{3.0 / 4, 4.0 / 3}
	}
	if t.Std == [3]float32{} {
		t.Mean, t.Std = ImageNetMean, ImageNetStd
	}
	return t
}

// validate fills the defaults and names a bad field.
func (t Transform) validate() (Transform, error) {
	t = t.withDefaults()
	bad := func(field, format string, args ...any) (Transform, error) {
		return t, fmt.Errorf("vision: Transform.%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch {
	case t.Size < 1 || t.Size > 1<<14:
		return bad("Size", "%d, want 1 to 16384", t.Size)
	case !t.Train && (t.ResizeSize < 1 || t.ResizeSize > 1<<16):
		return bad("ResizeSize", "%d, want 1 to 65536", t.ResizeSize)
	case !(t.Scale[0] > 0 && t.Scale[0] <= t.Scale[1]) || math.IsInf(t.Scale[1], 0):
		return bad("Scale", "%v, want 0 < min <= max", t.Scale)
	case !(t.Ratio[0] > 0 && t.Ratio[0] <= t.Ratio[1]) || math.IsInf(t.Ratio[1], 0):
		return bad("Ratio", "%v, want 0 < min <= max", t.Ratio)
	case t.Output < Float32CHW || t.Output > Uint8CHW:
		return bad("Output", "%v", t.Output)
	case t.Mode != Exact && t.Mode != Fast:
		return bad("Mode", "%v", t.Mode)
	}
	for c, s := range t.Std {
		if !(s > 0 || s < 0) || math.IsInf(float64(s), 0) {
			return bad("Std", "channel %d: %v, want finite and not 0", c, s)
		}
		if m := float64(t.Mean[c]); math.IsNaN(m) || math.IsInf(m, 0) {
			return bad("Mean", "channel %d: %v, want finite", c, m)
		}
	}
	return t, nil
}

// Shape returns the image field's per-sample shape.
func (t Transform) Shape() []int {
	t = t.withDefaults()
	if t.Output == Uint8HWC {
		return []int{t.Size, t.Size, 3}
	}
	return []int{3, t.Size, t.Size}
}

// Field returns the image field of a schema.
func (t Transform) Field(name string) collate.Field {
	return collate.Field{Name: name, DType: t.Output.dtype(), Shape: t.Shape()}
}

// Box is a crop box in source pixels: torchvision's (top, left, height,
// width) as X, Y, W, H.
type Box struct{ X, Y, W, H int }

// Geometry is what a transform does to one image: the Box of the source
// is resized to ResizeW x ResizeH, and the window of Size x Size pixels at
// (OX, OY) of the result is written, mirrored when Flip. A window beyond
// the resized image (CenterCrop larger than it) is padded with zeros.
type Geometry struct {
	Box              Box
	ResizeW, ResizeH int
	OX, OY           int
	Size             int
	Flip             bool
}

// Geometry draws the transform's geometry for a w x h image from rng (the
// slot's RNG in a Dataset, so it is the same for any worker count).
// Training draws RandomResizedCrop's box as torchvision does (10 tries,
// then the central fallback) and then the flip; evaluation draws nothing.
func (t Transform) Geometry(w, h int, rng *rand.Rand) Geometry {
	t = t.withDefaults()
	if !t.Train {
		rw, rh := resizedSize(w, h, t.ResizeSize)
		return Geometry{Box: Box{0, 0, w, h}, ResizeW: rw, ResizeH: rh,
			OX: centerOffset(rw, t.Size), OY: centerOffset(rh, t.Size), Size: t.Size}
	}
	g := Geometry{Box: randomResizedCrop(w, h, t.Scale, t.Ratio, rng), ResizeW: t.Size, ResizeH: t.Size, Size: t.Size}
	if !t.NoFlip {
		g.Flip = rng.Float64() < 0.5
	}
	return g
}

// resizedSize is torchvision's Resize(size) with one int: the shorter
// side becomes size, the longer int(size * long / short).
func resizedSize(w, h, size int) (int, int) {
	short, long := w, h
	if w > h {
		short, long = h, w
	}
	newLong := int(float64(size*long) / float64(short))
	if w <= h {
		return size, newLong
	}
	return newLong, size
}

// centerOffset is torchvision's CenterCrop along one axis of n pixels: the
// crop's first pixel, negative when the crop is padded.
func centerOffset(n, crop int) int {
	if crop > n {
		return -((crop - n) / 2)
	}
	return int(math.RoundToEven(float64(n-crop) / 2))
}

// randomResizedCrop is torchvision's RandomResizedCrop.get_params.
func randomResizedCrop(w, h int, scale, ratio [2]float64, rng *rand.Rand) Box {
	area := float64(w * h)
	logR0, logR1 := math.Log(ratio[0]), math.Log(ratio[1])
	for range 10 {
		target := area * (scale[0] + (scale[1]-scale[0])*rng.Float64())
		aspect := math.Exp(logR0 + (logR1-logR0)*rng.Float64())
		cw := int(math.RoundToEven(math.Sqrt(target * aspect)))
		ch := int(math.RoundToEven(math.Sqrt(target / aspect)))
		if 0 < cw && cw <= w && 0 < ch && ch <= h {
			y := rng.IntN(h - ch + 1)
			x := rng.IntN(w - cw + 1)
			return Box{x, y, cw, ch}
		}
	}
	in := float64(w) / float64(h)
	cw, ch := w, h
	switch {
	case in < ratio[0]:
		ch = int(math.RoundToEven(float64(cw) / ratio[0]))
	case in > ratio[1]:
		cw = int(math.RoundToEven(float64(ch) * ratio[1]))
	}
	return Box{(w - cw) / 2, (h - ch) / 2, cw, ch}
}
