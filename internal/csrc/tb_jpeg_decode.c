//go:build cgo

#include "tb_simd.h"

#include "tb_image_internal.h"

#include <string.h>

#include "tb_dl.h"

/* ---- loading libjpeg ---- */

static const tb_dl_symbol tb_jpeg_symbols[] = {
#define TB_SYM(field, sym, ret, params) {#sym, offsetof(tb_jpeg_lib, field)},
	TB_JPEG_API(TB_SYM)
#undef TB_SYM
};

int tb_jpeg_open(tb_jpeg_lib *lib, const char *path, char *err, size_t errlen) {
	memset(lib, 0, sizeof *lib);
	void *h = tb_dl_load(path, tb_jpeg_symbols, sizeof tb_jpeg_symbols / sizeof tb_jpeg_symbols[0], lib, err, errlen);
	if (h == NULL) {
		memset(lib, 0, sizeof *lib);
		return -1;
	}
	lib->lib = h;
	return 0;
}

void tb_jpeg_close(tb_jpeg_lib *lib) {
	if (lib->lib != NULL) {
		tb_dl_close(lib->lib);
	}
	memset(lib, 0, sizeof *lib);
}

/* ---- the decompressor and its error handling ---- */

/* libjpeg's error_exit must not return: it jumps back to the C call that
 * began the decode (no Go frame lies in between). */
static void on_error_exit(void *cinfo) {
	tb_jpeg_decompress *ci = cinfo;
	tb_imgdec *d = ci->client_data;
	char buf[200]; /* JMSG_LENGTH_MAX */
	ci->err->format_message(cinfo, buf);
	snprintf(d->msg, sizeof d->msg, "%s", buf);
	d->status = TB_IMG_EDECODE;
	longjmp(d->jb, 1);
}

/* Warnings that mean lost or corrupt data stop the decode: libjpeg would
 * go on and fill the rest of the image with grey. */
static void on_emit_message(void *cinfo, int level) {
	tb_jpeg_decompress *ci = cinfo;
	if (level >= 0) {
		return; /* trace messages */
	}
	switch (ci->err->msg_code) {
	case TB_JWRN_ARITH_BAD_CODE:
	case TB_JWRN_BOGUS_PROGRESSION:
	case TB_JWRN_HIT_MARKER:
	case TB_JWRN_HUFF_BAD_CODE:
	case TB_JWRN_JPEG_EOF:
	case TB_JWRN_MUST_RESYNC:
	case TB_JWRN_NOT_SEQUENTIAL:
		on_error_exit(cinfo);
		break;
	default:
		ci->err->num_warnings++;
	}
}

static void on_output_message(void *cinfo) { (void)cinfo; }

tb_imgdec *tb_imgdec_new(const tb_jpeg_lib *lib) {
	tb_imgdec *d = calloc(1, sizeof *d);
	if (d == NULL) {
		return NULL;
	}
	d->lib = lib;
	if (lib == NULL || lib->lib == NULL) {
		return d; /* resampling only */
	}
	lib->std_error(&d->jerr);
	d->jerr.error_exit = on_error_exit;
	d->jerr.emit_message = on_emit_message;
	d->jerr.output_message = on_output_message;
	d->cinfo.err = &d->jerr;
	d->cinfo.client_data = d;
	if (setjmp(d->jb)) {
		/* e.g. "JPEG parameter struct mismatch": the library is not the
		 * 6.2 ABI that tb_jpeg.h mirrors. */
		d->lib = NULL;
		return d;
	}
	lib->create_decompress(&d->cinfo, TB_JPEG_LIB_VERSION, sizeof d->cinfo);
	return d;
}

void tb_imgdec_free(tb_imgdec *d) {
	if (d == NULL) {
		return;
	}
	if (d->lib != NULL && d->lib->lib != NULL) {
		d->lib->destroy_decompress(&d->cinfo);
	}
	free(d->rows);
	free(d->mid);
	free(d->line);
	free(d->fline);
	free(d->band);
	free(d);
}

const char *tb_imgdec_error(const tb_imgdec *d) { return d->msg; }

/* ---- JPEG ---- */

/* PIL opens a CMYK JPEG as inverted ("CMYK;I", Adobe's convention) and
 * converts it to RGB as r = (255-k) - (255-c)*(255-k)/255, rounded its
 * way (Convert.c's cmyk2rgb and MULDIV255). */
static void cmyk_to_rgbx(uint8_t *px, size_t n) {
	for (size_t i = 0; i < n; i++, px += 4) {
		int nk = px[3]; /* 255 - (255 - k) */
		for (int c = 0; c < 3; c++) {
			int v = 255 - px[c];
			int tmp = v * nk + 128;
			int m = ((tmp >> 8) + tmp) >> 8;
			int r = nk - m;
			px[c] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
		}
		px[3] = 0;
	}
}

/* read_rows reads up to want rows into rowp (each row's region from
 * byte xb: rw pixels, converted from CMYK to RGBX where cmyk is set).
 * Returns the rows read; 0 is a failure, recorded in d (the decode is
 * aborted). Called inside jpeg_run, whose setjmp libjpeg's errors reach. */
static unsigned read_rows(tb_imgdec *d, unsigned char **rowp, unsigned want, int cmyk, size_t xb, size_t rw) {
	tb_jpeg_decompress *ci = &d->cinfo;
	unsigned y = ci->output_scanline, got = d->lib->read_scanlines(ci, rowp, want);
	if (got == 0) {
		d->lib->abort_decompress(ci);
		tb_img_fail(d, TB_IMG_EDECODE, "no scanline at row %u", y);
	}
	for (unsigned k = 0; cmyk && k < got; k++) {
		cmyk_to_rgbx(rowp[k] + xb * 4, rw);
	}
	return got;
}

/* jpeg_run decodes rows [y0, y1) x columns [x0, x1) into sink s. */
static int jpeg_run(tb_imgdec *d, const uint8_t *data, size_t n, const tb_jreq *q, int x0, int y0, int x1, int y1,
		    const tb_row_sink *s) {
	const tb_jpeg_lib *L = d->lib;
	tb_jpeg_decompress *ci = &d->cinfo;
	d->msg[0] = 0;
	d->status = TB_IMG_OK;
	if (L == NULL || L->lib == NULL) {
		return tb_img_fail(d, TB_IMG_EARG, "libjpeg is not loaded");
	}
	if (q->scale_denom != 1 && q->scale_denom != 2 && q->scale_denom != 4 && q->scale_denom != 8) {
		return tb_img_fail(d, TB_IMG_EARG, "DCT scaling 1/%d: want 1, 2, 4 or 8", q->scale_denom);
	}
	if (setjmp(d->jb)) {
		L->abort_decompress(ci);
		return d->status;
	}
	L->mem_src(ci, data, (unsigned long)n);
	if (L->read_header(ci, 1) != TB_JPEG_HEADER_OK) {
		L->abort_decompress(ci);
		return tb_img_fail(d, TB_IMG_EDECODE, "no image in the JPEG stream");
	}
	if (ci->image_width != q->width || ci->image_height != q->height) {
		unsigned w = ci->image_width, h = ci->image_height;
		L->abort_decompress(ci);
		return tb_img_fail(d, TB_IMG_EFORMAT, "libjpeg reads a %ux%u image where the header parsed as %ux%u", w, h, q->width, q->height);
	}
	if (q->max_pixels && (uint64_t)ci->image_width * ci->image_height > q->max_pixels) {
		L->abort_decompress(ci);
		return tb_img_fail(d, TB_IMG_ETOOBIG, "%ux%u pixels, more than the limit of %llu", q->width, q->height,
			    (unsigned long long)q->max_pixels);
	}
	int cmyk = 0;
	switch (ci->num_components) {
	case 1:
	case 3:
		ci->out_color_space = s->rgb ? TB_JCS_RGB : TB_JCS_EXT_RGBX;
		break;
	case 4:
		ci->out_color_space = TB_JCS_CMYK;
		cmyk = 1;
		break;
	default: {
		int nc = ci->num_components;
		L->abort_decompress(ci);
		return tb_img_fail(d, TB_IMG_EFORMAT, "a JPEG of %d components", nc);
	}
	}
	ci->scale_num = 1;
	ci->scale_denom = (unsigned)q->scale_denom;
	ci->dct_method = q->fast_dct ? TB_JDCT_IFAST : TB_JDCT_ISLOW;
	ci->do_fancy_upsampling = q->box_upsample ? 0 : 1;
	/* jpeg_start_decompress makes a color deconverter only where the
	 * merged upsampler is not used, and jpeg_abort frees it without
	 * clearing the pointer; jpeg_skip_scanlines (libjpeg-turbo 2.1.5's
	 * read_and_discard_scanlines) swaps the color_convert of whatever
	 * cconvert points at: with the merged upsampler, the freed one of an
	 * earlier image, whose memory may now hold this image's rows (stale
	 * rows, and reads and writes of freed memory under valgrind). NULL
	 * here is what a fresh decompressor has. */
	ci->cconvert = NULL;
	ci->cquantize = NULL;
	L->start_decompress(ci);
	unsigned ow = ci->output_width, oh = ci->output_height;
	if (x0 < 0 || y0 < 0 || x0 >= x1 || y0 >= y1 || (unsigned)x1 > ow || (unsigned)y1 > oh) {
		L->abort_decompress(ci);
		return tb_img_fail(d, TB_IMG_EARG, "region [%d,%d)x[%d,%d) outside the %ux%u decoded image", x0, x1, y0, y1, ow, oh);
	}
	unsigned xoff = 0, cw = ow;
	if (x0 > 0 || (unsigned)x1 < ow) {
		/* One column of margin each side: libjpeg-turbo aligns the crop
		 * to an iMCU, and the columns at its edges are upsampled
		 * without their outer neighbours. */
		xoff = x0 > 0 ? (unsigned)x0 - 1 : 0;
		unsigned xe = (unsigned)x1 < ow ? (unsigned)x1 + 1 : ow;
		cw = xe - xoff;
		L->crop_scanline(ci, &xoff, &cw);
	}
	int bpp = s->rgb && !cmyk ? 3 : 4;
	size_t stride = (size_t)cw * bpp + 64;
	int rec = ci->rec_outbuf_height < 1 ? 1 : ci->rec_outbuf_height > 16 ? 16 : ci->rec_outbuf_height;
	int nrows = s->ring > 0 ? s->ring : rec;
	if (tb_img_grow((void **)&d->rows, &d->rows_cap, stride * (size_t)nrows)) {
		L->abort_decompress(ci);
		return tb_img_fail(d, TB_IMG_ENOMEM, "out of memory for %d rows of %u pixels", rec, cw);
	}
	if (y0 > 0 && L->skip_scanlines(ci, (unsigned)y0) != (unsigned)y0) {
		L->abort_decompress(ci);
		return tb_img_fail(d, TB_IMG_EDECODE, "could not skip %d rows", y0);
	}
	size_t xb = (size_t)x0 - xoff, rw = (size_t)(x1 - x0);
	if (s->begin(s->ctx, stride, xb, bpp, nrows) != TB_IMG_OK) {
		L->abort_decompress(ci);
		return d->status;
	}
	unsigned char *rowp[16];
	while (ci->output_scanline < (unsigned)y1) {
		unsigned y = ci->output_scanline, want = (unsigned)y1 - y;
		want = want < (unsigned)rec ? want : (unsigned)rec;
		want = s->place(s->ctx, rowp, y - (unsigned)y0, want);
		unsigned got = read_rows(d, rowp, want, cmyk, xb, rw);
		if (got == 0) {
			return d->status;
		}
		s->take(s->ctx, rowp, y - (unsigned)y0, got);
	}
	L->abort_decompress(ci);
	return TB_IMG_OK;
}

int tb_jpeg_resample(tb_imgdec *d, const uint8_t *data, size_t n, const tb_jreq *q, const tb_plan *p, void *dst, int path) {
	d->msg[0] = 0;
	if (p->fast) {
		tb_fs f;
		int st = tb_fs_begin(&f, d, p, dst, path, 3);
		if (st == TB_IMG_OK) {
			tb_row_sink s = tb_fs_sink(&f);
			st = jpeg_run(d, data, n, q, p->x0, p->y0, p->x1, p->y1, &s);
		}
		return st;
	}
	tb_rs r;
	int st = tb_rs_begin(&r, d, p, dst, path);
	if (st != TB_IMG_OK) {
		return st;
	}
	tb_row_sink s = tb_rs_sink(&r);
	st = jpeg_run(d, data, n, q, p->x0, p->y0, p->x1, p->y1, &s);
	if (st != TB_IMG_OK) {
		return st;
	}
	return tb_rs_end(&r);
}

/* The region sink: the rows of one read in d->rows, copied to the
 * caller's memory. */
typedef struct {
	tb_imgdec *d;
	uint8_t *dst;
	size_t dstride, rw; /* dst's row bytes; the region's width in pixels */
	size_t stride, off; /* d->rows' row bytes; column x0's byte in a row */
} region_sink;

static int region_begin(void *ctx, size_t stride, size_t xb, int bpp, int nrows) {
	region_sink *g = ctx;
	(void)nrows;
	g->stride = stride, g->off = xb * (size_t)bpp;
	return TB_IMG_OK;
}

static unsigned region_place(void *ctx, unsigned char **rowp, unsigned y, unsigned want) {
	region_sink *g = ctx;
	(void)y;
	for (unsigned k = 0; k < want; k++) {
		rowp[k] = g->d->rows + (size_t)k * g->stride;
	}
	return want;
}

static void region_take(void *ctx, unsigned char *const *rowp, unsigned y, unsigned got) {
	region_sink *g = ctx;
	for (unsigned k = 0; k < got; k++) {
		memcpy(g->dst + (size_t)(y + k) * g->dstride, rowp[k] + g->off, g->rw * 4);
	}
}

int tb_jpeg_region(tb_imgdec *d, const uint8_t *data, size_t n, const tb_jreq *q, int x0, int y0, int x1, int y1, uint8_t *dst,
		   size_t stride) {
	region_sink g = {.d = d, .dst = dst, .dstride = stride, .rw = (size_t)(x1 - x0)};
	tb_row_sink s = {.ctx = &g, .begin = region_begin, .place = region_place, .take = region_take};
	return jpeg_run(d, data, n, q, x0, y0, x1, y1, &s);
}
