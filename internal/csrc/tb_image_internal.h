/* tb_image_internal: what the files of the image kernels share (not part
 * of the API; tb_image.h is). tb_jpeg_decode.c drives libjpeg and owns the
 * decoder state; tb_resample_exact.c is the exact (Pillow) resampling,
 * tb_resample_fast.c the fast one. A JPEG's rows reach a resampling through
 * a tb_row_sink. */
#ifndef TB_IMAGE_INTERNAL_H
#define TB_IMAGE_INTERNAL_H

#include "tb_simd.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tb_image.h"
#include "tb_kernels.h"

/* Pillow's fixed point: 22 fractional bits, rounding by adding half. */
#define PRECISION_BITS 22
#define HALF (1 << (PRECISION_BITS - 1))

struct tb_imgdec {
	const tb_jpeg_lib *lib;
	tb_jpeg_decompress cinfo;
	tb_jpeg_error_mgr jerr;
	jmp_buf jb;
	int status;
	char msg[256];
	uint8_t *rows; /* decoded scanlines */
	size_t rows_cap;
	uint8_t *mid; /* the region's rows, resized horizontally */
	size_t mid_cap;
	uint8_t *line; /* one output row, RGBX */
	size_t line_cap;
	float *fline; /* one output row of one channel, float32 (half outputs) */
	size_t fline_cap;
	uint8_t *band; /* SIMD paths: 8 region rows, then transposed, then resized */
	size_t band_cap;
	float fma_mean[3], fma_std[3]; /* the mean and std fma_ok was checked for */
	int fma_ok[3], fma_checked;    /* fplane_fma gives the division's bits */
};

__attribute__((format(printf, 3, 4))) static inline int tb_img_fail(tb_imgdec *d, int status, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->msg, sizeof d->msg, fmt, ap);
	va_end(ap);
	d->status = status;
	return status;
}

/* tb_img_grow makes *p hold at least n bytes. */
static inline int tb_img_grow(void **p, size_t *cap, size_t n) {
	if (n <= *cap) {
		return 0;
	}
	size_t c = *cap ? *cap : 4096;
	while (c < n) {
		c *= 2;
	}
	void *q = realloc(*p, c);
	if (q == NULL) {
		return -1;
	}
	*p = q;
	*cap = c;
	return 0;
}

/* Whether path runs the SIMD code of the resamplings. */
static inline int tb_img_simd(int path) {
#ifdef TB_X86
	return path == TB_PATH_AVX2 || path == TB_PATH_AVX512;
#else
	(void)path;
	return 0;
#endif
}

/* Where the rows of a JPEG decode go (tb_jpeg_decode.c's jpeg_run): a
 * resampling, or a copy of the region. jpeg_run asks place where libjpeg
 * writes the next rows, decodes them there, and hands them to take. Rows
 * are numbered from the region's first. */
typedef struct tb_row_sink {
	void *ctx;
	int rgb;  /* RGB rows (3 bytes a pixel; CMYK ones stay 4) instead of RGBX */
	int ring; /* rows of d->rows the sink keeps decoded; 0: one read's */
	/* The rows' layout, once the decode starts: bpp bytes a pixel, rows
	 * stride bytes apart, the region's column x0 at pixel xb of a row;
	 * nrows rows of d->rows are there. A status. */
	int (*begin)(void *ctx, size_t stride, size_t xb, int bpp, int nrows);
	/* Points rowp[0..k) at where rows y, y+1, ... go and returns k, with
	 * 1 <= k <= want. */
	unsigned (*place)(void *ctx, unsigned char **rowp, unsigned y, unsigned want);
	/* Takes the got rows just decoded into rowp: rows y, y+1, ... */
	void (*take)(void *ctx, unsigned char *const *rowp, unsigned y, unsigned got);
} tb_row_sink;

/* ---- the exact resampling (tb_resample_exact.c) ---- */

/* A resampling in progress: rows of the region are pushed in order; each
 * output row is finished as soon as its last source row is in. */
typedef struct {
	tb_imgdec *d;
	const tb_plan *p;
	int path;
	void *dst;
	size_t ms; /* bytes per row of mid */
	int w;     /* region width */
	int pushed, next;
	int nband;   /* SIMD paths: rows waiting in the band */
	size_t bs;   /* bytes per band row */
	size_t boff; /* offset of the region's column x0 in a band row */
	uint8_t *bt; /* the band transposed: w rows of 32 bytes */
	uint8_t *mt; /* the band's output columns: ow rows of 32 bytes */
	size_t rstride, roff; /* scalar path, from a JPEG: rows of d->rows, column x0 at byte roff */
} tb_rs;

int tb_rs_begin(tb_rs *r, tb_imgdec *d, const tb_plan *p, void *dst, int path);
/* tb_rs_bands lays out the band: 8 rows of bs bytes, the region's first
 * column at boff, then the transposed band and its output columns. */
int tb_rs_bands(tb_rs *r, size_t bs, size_t boff);
/* tb_rs_band resizes the rows waiting in the band. */
void tb_rs_band(tb_rs *r);
/* tb_rs_push takes the next row of the region (row points at its column x0). */
void tb_rs_push(tb_rs *r, const uint8_t *row);
int tb_rs_end(tb_rs *r);
/* tb_rs_sink is the sink of a JPEG decode into r (begun). */
tb_row_sink tb_rs_sink(tb_rs *r);

/* ---- the fast resampling (tb_resample_fast.c) ---- */

enum { FAST_BATCH = 32 };

/* A fast resampling in progress: the rows of the region, in order, either
 * all in memory or in a ring that libjpeg writes into. */
typedef struct {
	tb_imgdec *d;
	const tb_plan *p;
	int path, bpp;
	void *dst;
	int w, h, np;
	const uint8_t *rows; /* region row r at rows + (r % ring) * stride */
	size_t stride;
	int ring, next, read;
	uint8_t *pl[3];
	uint8_t *tabs; /* SIMD: fh_tables' (32-byte aligned) */
	float *o[3];   /* the float row: into dst (float32), else fline */
} tb_fs;

int tb_fs_begin(tb_fs *f, tb_imgdec *d, const tb_plan *p, void *dst, int path, int bpp);
/* tb_fs_ready writes every output row whose source rows are among the first
 * have rows of the region. */
void tb_fs_ready(tb_fs *f, int have);
/* tb_fs_resample is tb_resample's fast resampling (RGBX rows in memory). */
int tb_fs_resample(tb_imgdec *d, const tb_plan *p, const uint8_t *src, size_t stride, void *dst, int path);
/* tb_fs_sink is the sink of a JPEG decode into f (begun): RGB rows in a
 * ring of d->rows. */
tb_row_sink tb_fs_sink(tb_fs *f);

#endif
