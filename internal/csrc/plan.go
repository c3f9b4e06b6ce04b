package csrc

import (
	"fmt"
	"math"
)

// Out is an output layout of the resampling kernels (tb_image.h's
// TB_OUT_*; package vision's Output, numbered the same).
type Out int

// The layouts: float ones are ((v/255) - mean) / std per channel, CHW;
// half and bfloat16 round it to nearest even.
const (
	OutF32CHW  Out = 0
	OutF16CHW  Out = 1
	OutBF16CHW Out = 2
	OutU8HWC   Out = 3
	OutU8CHW   Out = 4
)

// ElemBytes returns the bytes of one output value.
func (o Out) ElemBytes() int {
	switch o {
	case OutF32CHW:
		return 4
	case OutF16CHW, OutBF16CHW:
		return 2
	}
	return 1
}

// Plan is one image's resampling, in the coordinates of the decoded
// (possibly DCT-scaled) image: the one type for package vision, which
// builds it and runs its Go reference of the kernels, and the C kernels,
// to which ImageDecoder copies it (tb_image.h's tb_plan). The window of OW
// x OH output pixels reads region [X0, X1) x [Y0, Y1); output column j
// reads region columns HB[2j]+t, t < HB[2j+1], weighted HK[j*HKS+t]
// (fixed point, 22 fractional bits), and output row i reads rows VB[2i]+t
// of the horizontally resized region, t < VB[2i+1], weighted VK[i*VKS+t].
// A column or row with no taps is padding and comes out 0. The C kernels
// and vision's Go reference run the same integer arithmetic, so they agree
// bit for bit.
//
// With Fast set the plan runs the fast resampling (see tb_image.h): the
// vertical pass first, in 16 bits, then the horizontal one; it writes
// acc*Scale[c] + Bias[c] (float outputs) or truncates acc/16384 + 0.5
// (uint8 ones: Scale 1/16384, Bias 0.5), where acc is an output value with
// 14 fractional bits.
type Plan struct {
	X0, Y0, X1, Y1 int
	OW, OH         int
	HKS, VKS       int // taps per output column and row
	HB, HK, VB, VK []int32
	Flip           bool // mirror the output left to right
	Out            Out
	Mean, Std      [3]float32 // float outputs of the exact resampling
	Fast           bool
	Scale, Bias    [3]float32 // the fast resampling's
}

// DstBytes returns the bytes the plan writes.
func (p *Plan) DstBytes() int { return p.OW * p.OH * 3 * p.Out.ElemBytes() }

// maxTapSum bounds a row of coefficients: every accumulation stays in an
// int32 (255 * 2^23 + 2^21 < 2^31).
const maxTapSum = 1 << 23

// Check returns an error unless every read the plan makes is inside its
// region and every sum fits the kernels' int32 accumulators.
func (p *Plan) Check() error {
	w, h := p.X1-p.X0, p.Y1-p.Y0
	switch {
	case p.X0 < 0 || p.Y0 < 0 || w <= 0 || h <= 0 || w > math.MaxInt32/4 || h > math.MaxInt32:
		return fmt.Errorf("csrc: plan: region [%d,%d)x[%d,%d)", p.X0, p.X1, p.Y0, p.Y1)
	case p.OW <= 0 || p.OH <= 0 || p.OW > 1<<20 || p.OH > 1<<20:
		return fmt.Errorf("csrc: plan: window %dx%d", p.OW, p.OH)
	case p.HKS <= 0 || p.VKS <= 0 || p.HKS > 1<<16 || p.VKS > 1<<16:
		return fmt.Errorf("csrc: plan: %d and %d taps", p.HKS, p.VKS)
	case len(p.HB) < 2*p.OW || len(p.HK) < p.OW*p.HKS || len(p.VB) < 2*p.OH || len(p.VK) < p.OH*p.VKS:
		return fmt.Errorf("csrc: plan: %d, %d, %d, %d values for a %dx%d window of %d and %d taps", len(p.HB), len(p.HK), len(p.VB), len(p.VK), p.OW, p.OH, p.HKS, p.VKS)
	case p.Out < OutF32CHW || p.Out > OutU8CHW:
		return fmt.Errorf("csrc: plan: output layout %d", p.Out)
	}
	check := func(what string, b, k []int32, n, ks, size int) error {
		for j := range n {
			lo, cnt := int(b[2*j]), int(b[2*j+1])
			if lo < 0 || cnt < 0 || cnt > ks || lo+cnt > size {
				return fmt.Errorf("csrc: plan: %s %d reads [%d,%d) of %d with %d taps", what, j, lo, lo+cnt, size, ks)
			}
			sum := 0
			for _, c := range k[j*ks : (j+1)*ks] {
				if c < 0 {
					return fmt.Errorf("csrc: plan: %s %d has a negative coefficient", what, j)
				}
				sum += int(c)
			}
			if sum > maxTapSum {
				return fmt.Errorf("csrc: plan: %s %d coefficients sum to %d", what, j, sum)
			}
		}
		return nil
	}
	if err := check("column", p.HB, p.HK, p.OW, p.HKS, w); err != nil {
		return err
	}
	return check("row", p.VB, p.VK, p.OH, p.VKS, h)
}

// JPEGRequest says how to decode a JPEG.
type JPEGRequest struct {
	Width, Height int   // as parsed from the header; the decode checks them
	MaxPixels     int64 // refuse larger images before allocating; 0: no limit
	ScaleDenom    int   // DCT scaling 1/ScaleDenom: 1, 2, 4 or 8
	FastDCT       bool  // JDCT_IFAST instead of JDCT_ISLOW
	BoxUpsample   bool  // chroma upsampled by replication (libjpeg's do_fancy_upsampling off)
}

// ImageError is a failure of the image kernels: the status and libjpeg's
// or the kernel's message.
type ImageError struct {
	Status int
	Msg    string
}

func (e *ImageError) Error() string { return e.Msg }

// The statuses of ImageError.
const (
	ImageDecode   = -1 // libjpeg reported an error
	ImageArg      = -2 // an inconsistent request
	ImageTooBig   = -3 // more pixels than the limit
	ImageNoMemory = -4
	ImageFormat   = -5 // a JPEG the decoder does not handle (e.g. 2 components)
)
