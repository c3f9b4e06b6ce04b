package vision

import (
	"math"
	"unsafe"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

// precisionBits is Pillow's fixed point for 8-bit resampling
// (libImaging/Resample.c): 22 fractional bits.
const precisionBits = 22

// plan is one image's resampling: internal/csrc's Plan, which the C
// kernels read and the Go reference below runs with the same integer
// arithmetic, bit for bit. build fills it.
type plan = csrc.Plan

// Output and the kernels' layouts are numbered the same: an array length
// below zero, or a non-zero one, fails the build.
var (
	_ [0]int = [Float32CHW - Output(csrc.OutF32CHW)]int{}
	_ [0]int = [Float16CHW - Output(csrc.OutF16CHW)]int{}
	_ [0]int = [BFloat16CHW - Output(csrc.OutBF16CHW)]int{}
	_ [0]int = [Uint8HWC - Output(csrc.OutU8HWC)]int{}
	_ [0]int = [Uint8CHW - Output(csrc.OutU8CHW)]int{}
)

// scaledSpan maps the box span [b, b+n) of a source axis to an axis
// DCT-scaled by 1/denom of decoded size size: the input pixels [lo,
// lo+in) it lies in and its ends relative to lo. With denom 1 it is
// Pillow's crop then resize: in0 = 0, in1 = n.
func scaledSpan(b, n, denom, size int) (lo, in int, in0, in1 float32) {
	if denom == 1 {
		return b, n, 0, float32(n)
	}
	f0, f1 := float64(b)/float64(denom), float64(b+n)/float64(denom)
	lo = int(math.Floor(f0))
	hi := min(int(math.Ceil(f1)), size)
	return lo, hi - lo, float32(f0 - float64(lo)), float32(f1 - float64(lo))
}

// axis computes one axis as Pillow's precompute_coeffs and
// normalize_coeffs_8bpc (bilinear filter) do, for output positions [o,
// o+n) of an axis of outSize pixels resized from [in0, in1) of an input of
// inSize pixels. Positions outside [0, outSize) are padding: no taps. It
// returns the taps per position, the bounds (relative to first) and
// coefficients, and the input range [first, last) that is read.
func axis(b, k []int32, inSize int, in0, in1 float32, outSize, o, n int) (ks int, bb, kk []int32, first, last int) {
	scale := float64(in1-in0) / float64(outSize)
	filterscale := max(scale, 1.0)
	support := 1.0 * filterscale
	ks = int(math.Ceil(support))*2 + 1
	bb = grow(b, 2*n)
	kk = grow(k, n*ks)
	clear(kk)
	var w [64]float64
	ws := w[:0]
	if ks > len(w) {
		ws = make([]float64, 0, ks)
	}
	first, last = math.MaxInt, 0
	for j := range n {
		xx := o + j
		if xx < 0 || xx >= outSize {
			bb[2*j], bb[2*j+1] = 0, 0
			continue
		}
		center := float64(in0) + float64((float64(xx)+0.5)*scale)
		ss := 1.0 / filterscale
		xmin := int(center - support + 0.5)
		xmin = max(xmin, 0)
		xmax := int(center + support + 0.5)
		xmax = min(xmax, inSize)
		xmax -= xmin
		ws = ws[:0]
		ww := 0.0
		for x := range xmax {
			v := bilinear((float64(x+xmin) - center + 0.5) * ss)
			ws = append(ws, v)
			ww += v
		}
		kj := kk[j*ks : (j+1)*ks]
		for x, v := range ws {
			if ww != 0 {
				v /= ww
			}
			if v < 0 {
				kj[x] = int32(-0.5 + float64(v*(1<<precisionBits)))
			} else {
				kj[x] = int32(0.5 + float64(v*(1<<precisionBits)))
			}
		}
		bb[2*j], bb[2*j+1] = int32(xmin), int32(xmax)
		if xmax > 0 {
			first, last = min(first, xmin), max(last, xmin+xmax)
		}
	}
	if first > last {
		first, last = 0, 0
	}
	for j := range n {
		if bb[2*j+1] > 0 {
			bb[2*j] -= int32(first)
		}
	}
	return ks, bb, kk, first, last
}

func bilinear(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}

// buildPlan fills p for geometry g of a w x h image decoded at 1/denom
// (decoded size sw x sh).
func buildPlan(p *plan, g Geometry, t *Transform, denom, sw, sh int) {
	ow, oh := g.Size, g.Size
	if t.Size == 0 { // Shrink: the whole resized image
		ow, oh = g.ResizeW, g.ResizeH
	}
	lo, in, in0, in1 := scaledSpan(g.Box.X, g.Box.W, denom, sw)
	var first, last int
	p.HKS, p.HB, p.HK, first, last = axis(p.HB, p.HK, in, in0, in1, g.ResizeW, g.OX, ow)
	p.X0, p.X1 = lo+first, lo+last
	lo, in, in0, in1 = scaledSpan(g.Box.Y, g.Box.H, denom, sh)
	p.VKS, p.VB, p.VK, first, last = axis(p.VB, p.VK, in, in0, in1, g.ResizeH, g.OY, oh)
	p.Y0, p.Y1 = lo+first, lo+last
	p.OW, p.OH = ow, oh
	p.Flip = g.Flip
	p.Out = csrc.Out(t.Output)
	p.Mean, p.Std = t.Mean, t.Std
	p.Fast = t.Mode == Fast
	for c := range 3 {
		switch t.Output {
		case Uint8HWC, Uint8CHW: // acc/16384 + 0.5, truncated: rounded to the nearest byte
			p.Scale[c], p.Bias[c] = 1.0/16384, 0.5
		default: // ((acc/16384)/255 - mean) / std
			p.Scale[c] = float32(1 / (16384 * 255 * float64(t.Std[c])))
			p.Bias[c] = float32(-float64(t.Mean[c]) / float64(t.Std[c]))
		}
	}
}

// ---- the Go reference of the C kernels ----

func clip8(v int32) byte {
	v >>= precisionBits
	switch {
	case v < 0:
		return 0
	case v > 255:
		return 255
	}
	return byte(v)
}

// hpassGo resizes one region row (RGBX from column x0) into out (ow RGBX).
func hpassGo(out, src []byte, p *plan) {
	for j := range p.OW {
		s := src[int(p.HB[2*j])*4:]
		n := int(p.HB[2*j+1])
		k := p.HK[j*p.HKS : j*p.HKS+n]
		s0, s1, s2 := int32(1<<(precisionBits-1)), int32(1<<(precisionBits-1)), int32(1<<(precisionBits-1))
		for t, kt := range k {
			s0 += int32(s[4*t]) * kt
			s1 += int32(s[4*t+1]) * kt
			s2 += int32(s[4*t+2]) * kt
		}
		out[4*j], out[4*j+1], out[4*j+2], out[4*j+3] = clip8(s0), clip8(s1), clip8(s2), 0
	}
}

// vpassGo makes output row i from the horizontally resized rows in mid.
func vpassGo(line, mid []byte, ms int, p *plan, i int) {
	ymin, n := int(p.VB[2*i]), int(p.VB[2*i+1])
	k := p.VK[i*p.VKS : i*p.VKS+n]
	for b := range p.OW * 4 {
		s := int32(1 << (precisionBits - 1))
		for t, kt := range k {
			s += int32(mid[(ymin+t)*ms+b]) * kt
		}
		line[b] = clip8(s)
	}
}

// writeRowGo writes output row i (RGBX in line) into dst; fl is scratch
// of ow float32s.
func writeRowGo(dst, line []byte, p *plan, i int, fl []float32) {
	ow, plane := p.OW, p.OW*p.OH
	src := func(j int) int {
		if p.Flip {
			return ow - 1 - j
		}
		return j
	}
	switch Output(p.Out) {
	case Uint8HWC:
		o := dst[i*ow*3:]
		for j := range ow {
			s := src(j)
			o[3*j], o[3*j+1], o[3*j+2] = line[4*s], line[4*s+1], line[4*s+2]
		}
	case Uint8CHW:
		for c := range 3 {
			o := dst[c*plane+i*ow:]
			for j := range ow {
				o[j] = line[4*src(j)+c]
			}
		}
	case Float32CHW:
		f := unsafe.Slice((*float32)(unsafe.Pointer(&dst[0])), 3*plane)
		for c := range 3 {
			normRow(f[c*plane+i*ow:c*plane+(i+1)*ow], line, c, p, src)
		}
	case Float16CHW, BFloat16CHW:
		for c := range 3 {
			normRow(fl[:ow], line, c, p, src)
			off := 2 * (c*plane + i*ow)
			if Output(p.Out) == Float16CHW {
				collate.F32ToF16(unsafe.Slice((*collate.F16)(unsafe.Pointer(&dst[off])), ow), fl[:ow])
			} else {
				collate.F32ToBF16(unsafe.Slice((*collate.BF16)(unsafe.Pointer(&dst[off])), ow), fl[:ow])
			}
		}
	}
}

// normRow is ToTensor then Normalize, in float32, in torchvision's order.
func normRow(o []float32, line []byte, c int, p *plan, src func(int) int) {
	mean, std := p.Mean[c], p.Std[c]
	for j := range o {
		x := float32(line[4*src(j)+c]) / 255
		x = x - mean
		o[j] = x / std
	}
}

// goScratch is the Go reference's working memory.
type goScratch struct {
	mid, line []byte
	fl        []float32
}

// resampleGo is the Go reference of tb_resample: src holds the region's
// RGBX rows, stride bytes apart.
func resampleGo(dst, src []byte, stride int, p *plan, s *goScratch) {
	if p.Fast {
		resampleFastGo(dst, src, stride, p, s)
		return
	}
	ms := p.OW * 4
	rows := p.Y1 - p.Y0
	s.mid = grow(s.mid, rows*ms)
	s.line = grow(s.line, ms)
	s.fl = grow(s.fl, p.OW)
	for y := range rows {
		hpassGo(s.mid[y*ms:(y+1)*ms], src[y*stride:], p)
	}
	for i := range p.OH {
		vpassGo(s.line, s.mid, ms, p, i)
		writeRowGo(dst, s.line, p, i, s.fl)
	}
}

// The fast resampling's coefficients: 15 fractional bits (vertical) and 14
// (horizontal), from the plan's 22.
func fastVK(k int32) uint16 { return uint16((k + 64) >> 7) }
func fastHK(k int32) int16  { return int16((k + 128) >> 8) }

// resampleFastGo is the Go reference of the fast resampling: src holds the
// region's RGBX rows, stride bytes apart (the C path reads RGB from
// libjpeg: the same values, so the same bits).
// Each output row is the vertical pass over its source rows, summed in 16
// bits (each product v*k truncated by 8 bits, so the sum has 7 fractional
// bits) then rounded and clamped to a byte; then, channel by channel, the
// horizontal pass: the taps' sum in 32 bits, 14 fractional bits.
func resampleFastGo(dst, src []byte, stride int, p *plan, s *goScratch) {
	const bpp = 4
	w, ow := p.X1-p.X0, p.OW
	s.line = grow(s.line, w*bpp+3*w)
	fv, planes := s.line[:w*bpp], s.line[w*bpp:]
	s.fl = grow(s.fl, 3*ow)
	for i := range p.OH {
		ymin, n := int(p.VB[2*i]), int(p.VB[2*i+1])
		k := p.VK[i*p.VKS : i*p.VKS+n]
		for b := range fv {
			var acc uint16
			for t, kt := range k {
				acc += uint16(uint32(src[(ymin+t)*stride+b]) * uint32(fastVK(kt)) >> 8)
			}
			fv[b] = byte(min((acc+64)>>7, 255))
		}
		for x := range w {
			for c := range 3 {
				planes[c*w+x] = fv[bpp*x+c]
			}
		}
		for c := range 3 {
			pl, fl := planes[c*w:(c+1)*w], s.fl[c*ow:(c+1)*ow]
			for j := range ow {
				sj := j
				if p.Flip {
					sj = ow - 1 - j
				}
				lo, n := int(p.HB[2*sj]), int(p.HB[2*sj+1])
				var acc int32
				for t, kt := range p.HK[sj*p.HKS : sj*p.HKS+n] {
					acc += int32(pl[lo+t]) * int32(fastHK(kt))
				}
				fl[j] = float32(float32(acc)*p.Scale[c]) + p.Bias[c]
			}
			writeFastRow(dst, fl, p, c, i)
		}
	}
}

// writeFastRow writes channel c of output row i, as floats in fl, into dst.
func writeFastRow(dst []byte, fl []float32, p *plan, c, i int) {
	ow, plane := p.OW, p.OW*p.OH
	switch Output(p.Out) {
	case Float32CHW:
		copy(unsafe.Slice((*float32)(unsafe.Pointer(&dst[0])), 3*plane)[c*plane+i*ow:], fl)
	case Float16CHW:
		collate.F32ToF16(unsafe.Slice((*collate.F16)(unsafe.Pointer(&dst[2*(c*plane+i*ow)])), ow), fl)
	case BFloat16CHW:
		collate.F32ToBF16(unsafe.Slice((*collate.BF16)(unsafe.Pointer(&dst[2*(c*plane+i*ow)])), ow), fl)
	case Uint8CHW, Uint8HWC:
		at, step := c*plane+i*ow, 1
		if Output(p.Out) == Uint8HWC {
			at, step = i*ow*3+c, 3
		}
		for j, x := range fl {
			v := byte(0)
			switch {
			case x >= 255:
				v = 255
			case x > 0:
				v = byte(int(x))
			}
			dst[at+j*step] = v
		}
	}
}
