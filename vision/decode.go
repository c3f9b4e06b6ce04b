package vision

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg" // Go's decoders: the fallback, and PNG's only one
	"image/png"
	"io"

	"golang.org/x/image/bmp" // the rest of torchvision's IMG_EXTENSIONS
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// Errors that callers test with errors.Is.
var (
	// ErrTooManyPixels is wrapped by the error of an image whose header
	// declares more pixels than the limit (a decompression bomb): it is
	// refused before any pixel memory is allocated.
	ErrTooManyPixels = errors.New("vision: image has more pixels than the limit")
	// ErrNotImage is wrapped by the error of a file that no decoder
	// recognizes.
	ErrNotImage = errors.New("vision: not an image in a known format")
	// ErrCorrupt is wrapped by the error of an image whose data is
	// truncated or corrupt.
	ErrCorrupt = errors.New("vision: truncated or corrupt image")
	// ErrNotRegular is wrapped by the error of a path that is not a
	// regular file (a directory, FIFO, device or socket, a link to one
	// included): it is refused before any byte is read. It is the error
	// of every file the module reads (shards.ErrNotRegular too).
	ErrNotRegular = regfile.ErrNotRegular
	// ErrFileTooLarge is wrapped by the error of a file of more bytes than
	// the limit (MaxFileBytes): it is refused before it is read, or as soon
	// as it grows past the limit while it is read. It is the error of
	// every file the module reads whole (shards.ErrFileTooLarge too).
	ErrFileTooLarge = regfile.ErrTooLarge
)

// DefaultMaxPixels is Pillow's decompression-bomb limit (twice
// Image.MAX_IMAGE_PIXELS, where it raises instead of warning).
const DefaultMaxPixels = 2 * 89478485

type format int

const (
	formatOther format = iota
	formatJPEG
	formatPNG
	formatWebP
	formatPNM
	formatTIFF
	formatBMP
)

// goDecoders are Go's decoders of the formats vision reads, named here,
// not found in image's registry: what a program links (image/gif, say)
// must not change which files are images.
var goDecoders = map[format]struct {
	config func(io.Reader) (image.Config, error)
	decode func(io.Reader) (image.Image, error)
}{
	formatJPEG: {jpeg.DecodeConfig, jpeg.Decode},
	formatPNG:  {png.DecodeConfig, png.Decode},
	formatWebP: {webp.DecodeConfig, webp.Decode},
	// Straight from an io.ReaderAt (bytes.Reader): given a plain Reader,
	// Go's TIFF decoder buffers the file up to any offset an IFD names,
	// allocating gigabytes for a tiny file.
	formatTIFF: {tiff.DecodeConfig, tiff.Decode},
	formatBMP:  {bmp.DecodeConfig, bmp.Decode},
}

func sniff(data []byte) format {
	switch {
	case len(data) >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff:
		return formatJPEG
	case len(data) >= 8 && bytes.Equal(data[:8], []byte("\x89PNG\r\n\x1a\n")):
		return formatPNG
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return formatWebP
	case len(data) >= 3 && data[0] == 'P' && data[1] >= '1' && data[1] <= '6' && isPNMSpace(data[2]):
		return formatPNM
	case len(data) >= 4 && (string(data[:4]) == "II*\x00" || string(data[:4]) == "MM\x00*"):
		return formatTIFF
	case len(data) >= 10 && string(data[:2]) == "BM" && string(data[6:10]) == "\x00\x00\x00\x00": // as image registers BMP
		return formatBMP
	}
	return formatOther
}

// ImageFormat returns the file extension of the format of data, by its
// first bytes, when it is one vision reads: "jpg", "png", "webp", "tif",
// "bmp", or "pbm", "pgm", "ppm"; "" for any other (a GIF, text). It is
// the member a shard writer names an image by, which RecordImage then
// takes it from.
func ImageFormat(data []byte) string {
	switch sniff(data) {
	case formatJPEG:
		return "jpg"
	case formatPNG:
		return "png"
	case formatWebP:
		return "webp"
	case formatTIFF:
		return "tif"
	case formatBMP:
		return "bmp"
	case formatPNM:
		return [...]string{"pbm", "pgm", "ppm"}[(data[1]-'1')%3]
	}
	return ""
}

// jpegHeader is what the frame header (SOFn) of a JPEG says.
type jpegHeader struct {
	w, h, comps int
}

// parseJPEG walks the markers of a JPEG up to its first frame header.
func parseJPEG(data []byte) (jpegHeader, error) {
	i := 2
	for {
		// Markers may be preceded by fill bytes 0xff.
		for i < len(data) && data[i] != 0xff {
			i++ // garbage between segments: libjpeg skips it with a warning
		}
		for i < len(data) && data[i] == 0xff {
			i++
		}
		if i >= len(data) {
			return jpegHeader{}, fmt.Errorf("%w: JPEG ends before its frame header", ErrCorrupt)
		}
		m := data[i]
		i++
		switch {
		case m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7):
			continue // no length
		case m == 0xd9:
			return jpegHeader{}, fmt.Errorf("%w: JPEG ends before its frame header", ErrCorrupt)
		}
		if i+2 > len(data) {
			return jpegHeader{}, fmt.Errorf("%w: JPEG ends in a marker", ErrCorrupt)
		}
		n := int(binary.BigEndian.Uint16(data[i:]))
		if n < 2 || i+n > len(data) {
			return jpegHeader{}, fmt.Errorf("%w: JPEG segment of %d bytes at %d runs past the end", ErrCorrupt, n, i)
		}
		if m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc {
			if n < 8 {
				return jpegHeader{}, fmt.Errorf("%w: JPEG frame header of %d bytes", ErrCorrupt, n)
			}
			h := int(binary.BigEndian.Uint16(data[i+3:]))
			w := int(binary.BigEndian.Uint16(data[i+5:]))
			c := int(data[i+7])
			if w == 0 || h == 0 {
				return jpegHeader{}, fmt.Errorf("%w: JPEG of %dx%d pixels", ErrCorrupt, w, h)
			}
			return jpegHeader{w: w, h: h, comps: c}, nil
		}
		i += n
	}
}

// parsePNG reads a PNG's size from its IHDR chunk.
func parsePNG(data []byte) (w, h int, err error) {
	if len(data) < 24 || string(data[12:16]) != "IHDR" {
		return 0, 0, fmt.Errorf("%w: PNG without an IHDR chunk", ErrCorrupt)
	}
	return int(binary.BigEndian.Uint32(data[16:])), int(binary.BigEndian.Uint32(data[20:])), nil
}

func checkPixels(w, h int, limit int64) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("%w: %dx%d pixels", ErrCorrupt, w, h)
	}
	if limit > 0 && (int64(w) > limit || int64(w)*int64(h) > limit) {
		return fmt.Errorf("%w: %dx%d is %d pixels, the limit is %d", ErrTooManyPixels, w, h, int64(w)*int64(h), limit)
	}
	return nil
}

// imageSize reads the size of any format from its header: the check
// before decoding.
func imageSize(data []byte) (w, h int, err error) {
	switch sniff(data) {
	case formatJPEG:
		hd, err := parseJPEG(data)
		return hd.w, hd.h, err
	case formatPNG:
		return parsePNG(data)
	case formatPNM:
		hd, err := parsePNM(data)
		return hd.w, hd.h, err
	}
	d, ok := goDecoders[sniff(data)]
	switch {
	case !ok && bytes.HasPrefix(data, []byte{0xff, 0xd8}): // a JPEG's SOI, cut before its first marker
		return 0, 0, fmt.Errorf("%w: %d bytes of a JPEG", ErrCorrupt, len(data))
	case !ok:
		return 0, 0, ErrNotImage
	}
	cfg, err := d.config(bytes.NewReader(data))
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return cfg.Width, cfg.Height, nil
}

// decodeGo decodes data with Go's image package after checking its size
// against limit.
func decodeGo(data []byte, limit int64) (image.Image, error) {
	w, h, err := imageSize(data)
	if err != nil {
		return nil, err
	}
	if err := checkPixels(w, h, limit); err != nil {
		return nil, err
	}
	if sniff(data) == formatJPEG {
		if err := checkJPEG(data); err != nil {
			return nil, err
		}
	}
	if sniff(data) == formatPNM {
		hd, _ := parsePNM(data)
		return decodePNM(data, hd)
	}
	img, err := goDecoders[sniff(data)].decode(bytes.NewReader(data)) // imageSize found the format
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		return nil, fmt.Errorf("%w: header says %dx%d, decoded %dx%d", ErrCorrupt, w, h, b.Dx(), b.Dy())
	}
	switch m := img.(type) {
	case *image.YCbCr: // lossy WebP: VP8's 4:2:0
		if sniff(data) == formatWebP {
			return vp8Image{m}, nil
		}
	case *image.NYCbCrA:
		if sniff(data) == formatWebP {
			return vp8Image{&m.YCbCr}, nil
		}
	case *image.NRGBA64: // 16-bit grayscale PNG with a transparent value (tRNS)
		if sniff(data) == formatPNG && data[24] == 16 && data[25] == 0 {
			return pngGray16Trns{m}, nil
		}
	}
	return img, nil
}

// vp8Image is a lossy WebP as Go decodes it: 4:2:0 YCbCr in VP8's video
// range, which toRGBX converts as libwebp (Pillow's decoder) does.
type vp8Image struct{ *image.YCbCr }

// rgb is pixel (x, y) (from the image's origin) by libwebp's fancy
// upsampling (UpsampleRgbLinePair) and VP8YuvToRgb.
func (m vp8Image) rgb(x, y int) (r, g, b byte) {
	yv := int(m.Y[y*m.YStride+x])
	u, v := m.chroma(m.Cb, x, y), m.chroma(m.Cr, x, y)
	clip := func(v int) byte { return byte(max(0, min(255, v>>6))) } // VP8Clip8, YUV_FIX2 = 6
	mul := func(v, c int) int { return v * c >> 8 }                  // MultHi
	return clip(mul(yv, 19077) + mul(v, 26149) - 14234),
		clip(mul(yv, 19077) - mul(u, 6419) - mul(v, 13320) + 8708),
		clip(mul(yv, 19077) + mul(u, 33050) - 17685)
}

// chroma upsamples plane p at (x, y): the nearest chroma sample weighs 9,
// the two beside it 3 and the diagonal 1, rounded as libwebp does; at the
// left and right edges 3 and 1.
func (m vp8Image) chroma(p []byte, x, y int) int {
	cw, ch := (m.Rect.Dx()+1)/2, (m.Rect.Dy()+1)/2
	rn, cn := y>>1, x>>1
	rf, cf := rn-1+2*(y&1), cn-1+2*(x&1) // the far row and column
	if rf < 0 || rf >= ch {
		rf = rn
	}
	at := func(r, c int) int { return int(p[r*m.CStride+c]) }
	if cf < 0 || cf >= cw {
		return (3*at(rn, cn) + at(rf, cn) + 2) >> 2
	}
	d := (at(rn, cn) + 3*at(rn, cf) + 3*at(rf, cn) + at(rf, cf) + 8) >> 3
	return (d + at(rn, cn)) >> 1
}

// pngGray16Trns is a 16-bit grayscale PNG with a transparent value, which
// Go decodes as NRGBA64 and Pillow opens as 32-bit integers ("I"),
// clipped to 255 by convert("RGB").
type pngGray16Trns struct{ *image.NRGBA64 }

// toRGBX writes region [x0,x1) x [y0,y1) of img as RGBX rows of stride
// bytes, converting to RGB as Pillow's convert("RGB") does: 16-bit
// samples keep their high byte, except 16-bit grayscale, which Pillow
// opens as 32-bit integers and clips to 255; alpha is dropped; CMYK is
// Pillow's formula; lossy WebP is libwebp's conversion.
func toRGBX(dst []byte, stride int, img image.Image, x0, y0, x1, y1 int) {
	b := img.Bounds()
	x0, x1, y0, y1 = x0+b.Min.X, x1+b.Min.X, y0+b.Min.Y, y1+b.Min.Y
	put := func(y, x int, r, g, bl byte) {
		o := (y-y0)*stride + (x-x0)*4
		dst[o], dst[o+1], dst[o+2], dst[o+3] = r, g, bl, 0
	}
	switch m := img.(type) {
	case *image.Gray:
		for y := y0; y < y1; y++ {
			row := m.Pix[(y-b.Min.Y)*m.Stride:]
			for x := x0; x < x1; x++ {
				v := row[x-b.Min.X]
				put(y, x, v, v, v)
			}
		}
	case *image.Gray16:
		for y := y0; y < y1; y++ {
			row := m.Pix[(y-b.Min.Y)*m.Stride:]
			for x := x0; x < x1; x++ {
				v := byte(min(int(row[2*(x-b.Min.X)])<<8|int(row[2*(x-b.Min.X)+1]), 255))
				put(y, x, v, v, v)
			}
		}
	case *image.RGBA: // opaque truecolor (PNG)
		rgbaRows(put, m.Pix, m.Stride, b, x0, y0, x1, y1, 4, 1)
	case *image.NRGBA:
		rgbaRows(put, m.Pix, m.Stride, b, x0, y0, x1, y1, 4, 1)
	case vp8Image:
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				r, g, bl := m.rgb(x-b.Min.X, y-b.Min.Y)
				put(y, x, r, g, bl)
			}
		}
	case pngGray16Trns:
		for y := y0; y < y1; y++ {
			row := m.Pix[(y-b.Min.Y)*m.Stride:]
			for x := x0; x < x1; x++ {
				v := byte(min(int(row[8*(x-b.Min.X)])<<8|int(row[8*(x-b.Min.X)+1]), 255))
				put(y, x, v, v, v)
			}
		}
	case *image.RGBA64:
		rgbaRows(put, m.Pix, m.Stride, b, x0, y0, x1, y1, 8, 2)
	case *image.NRGBA64:
		rgbaRows(put, m.Pix, m.Stride, b, x0, y0, x1, y1, 8, 2)
	case *image.Paletted:
		var pal [256][3]byte
		for i, c := range m.Palette {
			if i < 256 {
				pal[i] = rawRGB(c)
			}
		}
		for y := y0; y < y1; y++ {
			row := m.Pix[(y-b.Min.Y)*m.Stride:]
			for x := x0; x < x1; x++ {
				c := pal[row[x-b.Min.X]]
				put(y, x, c[0], c[1], c[2])
			}
		}
	case *image.CMYK:
		for y := y0; y < y1; y++ {
			row := m.Pix[(y-b.Min.Y)*m.Stride:]
			for x := x0; x < x1; x++ {
				p := row[4*(x-b.Min.X):]
				r, g, bl := cmykToRGB(p[0], p[1], p[2], p[3])
				put(y, x, r, g, bl)
			}
		}
	case *image.YCbCr:
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				yi, ci := m.YOffset(x, y), m.COffset(x, y)
				r, g, bl := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				put(y, x, r, g, bl)
			}
		}
	default:
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				c := rawRGB(img.At(x, y))
				put(y, x, c[0], c[1], c[2])
			}
		}
	}
}

// rgbaRows copies the RGB of 4-channel pixels of bpp bytes, samples of sb
// bytes (the high byte first), dropping alpha unpremultiplied.
func rgbaRows(put func(y, x int, r, g, b byte), pix []byte, stride int, b image.Rectangle, x0, y0, x1, y1, bpp, sb int) {
	for y := y0; y < y1; y++ {
		row := pix[(y-b.Min.Y)*stride:]
		for x := x0; x < x1; x++ {
			p := row[(x-b.Min.X)*bpp:]
			put(y, x, p[0], p[sb], p[2*sb])
		}
	}
}

// rawRGB returns a color's red, green and blue as stored, not
// premultiplied: what Pillow keeps when it drops alpha.
func rawRGB(c color.Color) [3]byte {
	switch v := c.(type) {
	case color.NRGBA:
		return [3]byte{v.R, v.G, v.B}
	case color.RGBA:
		if v.A == 0xff || v.A == 0 {
			return [3]byte{v.R, v.G, v.B}
		}
	case color.Gray:
		return [3]byte{v.Y, v.Y, v.Y}
	}
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	return [3]byte{n.R, n.G, n.B}
}

// cmykToRGB is Pillow's cmyk2rgb (Convert.c) with its MULDIV255 rounding.
func cmykToRGB(c, m, y, k byte) (byte, byte, byte) {
	nk := 255 - int(k)
	f := func(v byte) byte {
		tmp := int(v)*nk + 128
		return byte(max(0, min(255, nk-((tmp>>8)+tmp)>>8)))
	}
	return f(c), f(m), f(y)
}
