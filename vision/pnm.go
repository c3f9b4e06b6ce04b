package vision

import (
	"fmt"
	"image"
	"math"
)

// Netpbm (PBM, PGM, PPM: P1 to P6), read as Pillow's PpmImagePlugin reads
// it, so that convert("RGB") gives the same pixels: raw and plain
// samples are scaled to 8 bits as round(v / maxval * 255), except 16-bit
// graymaps, which Pillow opens as 32-bit integers and clips to 255; in a
// bitmap 1 is black.

// pnmHeader is what a Netpbm header says.
type pnmHeader struct {
	kind   byte // '1' to '6'
	w, h   int
	maxval int
	off    int // the first byte of the raster
}

func isPNMSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// parsePNM reads the magic number, the size and maxval, with comments,
// as Pillow does: the raster starts after the one white-space byte that
// ends the header.
func parsePNM(data []byte) (pnmHeader, error) {
	if len(data) < 3 || data[0] != 'P' || data[1] < '1' || data[1] > '6' || !isPNMSpace(data[2]) {
		return pnmHeader{}, ErrNotImage
	}
	h := pnmHeader{kind: data[1], maxval: 1}
	i := 3
	n := 3
	if h.kind == '1' || h.kind == '4' {
		n = 2
	}
	var v [3]int
	for k := range n {
		tok := 0
		start := -1
		for {
			if i >= len(data) {
				if start < 0 {
					return pnmHeader{}, fmt.Errorf("%w: Netpbm header ends early", ErrCorrupt)
				}
				break
			}
			c := data[i]
			i++
			if isPNMSpace(c) {
				if start < 0 {
					continue
				}
				break
			}
			if c == '#' {
				for i < len(data) && data[i] != '\n' && data[i] != '\r' {
					i++
				}
				continue
			}
			if c < '0' || c > '9' {
				return pnmHeader{}, fmt.Errorf("%w: Netpbm header holds %q", ErrCorrupt, c)
			}
			if start < 0 {
				start = i - 1
			}
			if i-start > 10 {
				return pnmHeader{}, fmt.Errorf("%w: Netpbm header number of more than 10 digits", ErrCorrupt)
			}
			tok = tok*10 + int(c-'0')
		}
		v[k] = tok
	}
	h.w, h.h, h.off = v[0], v[1], i
	if n == 3 {
		h.maxval = v[2]
		if h.maxval < 1 || h.maxval > 65535 {
			return pnmHeader{}, fmt.Errorf("%w: Netpbm maxval %d, want 1 to 65535", ErrCorrupt, h.maxval)
		}
	}
	return h, nil
}

// decodePNM decodes a Netpbm image whose header h has been checked
// against the pixel limit: *image.Gray or *image.RGBA, samples already
// as Pillow's convert("RGB") gives them.
func decodePNM(data []byte, h pnmHeader) (image.Image, error) {
	r := image.Rect(0, 0, h.w, h.h)
	raster := data[h.off:]
	short := fmt.Errorf("%w: Netpbm raster ends early", ErrCorrupt)
	// fits says whether rows of n bytes fit in the raster, without
	// overflow however large the header's numbers (MaxPixels(0)).
	fits := func(n int) bool { return n <= len(raster)/h.h }
	switch h.kind {
	case '4':
		rowBytes := (h.w + 7) / 8
		if !fits(rowBytes) {
			return nil, short
		}
		img := image.NewGray(r)
		for y := range h.h {
			row := raster[y*rowBytes:]
			for x := range h.w {
				if row[x/8]>>(7-x%8)&1 == 0 {
					img.Pix[y*img.Stride+x] = 255
				}
			}
		}
		return img, nil
	case '5', '6':
		bands := 1
		if h.kind == '6' {
			bands = 3
		}
		sb := 1
		if h.maxval > 255 {
			sb = 2
		}
		if !fits(h.w * bands * sb) {
			return nil, short
		}
		conv := pnmScale(h.maxval, bands == 1)
		return pnmImage(r, bands, func(i int) int {
			if sb == 2 {
				return conv(int(raster[2*i])<<8 | int(raster[2*i+1]))
			}
			return conv(int(raster[i]))
		}), nil
	}
	// Plain (ASCII) formats: P1, P2, P3.
	bands := 1
	if h.kind == '3' {
		bands = 3
	}
	if !fits(h.w * bands) { // a sample takes a byte at least
		return nil, short
	}
	total := h.w * h.h * bands
	vals := make([]int, 0, total)
	for i := 0; i < len(raster) && len(vals) < total; {
		c := raster[i]
		switch {
		case isPNMSpace(c):
			i++
		case c == '#':
			for i < len(raster) && raster[i] != '\n' && raster[i] != '\r' {
				i++
			}
		case h.kind == '1': // one digit a sample, white space optional
			if c != '0' && c != '1' {
				return nil, fmt.Errorf("%w: Netpbm bitmap sample %q", ErrCorrupt, c)
			}
			vals = append(vals, int(c-'0'))
			i++
		default:
			v, j := 0, i
			for ; j < len(raster) && raster[j] >= '0' && raster[j] <= '9'; j++ {
				if j-i == 10 {
					return nil, fmt.Errorf("%w: Netpbm sample too long", ErrCorrupt)
				}
				v = v*10 + int(raster[j]-'0')
			}
			if j == i || j < len(raster) && !isPNMSpace(raster[j]) && raster[j] != '#' {
				return nil, fmt.Errorf("%w: Netpbm sample at byte %d", ErrCorrupt, h.off+i)
			}
			if v > h.maxval {
				return nil, fmt.Errorf("%w: Netpbm sample %d above maxval %d", ErrCorrupt, v, h.maxval)
			}
			vals = append(vals, v)
			i = j
		}
	}
	if len(vals) < total {
		return nil, short
	}
	if h.kind == '1' {
		return pnmImage(r, 1, func(i int) int { return 255 * (1 - vals[i]) }), nil
	}
	conv := pnmScale(h.maxval, bands == 1)
	return pnmImage(r, bands, func(i int) int { return conv(vals[i]) }), nil
}

// pnmScale maps a sample to 8 bits as Pillow does: round(v / maxval *
// 255), clipped; a graymap above 8 bits is scaled to 16 bits and then
// clipped to 255 by convert("RGB").
func pnmScale(maxval int, gray bool) func(int) int {
	if maxval == 255 {
		return func(v int) int { return v }
	}
	out := 255.0
	if gray && maxval > 255 {
		out = 65535
	}
	return func(v int) int {
		return min(255, int(math.RoundToEven(float64(v)/float64(maxval)*out)))
	}
}

// pnmImage builds the image from sample(i), the i-th sample in raster
// order.
func pnmImage(r image.Rectangle, bands int, sample func(i int) int) image.Image {
	n := r.Dx() * r.Dy()
	if bands == 1 {
		img := image.NewGray(r)
		for i := range n {
			img.Pix[i] = byte(sample(i))
		}
		return img
	}
	img := image.NewRGBA(r)
	for i := range n {
		img.Pix[4*i], img.Pix[4*i+1], img.Pix[4*i+2], img.Pix[4*i+3] = byte(sample(3*i)), byte(sample(3*i+1)), byte(sample(3*i+2)), 255
	}
	return img
}
