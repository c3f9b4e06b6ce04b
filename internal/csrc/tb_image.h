/* tb_image: images from compressed bytes to a batch slot in one pass
 * (tb_jpeg_decode.c, tb_resample_exact.c, tb_resample_fast.c; what they
 * share is in tb_image_internal.h).
 *
 * A JPEG is decoded by libjpeg-turbo, loaded at run time (tb_jpeg.h),
 * only over the rows and columns the output needs (jpeg_skip_scanlines,
 * jpeg_crop_scanline), optionally DCT-scaled; each decoded row is resized
 * horizontally as it arrives, each output row vertically as soon as its
 * source rows are in, then flipped, normalized and written into the slot.
 *
 * The exact resampling is Pillow's (libImaging/Resample.c): a separable
 * filter with fixed-point coefficients of 22 fractional bits, horizontal
 * pass first, each pass rounded and clamped to 8 bits. The coefficients
 * come from the caller (package vision computes them as Pillow does), so
 * every path here, and vision's Go reference, gives the same bits. Pixels
 * are RGBX: 4 bytes, the fourth ignored.
 *
 * The fast resampling (tb_plan.fast) uses the same plan with coarser
 * arithmetic, in the order that costs least: the vertical pass first, in
 * 16 bits (coefficients rounded to 15 fractional bits, each product
 * truncated to 7), rounded and clamped to 8 bits; then the horizontal pass
 * from planar rows (coefficients rounded to 14 fractional bits, sums in 32
 * bits), written as acc * scale[c] + bias[c] (float32, a multiply then an
 * add, each rounded). Within 2 of the exact resampling, usually within 1;
 * vision's Go reference of it gives the same bits. */
#ifndef TB_IMAGE_H
#define TB_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "tb_jpeg.h"

/* Output layouts. Float ones are ((float)v / 255 - mean[c]) / std[c] in
 * float32, as torchvision's ToTensor then Normalize; half and bfloat16
 * round that to nearest even. */
enum {
	TB_OUT_F32_CHW = 0,
	TB_OUT_F16_CHW = 1,
	TB_OUT_BF16_CHW = 2,
	TB_OUT_U8_HWC = 3,
	TB_OUT_U8_CHW = 4,
};

/* Statuses. */
enum {
	TB_IMG_OK = 0,
	TB_IMG_EDECODE = -1,   /* the library reported an error: see the message */
	TB_IMG_EARG = -2,      /* an inconsistent request (a bug of the caller) */
	TB_IMG_ETOOBIG = -3,   /* more pixels than the limit */
	TB_IMG_ENOMEM = -4,
	TB_IMG_EFORMAT = -5,   /* a JPEG this decoder does not handle (e.g. 2 components) */
};

/* A resampling plan. The window of ow x oh output pixels reads the region
 * [x0, x1) x [y0, y1) of the decoded image. Output column j reads region
 * columns hb[2j] + t for t < hb[2j+1], weighted hk[j*hks + t]; output row i
 * reads rows vb[2i] + t of the horizontally resized region, t < vb[2i+1],
 * weighted vk[i*vks + t]. A column or row with no taps is padding and comes
 * out 0 (torchvision's CenterCrop pads with 0). */
typedef struct tb_plan {
	int32_t x0, y0, x1, y1;
	int32_t ow, oh;
	int32_t hks, vks;
	const int32_t *hb, *hk, *vb, *vk;
	int32_t flip; /* mirror the output left to right */
	int32_t out;  /* TB_OUT_* */
	float mean[3], std[3];
	int32_t fast;            /* the fast resampling (see above) */
	float scale[3], bias[3]; /* fast: float outputs; uint8 ones take 1/16384 and 0.5, then truncate */
} tb_plan;

/* How to decode a JPEG. */
typedef struct tb_jreq {
	uint32_t width, height;   /* what the caller parsed from the header: checked */
	uint64_t max_pixels;      /* refuse larger images before allocating (0: no limit) */
	int32_t scale_denom;      /* DCT scaling 1/scale_denom: 1, 2, 4 or 8 */
	int32_t fast_dct;         /* JDCT_IFAST instead of JDCT_ISLOW */
	int32_t box_upsample;     /* chroma upsampled by replication (do_fancy_upsampling off; for
	                           * 4:2:0 and 4:2:2 to RGB, libjpeg's merged upsampler), as
	                           * Pillow's draft mode: cheaper than the smooth upsampling */
} tb_jreq;

/* Per-worker state: a libjpeg decompressor and scratch buffers, reused
 * across images. Not safe for concurrent use. */
typedef struct tb_imgdec tb_imgdec;

tb_imgdec *tb_imgdec_new(const tb_jpeg_lib *lib);
void tb_imgdec_free(tb_imgdec *d);
/* The message of the last failure. */
const char *tb_imgdec_error(const tb_imgdec *d);

/* Opens libjpeg at path into lib; -1 with a message on failure (missing
 * library or symbol). */
int tb_jpeg_open(tb_jpeg_lib *lib, const char *path, char *err, size_t errlen);
void tb_jpeg_close(tb_jpeg_lib *lib);

/* Decodes data (n bytes) per q and resamples it per p into dst, on path
 * (TB_PATH_*). The plan's region is in the coordinates of the
 * DCT-scaled image. The fast resampling has libjpeg write RGB (3 bytes a
 * pixel; a CMYK JPEG, RGBX). */
int tb_jpeg_resample(tb_imgdec *d, const uint8_t *data, size_t n, const tb_jreq *q, const tb_plan *p, void *dst, int path);

/* Decodes the region [x0,x1) x [y0,y1) (DCT-scaled coordinates) as RGBX
 * rows of stride bytes into dst: the input of vision's Go reference. */
int tb_jpeg_region(tb_imgdec *d, const uint8_t *data, size_t n, const tb_jreq *q, int x0, int y0, int x1, int y1, uint8_t *dst,
		   size_t stride);

/* Resamples an RGBX region already in memory (src points at its pixel
 * (x0, y0), rows stride bytes apart) per p into dst. */
int tb_resample(tb_imgdec *d, const tb_plan *p, const uint8_t *src, size_t stride, void *dst, int path);

#endif
