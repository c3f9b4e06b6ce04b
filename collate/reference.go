package collate

import (
	"math"
	"unsafe"
)

// The plain Go reference of every kernel: the KernelsGo implementation,
// and what the C kernels are tested against bit for bit. Floating point
// follows internal/csrc/tb_kernels.c operation by operation; every product
// is converted to float32 explicitly, which the Go spec says prevents
// fusing it into an FMA.

func u16[T ~uint16](s []T) []uint16 {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&s[0])), len(s))
}

func gatherGo(dst, src []byte, idx []int64, row int) {
	for i, j := range idx {
		copy(dst[i*row:(i+1)*row], src[int(j)*row:(int(j)+1)*row])
	}
}

func u8ToCHWGo(dst []float32, src []uint8, hw, c int, scale, bias []float32) {
	for ch := range c {
		for p := range hw {
			x := float32(float32(src[p*c+ch]) * scale[ch])
			dst[ch*hw+p] = x + bias[ch]
		}
	}
}

func f32ToF16(f float32) F16 {
	u := math.Float32bits(f)
	sign, exp, man := (u>>16)&0x8000, (u>>23)&0xff, u&0x7fffff
	if exp == 0xff {
		if man != 0 {
			return F16(sign | 0x7e00 | man>>13)
		}
		return F16(sign | 0x7c00)
	}
	e := int(exp) - 127 + 15
	if e >= 31 {
		return F16(sign | 0x7c00)
	}
	if e <= 0 {
		if e < -10 {
			return F16(sign)
		}
		man |= 0x800000
		shift := uint32(14 - e)
		h, rem, half := man>>shift, man&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return F16(sign | h)
	}
	h, rem := uint32(e)<<10|man>>13, man&0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++
	}
	return F16(sign | h)
}

func f16ToF32(h F16) float32 {
	sign, exp, man := uint32(h&0x8000)<<16, uint32(h>>10)&0x1f, uint32(h)&0x3ff
	switch {
	case exp == 0x1f && man != 0:
		return math.Float32frombits(sign | 0x7f800000 | 0x400000 | man<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000)
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		e := -1
		for man&0x400 == 0 {
			man <<= 1
			e++
		}
		return math.Float32frombits(sign | uint32(127-15-e)<<23 | (man&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

func f32ToBF16(f float32) BF16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return BF16(u>>16 | 0x40)
	}
	return BF16((u + 0x7fff + (u>>16)&1) >> 16)
}

func bf16ToF32(h BF16) float32 { return math.Float32frombits(uint32(h) << 16) }

func padStackGo(buf []byte, lens []int64, maxlen, longest, row int, pad []byte) {
	for i, n := range lens {
		dst := buf[i*longest*row : (i+1)*longest*row]
		copy(dst, buf[i*maxlen*row:i*maxlen*row+int(n)*row])
		for b := int(n) * row; b < longest*row; b += len(pad) {
			copy(dst[b:], pad)
		}
	}
}

// Philox4x32-10 and Box-Muller: see internal/csrc/tb_kernels.c.
const (
	philoxM0 = 0xD2511F53
	philoxM1 = 0xCD9E8D57
	philoxW0 = 0x9E3779B9
	philoxW1 = 0xBB67AE85
)

func philoxBlock(j, key, stream uint64) [4]uint32 {
	c := [4]uint32{uint32(j), uint32(j >> 32), uint32(stream), uint32(stream >> 32)}
	k0, k1 := uint32(key), uint32(key>>32)
	for range 10 {
		p0, p1 := uint64(philoxM0)*uint64(c[0]), uint64(philoxM1)*uint64(c[2])
		c = [4]uint32{uint32(p1>>32) ^ c[1] ^ k0, uint32(p1), uint32(p0>>32) ^ c[3] ^ k1, uint32(p0)}
		k0 += philoxW0
		k1 += philoxW1
	}
	return c
}

var logP = [9]float32{7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
	-1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1}

const (
	sqrt2f float32 = 1.41421356
	ln2Hi  float32 = 0.693359375
	ln2Lo  float32 = -2.12194440e-4
	twoPi  float32 = 6.28318530717958647692
)

var (
	sinP = [3]float32{-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1}
	cosP = [3]float32{2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2}
)

func logf32(u float32) float32 {
	b := math.Float32bits(u)
	e := int32(b>>23) - 127
	m := math.Float32frombits(b&0x7fffff | 0x3f800000)
	if m > sqrt2f {
		m = float32(m * 0.5)
		e++
	}
	x := m - 1
	z := float32(x * x)
	ef := float32(e)
	y := logP[0]
	for _, p := range logP[1:] {
		y = float32(y*x) + p
	}
	y = float32(y * x)
	y = float32(y * z)
	y = y + float32(ln2Lo*ef)
	y = y - float32(0.5*z)
	r := x + y
	return r + float32(ln2Hi*ef)
}

func sincos2pi(u float32) (s, c float32) {
	k := int32(float32(u*4) + 0.5)
	f := u - float32(float32(k)*0.25)
	x := float32(f * twoPi)
	z := float32(x * x)
	sp := float32(sinP[0] * z)
	sp = float32((sp + sinP[1]) * z)
	sp = float32(float32((sp+sinP[2])*z) * x)
	sv := sp + x
	cp := float32(cosP[0] * z)
	cp = float32((cp + cosP[1]) * z)
	cp = float32(float32((cp+cosP[2])*z) * z)
	cp = cp - float32(0.5*z)
	cv := cp + 1
	switch k & 3 {
	case 0:
		return sv, cv
	case 1:
		return cv, -sv
	case 2:
		return -sv, -cv
	}
	return -cv, sv
}

func boxMuller(a, b uint32) (float32, float32) {
	u1 := float32(float32(a>>8+1) * 0x1p-24)
	u2 := float32(float32(b>>8) * 0x1p-24)
	r := float32(math.Sqrt(float64(float32(-2 * logf32(u1)))))
	s, c := sincos2pi(u2)
	return float32(r * c), float32(r * s)
}

func philoxGo(dst []float32, key, stream, first uint64, normal bool) {
	for i, j := 0, first; i < len(dst); i, j = i+4, j+1 {
		x := philoxBlock(j, key, stream)
		var out [4]float32
		if normal {
			out[0], out[1] = boxMuller(x[0], x[1])
			out[2], out[3] = boxMuller(x[2], x[3])
		} else {
			for k, v := range x {
				out[k] = float32(float32(v>>8) * 0x1p-24)
			}
		}
		copy(dst[i:], out[:])
	}
}
