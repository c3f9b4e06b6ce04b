//go:build cgo

#include "tb_simd.h"

#include "tb_image.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tb_dl.h"
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

static int fail(tb_imgdec *d, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(tb_imgdec *d, int status, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->msg, sizeof d->msg, fmt, ap);
	va_end(ap);
	d->status = status;
	return status;
}

/* grow makes *p hold at least n bytes. */
static int grow(void **p, size_t *cap, size_t n) {
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

/* ---- resampling: the passes ---- */

static inline uint8_t clip8(int32_t v) {
	v >>= PRECISION_BITS;
	return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* Output pixels [from, ow) of one row: pixel j from src pixels hb[2j]... */
static void hpass_scalar(uint8_t *out, const uint8_t *src, int from, const tb_plan *p) {
	for (int j = from; j < p->ow; j++) {
		const uint8_t *s = src + (size_t)p->hb[2 * j] * 4;
		const int32_t *k = p->hk + (size_t)j * p->hks;
		int n = p->hb[2 * j + 1];
		int32_t s0 = HALF, s1 = HALF, s2 = HALF;
		for (int t = 0; t < n; t++) {
			s0 += s[4 * t + 0] * k[t];
			s1 += s[4 * t + 1] * k[t];
			s2 += s[4 * t + 2] * k[t];
		}
		out[4 * j + 0] = clip8(s0);
		out[4 * j + 1] = clip8(s1);
		out[4 * j + 2] = clip8(s2);
		out[4 * j + 3] = 0;
	}
}

/* Bytes [from, nbytes) of output row i from the rows of mid. */
static void vpass_scalar(uint8_t *line, const uint8_t *mid, size_t ms, int from, int nbytes, int ymin, int n, const int32_t *k) {
	for (int b = from; b < nbytes; b++) {
		int32_t s = HALF;
		for (int t = 0; t < n; t++) {
			s += mid[(size_t)(ymin + t) * ms + b] * k[t];
		}
		line[b] = clip8(s);
	}
}

static inline float norm(uint8_t v, float mean, float std) {
	float x = (float)v / 255.0f;
	x = x - mean;
	return x / std;
}

/* Channel c of output row line, as float32, into o[from, ow). */
static void fchan_scalar(float *o, const uint8_t *line, int from, int ow, int c, int flip, float mean, float std) {
	for (int j = from; j < ow; j++) {
		int s = flip ? ow - 1 - j : j;
		o[j] = norm(line[4 * s + c], mean, std);
	}
}

#ifdef TB_X86
AVX2 static void vpass_avx2(uint8_t *line, const uint8_t *mid, size_t ms, int nbytes, int ymin, int n, const int32_t *k) {
	const __m256i half = _mm256_set1_epi32(HALF);
	int b = 0;
	for (; b + 16 <= nbytes; b += 16) {
		__m256i a0 = half, a1 = half;
		for (int t = 0; t < n; t++) {
			__m128i v = _mm_loadu_si128((const __m128i *)(mid + (size_t)(ymin + t) * ms + b));
			__m256i kv = _mm256_set1_epi32(k[t]);
			a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(v), kv));
			a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)), kv));
		}
		a0 = _mm256_srai_epi32(a0, PRECISION_BITS);
		a1 = _mm256_srai_epi32(a1, PRECISION_BITS);
		/* packs works within 128-bit lanes: [a0lo a1lo | a0hi a1hi] */
		__m256i w16 = _mm256_packs_epi32(a0, a1);
		w16 = _mm256_permute4x64_epi64(w16, 0xd8); /* [a0lo a0hi a1lo a1hi] */
		__m256i w8 = _mm256_packus_epi16(w16, w16);
		w8 = _mm256_permute4x64_epi64(w8, 0x08);
		_mm_storeu_si128((__m128i *)(line + b), _mm256_castsi256_si128(w8));
	}
	vpass_scalar(line, mid, ms, b, nbytes, ymin, n, k);
}


/* ---- the horizontal pass as a vertical one ----
 *
 * Eight region rows at a time are transposed (8x8 blocks of RGBX words),
 * so each region column becomes a 32-byte row of 8 RGBX pixels, top to
 * bottom; output column j is then a weighted sum of whole 32-byte rows,
 * computed like the vertical pass (a shuffle takes each channel's 8 bytes
 * to int32s), and the 8 results are transposed back into rows of mid. Same sums
 * as hpass_scalar, same bits; several times faster than gathering each
 * output pixel's taps. */

AVX2 static inline void tr8x8(__m256i r[8]) {
	__m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
	__m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
	__m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
	__m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
	__m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
	__m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
	__m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
	__m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
	r[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
	r[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
	r[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
	r[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
	r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
	r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
	r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
	r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

/* band holds 8 rows of w pixels, bs bytes apart. Column x goes to bt + 32x
 * as 8 RGBX pixels, rows 0 to 7. */
AVX2 static void band_transpose(uint8_t *bt, const uint8_t *band, size_t bs, int w) {
	int x = 0;
	for (; x + 8 <= w; x += 8) {
		__m256i r[8];
		for (int i = 0; i < 8; i++) {
			r[i] = _mm256_loadu_si256((const __m256i *)(band + i * bs + (size_t)x * 4));
		}
		tr8x8(r);
		for (int k = 0; k < 8; k++) {
			_mm256_store_si256((__m256i *)(bt + (size_t)(x + k) * 32), r[k]);
		}
	}
	for (; x < w; x++) {
		for (int i = 0; i < 8; i++) {
			memcpy(bt + (size_t)x * 32 + 4 * i, band + i * bs + (size_t)x * 4, 4);
		}
	}
}

/* Output column j of the band, 8 rows of each channel (24 bytes), into
 * mt + 32j; bt and mt are 32-byte aligned. */
AVX2 static void hcol_avx2(uint8_t *mt, const uint8_t *bt, const tb_plan *p) {
	const __m256i half = _mm256_set1_epi32(HALF);
	const __m256i lanes = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	/* channel c of the 8 pixels as int32, rows 0 to 7 */
#define CH(c)                                                                                                                         \
	_mm256_setr_epi8(c, -1, -1, -1, c + 4, -1, -1, -1, c + 8, -1, -1, -1, c + 12, -1, -1, -1, c, -1, -1, -1, c + 4, -1, -1, -1, c + 8, \
			 -1, -1, -1, c + 12, -1, -1, -1)
	const __m256i cr = CH(0), cg = CH(1), cb = CH(2);
#undef CH
	for (int j = 0; j < p->ow; j++) {
		const uint8_t *s = bt + (size_t)p->hb[2 * j] * 32;
		const int32_t *k = p->hk + (size_t)j * p->hks;
		int n = p->hb[2 * j + 1];
		__m256i ar = half, ag = half, ab = half;
		for (int t = 0; t < n; t++) {
			__m256i v = _mm256_load_si256((const __m256i *)(s + 32 * t));
			__m256i kv = _mm256_set1_epi32(k[t]);
			ar = _mm256_add_epi32(ar, _mm256_mullo_epi32(_mm256_shuffle_epi8(v, cr), kv));
			ag = _mm256_add_epi32(ag, _mm256_mullo_epi32(_mm256_shuffle_epi8(v, cg), kv));
			ab = _mm256_add_epi32(ab, _mm256_mullo_epi32(_mm256_shuffle_epi8(v, cb), kv));
		}
		ar = _mm256_srai_epi32(ar, PRECISION_BITS);
		ag = _mm256_srai_epi32(ag, PRECISION_BITS);
		ab = _mm256_srai_epi32(ab, PRECISION_BITS);
		/* [R0-3 G0-3 B0-3 B0-3 | R4-7 G4-7 B4-7 B4-7] as bytes */
		__m256i b = _mm256_packus_epi16(_mm256_packs_epi32(ar, ag), _mm256_packs_epi32(ab, ab));
		_mm256_store_si256((__m256i *)(mt + (size_t)j * 32), _mm256_permutevar8x32_epi32(b, lanes));
	}
}

/* mt holds ow columns of 8 rows of each channel; rows [0, nrows) go to
 * mid, ms bytes apart, each row planar: ow reds, ow greens, ow blues. */
AVX2 static void band_untranspose(uint8_t *mid, size_t ms, const uint8_t *mt, int ow, int nrows) {
	int j = 0;
	for (; j + 8 <= ow; j += 8) {
		for (int c = 0; c < 3; c++) {
			__m128i a[8];
			for (int k = 0; k < 8; k++) {
				a[k] = _mm_loadl_epi64((const __m128i *)(mt + (size_t)(j + k) * 32 + 8 * c));
			}
			__m128i x0 = _mm_unpacklo_epi8(a[0], a[1]), x1 = _mm_unpacklo_epi8(a[2], a[3]);
			__m128i x2 = _mm_unpacklo_epi8(a[4], a[5]), x3 = _mm_unpacklo_epi8(a[6], a[7]);
			__m128i y0 = _mm_unpacklo_epi16(x0, x1), y1 = _mm_unpackhi_epi16(x0, x1);
			__m128i y2 = _mm_unpacklo_epi16(x2, x3), y3 = _mm_unpackhi_epi16(x2, x3);
			__m128i z[4] = {_mm_unpacklo_epi32(y0, y2), _mm_unpackhi_epi32(y0, y2), _mm_unpacklo_epi32(y1, y3),
					_mm_unpackhi_epi32(y1, y3)};
			uint8_t *o = mid + (size_t)c * ow + j;
			for (int i = 0; i < nrows; i++) {
				__m128i v = (i & 1) ? _mm_unpackhi_epi64(z[i / 2], z[i / 2]) : z[i / 2];
				_mm_storel_epi64((__m128i *)(o + i * ms), v);
			}
		}
	}
	for (; j < ow; j++) {
		for (int c = 0; c < 3; c++) {
			for (int i = 0; i < nrows; i++) {
				mid[i * ms + (size_t)c * ow + j] = mt[(size_t)j * 32 + 8 * c + i];
			}
		}
	}
}

/* One channel of a planar output row as float32 into o[0, ow), dividing. */
AVX2 static void fplane_avx2(float *o, const uint8_t *line, int ow, int flip, float mean, float std) {
	const __m256i rev = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
	const __m256 k255 = _mm256_set1_ps(255.0f), vm = _mm256_set1_ps(mean), vs = _mm256_set1_ps(std);
	int j = 0;
	for (; j + 8 <= ow; j += 8) {
		__m256i v;
		if (flip) {
			v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(line + (ow - 8 - j))));
			v = _mm256_permutevar8x32_epi32(v, rev);
		} else {
			v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(line + j)));
		}
		__m256 x = _mm256_div_ps(_mm256_cvtepi32_ps(v), k255);
		x = _mm256_sub_ps(x, vm);
		_mm256_storeu_ps(o + j, _mm256_div_ps(x, vs));
	}
	for (; j < ow; j++) {
		o[j] = norm(line[flip ? ow - 1 - j : j], mean, std);
	}
}

#define FMA __attribute__((target("avx2,fma")))

/* Division by d as a multiply and two explicit fused multiply-adds
 * (Markstein): q = q0 + (x - q0*d)*r with r = 1/d rounded. It is the
 * correctly rounded quotient for most divisors and inputs; fdiv_exact
 * checks it on every input a channel can see (its 256 values) before it is
 * used, so the bits stay those of the division. */
FMA static inline __m256 fdiv_fma(__m256 x, __m256 d, __m256 r) {
	__m256 q0 = _mm256_mul_ps(x, r);
	__m256 e = _mm256_fnmadd_ps(q0, d, x);
	return _mm256_fmadd_ps(e, r, q0);
}

FMA static float fdiv1(float x, float d, float r) {
	__m256 q = fdiv_fma(_mm256_set1_ps(x), _mm256_set1_ps(d), _mm256_set1_ps(r));
	return _mm_cvtss_f32(_mm256_castps256_ps128(q));
}

/* fdiv_exact says whether fplane_fma gives norm()'s bits for every byte. */
FMA static int fdiv_exact(float mean, float std) {
	float r255 = 1.0f / 255.0f, rs = 1.0f / std;
	for (int v = 0; v < 256; v++) {
		float want = norm((uint8_t)v, mean, std);
		float x = fdiv1((float)v, 255.0f, r255) - mean;
		float got = fdiv1(x, std, rs);
		if (memcmp(&want, &got, sizeof want) != 0) {
			return 0;
		}
	}
	return 1;
}

/* fplane_avx2 without a division, for channels fdiv_exact accepted. */
FMA static void fplane_fma(float *o, const uint8_t *line, int ow, int flip, float mean, float std) {
	const __m256i rev = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
	const __m256 k255 = _mm256_set1_ps(255.0f), r255 = _mm256_set1_ps(1.0f / 255.0f);
	const __m256 vm = _mm256_set1_ps(mean), vs = _mm256_set1_ps(std), rs = _mm256_set1_ps(1.0f / std);
	int j = 0;
	for (; j + 8 <= ow; j += 8) {
		__m256i v;
		if (flip) {
			v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(line + (ow - 8 - j))));
			v = _mm256_permutevar8x32_epi32(v, rev);
		} else {
			v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(line + j)));
		}
		__m256 x = _mm256_sub_ps(fdiv_fma(_mm256_cvtepi32_ps(v), k255, r255), vm);
		_mm256_storeu_ps(o + j, fdiv_fma(x, vs, rs));
	}
	for (; j < ow; j++) {
		o[j] = norm(line[flip ? ow - 1 - j : j], mean, std);
	}
}
#endif

static int simd(int path) {
#ifdef TB_X86
	return path == TB_PATH_AVX2 || path == TB_PATH_AVX512;
#else
	(void)path;
	return 0;
#endif
}

static void hpass(uint8_t *out, const uint8_t *src, const tb_plan *p) { hpass_scalar(out, src, 0, p); }

static void vpass(int path, uint8_t *line, const uint8_t *mid, size_t ms, int nbytes, int ymin, int n, const int32_t *k) {
#ifdef TB_X86
	if (simd(path)) {
		vpass_avx2(line, mid, ms, nbytes, ymin, n, k);
		return;
	}
#endif
	(void)path;
	vpass_scalar(line, mid, ms, 0, nbytes, ymin, n, k);
}


/* write_row writes output row i (RGBX in line) into dst. */
static void write_row(tb_imgdec *d, const tb_plan *p, int path, const uint8_t *line, int i, void *dst) {
	size_t ow = (size_t)p->ow, plane = (size_t)p->oh * ow;
	switch (p->out) {
	case TB_OUT_U8_HWC: {
		uint8_t *o = (uint8_t *)dst + (size_t)i * ow * 3;
		for (size_t j = 0; j < ow; j++) {
			size_t s = p->flip ? ow - 1 - j : j;
			o[3 * j + 0] = line[4 * s + 0];
			o[3 * j + 1] = line[4 * s + 1];
			o[3 * j + 2] = line[4 * s + 2];
		}
		break;
	}
	case TB_OUT_U8_CHW:
		for (int c = 0; c < 3; c++) {
			uint8_t *o = (uint8_t *)dst + c * plane + (size_t)i * ow;
			for (size_t j = 0; j < ow; j++) {
				o[j] = line[4 * (p->flip ? ow - 1 - j : j) + c];
			}
		}
		break;
	case TB_OUT_F32_CHW:
		for (int c = 0; c < 3; c++) {
			fchan_scalar((float *)dst + c * plane + (size_t)i * ow, line, 0, p->ow, c, p->flip, p->mean[c], p->std[c]);
		}
		break;
	case TB_OUT_F16_CHW:
	case TB_OUT_BF16_CHW:
		for (int c = 0; c < 3; c++) {
			fchan_scalar(d->fline, line, 0, p->ow, c, p->flip, p->mean[c], p->std[c]);
			uint16_t *o = (uint16_t *)dst + c * plane + (size_t)i * ow;
			if (p->out == TB_OUT_F16_CHW) {
				tb_f32_to_f16(path, o, d->fline, ow);
			} else {
				tb_f32_to_bf16(path, o, d->fline, ow);
			}
		}
		break;
	}
}

#ifdef TB_X86
static int cpu_fma(void) {
	static int known, has;
	if (!known) {
		has = __builtin_cpu_supports("fma");
		known = 1;
	}
	return has;
}

/* fplane writes channel c of a planar row as float32, without dividing
 * where that gives the same bits (checked once per mean and std). */
static void fplane(tb_imgdec *d, int c, float *o, const uint8_t *line, const tb_plan *p) {
	if (!d->fma_checked || memcmp(d->fma_mean, p->mean, sizeof d->fma_mean) || memcmp(d->fma_std, p->std, sizeof d->fma_std)) {
		for (int k = 0; k < 3; k++) {
			d->fma_ok[k] = cpu_fma() && fdiv_exact(p->mean[k], p->std[k]);
		}
		memcpy(d->fma_mean, p->mean, sizeof d->fma_mean);
		memcpy(d->fma_std, p->std, sizeof d->fma_std);
		d->fma_checked = 1;
	}
	if (d->fma_ok[c]) {
		fplane_fma(o, line, p->ow, p->flip, p->mean[c], p->std[c]);
	} else {
		fplane_avx2(o, line, p->ow, p->flip, p->mean[c], p->std[c]);
	}
}

/* write_planar writes output row i (planar in line: ow reds, greens,
 * blues) into dst: the SIMD paths' writer. */
static void write_planar(tb_imgdec *d, const tb_plan *p, int path, const uint8_t *line, int i, void *dst) {
	size_t ow = (size_t)p->ow, plane = (size_t)p->oh * ow;
	switch (p->out) {
	case TB_OUT_U8_HWC: {
		uint8_t *o = (uint8_t *)dst + (size_t)i * ow * 3;
		for (size_t j = 0; j < ow; j++) {
			size_t s = p->flip ? ow - 1 - j : j;
			o[3 * j + 0] = line[s];
			o[3 * j + 1] = line[ow + s];
			o[3 * j + 2] = line[2 * ow + s];
		}
		break;
	}
	case TB_OUT_U8_CHW:
		for (int c = 0; c < 3; c++) {
			uint8_t *o = (uint8_t *)dst + c * plane + (size_t)i * ow;
			const uint8_t *l = line + c * ow;
			if (!p->flip) {
				memcpy(o, l, ow);
				continue;
			}
			for (size_t j = 0; j < ow; j++) {
				o[j] = l[ow - 1 - j];
			}
		}
		break;
	case TB_OUT_F32_CHW:
		for (int c = 0; c < 3; c++) {
			fplane(d, c, (float *)dst + c * plane + (size_t)i * ow, line + c * ow, p);
		}
		break;
	case TB_OUT_F16_CHW:
	case TB_OUT_BF16_CHW:
		for (int c = 0; c < 3; c++) {
			fplane(d, c, d->fline, line + c * ow, p);
			uint16_t *o = (uint16_t *)dst + c * plane + (size_t)i * ow;
			if (p->out == TB_OUT_F16_CHW) {
				tb_f32_to_f16(path, o, d->fline, ow);
			} else {
				tb_f32_to_bf16(path, o, d->fline, ow);
			}
		}
		break;
	}
}
#endif

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
} tb_rs;

static int rs_bands(tb_rs *r, size_t bs, size_t boff);
static int fs_resample(tb_imgdec *d, const tb_plan *p, const uint8_t *src, size_t stride, void *dst, int path);

static int rs_begin(tb_rs *r, tb_imgdec *d, const tb_plan *p, void *dst, int path) {
	memset(r, 0, sizeof *r);
	r->d = d, r->p = p, r->dst = dst, r->path = path;
	r->w = p->x1 - p->x0;
	/* scalar: mid rows of RGBX pixels; SIMD: planar rows (see rs_band) */
	r->ms = (size_t)p->ow * (simd(path) ? 3 : 4);
	size_t rows = (size_t)(p->y1 - p->y0);
	if (grow((void **)&d->mid, &d->mid_cap, rows * r->ms + 64) || grow((void **)&d->line, &d->line_cap, r->ms + 64) ||
	    grow((void **)&d->fline, &d->fline_cap, (size_t)p->ow * sizeof(float) + 64)) {
		return fail(d, TB_IMG_ENOMEM, "out of memory for a %dx%d resampling", p->ow, p->oh);
	}
	if (simd(path)) {
		return rs_bands(r, (size_t)r->w * 4 + 32, 0);
	}
	return TB_IMG_OK;
}

/* rs_bands lays out the band: 8 rows of bs bytes, the region's first
 * column at boff, then the transposed band and its output columns. */
static int rs_bands(tb_rs *r, size_t bs, size_t boff) {
	tb_imgdec *d = r->d;
	/* bt and mt: 32 bytes a column (the last 8 unused), 32-byte aligned */
	size_t nb = (8 * bs + 31) & ~(size_t)31, nt = (size_t)r->w * 32, nm = (size_t)r->p->ow * 32;
	if (grow((void **)&d->band, &d->band_cap, nb + nt + nm + 32)) {
		return fail(d, TB_IMG_ENOMEM, "out of memory for a %dx%d resampling", r->p->ow, r->p->oh);
	}
	memset(d->band, 0, nb);
	r->bs = bs;
	r->boff = boff;
	r->bt = (uint8_t *)(((uintptr_t)d->band + nb + 31) & ~(uintptr_t)31);
	r->mt = r->bt + nt;
	return TB_IMG_OK;
}

static void rs_emit(tb_rs *r) {
	const tb_plan *p = r->p;
	while (r->next < p->oh) {
		int i = r->next, ymin = p->vb[2 * i], n = p->vb[2 * i + 1];
		if (ymin + n > r->pushed) {
			return;
		}
		vpass(r->path, r->d->line, r->d->mid, r->ms, (int)r->ms, ymin, n, p->vk + (size_t)i * p->vks);
#ifdef TB_X86
		if (simd(r->path)) {
			write_planar(r->d, p, r->path, r->d->line, i, r->dst);
			r->next++;
			continue;
		}
#endif
		write_row(r->d, p, r->path, r->d->line, i, r->dst);
		r->next++;
	}
}

/* rs_band resizes the rows waiting in the band. */
static void rs_band(tb_rs *r) {
#ifdef TB_X86
	if (r->nband > 0) {
		band_transpose(r->bt, r->d->band + r->boff, r->bs, r->w);
		hcol_avx2(r->mt, r->bt, r->p);
		band_untranspose(r->d->mid + (size_t)r->pushed * r->ms, r->ms, r->mt, r->p->ow, r->nband);
		r->pushed += r->nband;
		r->nband = 0;
		rs_emit(r);
	}
#else
	(void)r;
#endif
}

/* rs_push takes the next row of the region (row points at its column x0). */
static void rs_push(tb_rs *r, const uint8_t *row) {
	if (simd(r->path)) {
		memcpy(r->d->band + (size_t)r->nband * r->bs, row, (size_t)r->w * 4);
		if (++r->nband == 8) {
			rs_band(r);
		}
		return;
	}
	hpass(r->d->mid + (size_t)r->pushed * r->ms, row, r->p);
	r->pushed++;
	rs_emit(r);
}

static int rs_end(tb_rs *r) {
	rs_band(r);
	rs_emit(r);
	if (r->next != r->p->oh) {
		return fail(r->d, TB_IMG_EARG, "plan: output row %d reads past the region's %d rows", r->next, r->pushed);
	}
	return TB_IMG_OK;
}

int tb_resample(tb_imgdec *d, const tb_plan *p, const uint8_t *src, size_t stride, void *dst, int path) {
	tb_rs r;
	d->msg[0] = 0;
	if (p->fast) {
		return fs_resample(d, p, src, stride, dst, path);
	}
	int st = rs_begin(&r, d, p, dst, path);
	if (st != TB_IMG_OK) {
		return st;
	}
	for (int y = p->y0; y < p->y1; y++) {
		rs_push(&r, src + (size_t)(y - p->y0) * stride);
	}
	return rs_end(&r);
}

/* ---- the fast resampling ----
 *
 * Output row i: the vertical pass sums its source rows in 16 bits into
 * fv (W pixels, interleaved as they come), which is split into three
 * planes; the horizontal pass makes each output pixel from its taps in a
 * plane. The SIMD horizontal pass takes eight output pixels at a time:
 * each group of four reads a 16-byte window of the plane (from its
 * leftmost tap), gathers the taps two by two into 16-bit pairs with a
 * shuffle and sums them with multiply-adds; a group whose taps do not fit
 * its window (a downscale of more than about 3x) is done as the scalar
 * path does it. Same arithmetic everywhere: same bits. */

static inline uint16_t fast_vk(int32_t k) { return (uint16_t)((k + 64) >> 7); }
static inline int16_t fast_hk(int32_t k) { return (int16_t)((k + 128) >> 8); }

/* fast_plan_ok says whether every read of p lies in its w x h region. */
static int fast_plan_ok(const tb_plan *p, int w, int h) {
	for (int j = 0; j < p->ow; j++) {
		int32_t lo = p->hb[2 * j], n = p->hb[2 * j + 1];
		if (lo < 0 || n < 0 || n > p->hks || lo + n > w) {
			return 0;
		}
	}
	for (int i = 0; i < p->oh; i++) {
		int32_t lo = p->vb[2 * i], n = p->vb[2 * i + 1];
		if (lo < 0 || n < 0 || n > p->vks || lo + n > h) {
			return 0;
		}
	}
	return 1;
}

/* Bytes [from, nbytes) of the vertical pass over the n rows at rows[]. */
static void fv_scalar(uint8_t *out, const uint8_t *const *rows, int from, int nbytes, int n, const uint16_t *k) {
	for (int b = from; b < nbytes; b++) {
		uint16_t acc = 0;
		for (int t = 0; t < n; t++) {
			acc = (uint16_t)(acc + (((uint32_t)rows[t][b] * k[t]) >> 8));
		}
		int v = (uint16_t)(acc + 64) >> 7;
		out[b] = (uint8_t)(v > 255 ? 255 : v);
	}
}

/* Pixels [from, w) of an interleaved row of bpp bytes a pixel into three planes. */
static void fsplit_scalar(uint8_t *const pl[3], const uint8_t *src, int from, int w, int bpp) {
	for (int x = from; x < w; x++) {
		pl[0][x] = src[bpp * x], pl[1][x] = src[bpp * x + 1], pl[2][x] = src[bpp * x + 2];
	}
}

/* Output pixel j of a plane: the sum of its taps. */
static inline int32_t fh_one(const uint8_t *plane, const tb_plan *p, int j) {
	int s = p->flip ? p->ow - 1 - j : j;
	const int32_t *k = p->hk + (size_t)s * p->hks;
	const uint8_t *x = plane + p->hb[2 * s];
	uint32_t acc = 0;
	for (int t = 0; t < p->hb[2 * s + 1]; t++) {
		acc += (uint32_t)((int32_t)x[t] * fast_hk(k[t]));
	}
	return (int32_t)acc;
}

/* Outputs [from, to) of the three planes, as floats. */
static void fh_scalar(float *const o[3], const uint8_t *const pl[3], const tb_plan *p, int from, int to) {
	for (int c = 0; c < 3; c++) {
		for (int j = from; j < to; j++) {
			float x = (float)fh_one(pl[c], p, j) * p->scale[c];
			o[c][j] = x + p->bias[c];
		}
	}
}

static size_t fh_block_bytes(int np) { return 32 + 64 * (size_t)np; }

/* A uint8 output from its float (acc / 16384 + 0.5): clamped, truncated. */
static inline uint8_t fast_u8(float x) { return (uint8_t)(x <= 0 ? 0 : x >= 255 ? 255 : (int)x); }

#ifdef TB_X86
/* One 32-byte chunk of the vertical pass: the sums of its 32 bytes in two
 * halves (in the unpack's lane order), added to lo and hi. */
#define FV_CHUNK(lo, hi, p, kv)                                                            \
	do {                                                                               \
		__m256i v_ = _mm256_loadu_si256((const __m256i *)(p));                    \
		/* (v << 8) * k >> 16 = (v * k) >> 8, unsigned */                          \
		lo = _mm256_add_epi16(lo, _mm256_mulhi_epu16(_mm256_unpacklo_epi8(z, v_), kv)); \
		hi = _mm256_add_epi16(hi, _mm256_mulhi_epu16(_mm256_unpackhi_epi8(z, v_), kv)); \
	} while (0)

AVX2 static inline __m256i fv_round(__m256i lo, __m256i hi) {
	const __m256i r = _mm256_set1_epi16(64);
	return _mm256_packus_epi16(_mm256_srli_epi16(_mm256_add_epi16(lo, r), 7), _mm256_srli_epi16(_mm256_add_epi16(hi, r), 7));
}

AVX2 static void fv_avx2(uint8_t *out, const uint8_t *const *rows, int nbytes, int n, const uint16_t *k) {
	const __m256i z = _mm256_setzero_si256();
	if (nbytes < 32) {
		fv_scalar(out, rows, 0, nbytes, n, k);
		return;
	}
	int b = 0;
	for (; b + 64 <= nbytes; b += 64) {
		__m256i lo0 = z, hi0 = z, lo1 = z, hi1 = z;
		for (int t = 0; t < n; t++) {
			__m256i kv = _mm256_set1_epi16((short)k[t]);
			FV_CHUNK(lo0, hi0, rows[t] + b, kv);
			FV_CHUNK(lo1, hi1, rows[t] + b + 32, kv);
		}
		_mm256_storeu_si256((__m256i *)(out + b), fv_round(lo0, hi0));
		_mm256_storeu_si256((__m256i *)(out + b + 32), fv_round(lo1, hi1));
	}
	/* the rest in chunks of 32, the last ending at nbytes (overlapping the
	 * one before: the same bytes again) */
	for (; b < nbytes; b += 32) {
		b = b < nbytes - 32 ? b : nbytes - 32;
		__m256i lo = z, hi = z;
		for (int t = 0; t < n; t++) {
			FV_CHUNK(lo, hi, rows[t] + b, _mm256_set1_epi16((short)k[t]));
		}
		_mm256_storeu_si256((__m256i *)(out + b), fv_round(lo, hi));
	}
}
#undef FV_CHUNK

AVX2 static void fsplit_avx2(uint8_t *const pl[3], const uint8_t *src, int w, int bpp) {
	if (w < 16) {
		fsplit_scalar(pl, src, 0, w, bpp);
		return;
	}
	/* 16 pixels at a time, the last 16 overlapping the ones before */
	if (bpp == 3) {
		/* m[c][l]: where plane c's 16 bytes come from in load l (6, 5 and 5 bytes for R; 5, 6, 5 for G; 5, 5, 6 for B) */
		const __m128i m[3][3] = {
		    {_mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1), _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1),
		     _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13)},
		    {_mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1), _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1),
		     _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14)},
		    {_mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1), _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1),
		     _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15)},
		};
		for (int x = 0;; x += 16) {
			x = x < w - 16 ? x : w - 16;
			const uint8_t *s = src + 3 * x;
			__m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16)),
				c = _mm_loadu_si128((const __m128i *)(s + 32));
			for (int ch = 0; ch < 3; ch++) {
				__m128i v = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, m[ch][0]), _mm_shuffle_epi8(b, m[ch][1])), _mm_shuffle_epi8(c, m[ch][2]));
				_mm_storeu_si128((__m128i *)(pl[ch] + x), v);
			}
			if (x == w - 16) {
				return;
			}
		}
	}
	/* RGBX: each channel's 4 bytes to one dword of each lane, then the lanes' dwords joined */
	const __m256i m = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	const __m256i lanes = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	for (int x = 0;; x += 16) {
		x = x < w - 16 ? x : w - 16;
		/* [R0-3 G0-3 B0-3 X0-3 | R4-7 ...] -> [R0-7 G0-7 B0-7 X0-7], twice */
		__m256i u = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(src + 4 * x)), m), lanes);
		__m256i v = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(src + 4 * x + 32)), m), lanes);
		/* [R0-7 R8-15 | B0-7 B8-15] and [G0-7 G8-15 | X0-7 X8-15] */
		__m256i rb = _mm256_unpacklo_epi64(u, v), gx = _mm256_unpackhi_epi64(u, v);
		_mm_storeu_si128((__m128i *)(pl[0] + x), _mm256_castsi256_si128(rb));
		_mm_storeu_si128((__m128i *)(pl[1] + x), _mm256_castsi256_si128(gx));
		_mm_storeu_si128((__m128i *)(pl[2] + x), _mm256_extracti128_si256(rb, 1));
		if (x == w - 16) {
			return;
		}
	}
}

/* The horizontal tables: per block of 8 outputs, the two groups' window
 * starts (2 int32, then 24 bytes of padding) and per pair of taps a
 * 32-byte shuffle and 32 bytes of int16 coefficients. Where all eight
 * outputs' taps fit one 16-byte window, both groups read it (the second
 * start is then -2, and a load fills both lanes); a block with a first
 * start of -1 is done by fh_scalar. */

static void fh_tables(uint8_t *blk, const tb_plan *p, int np) {
	size_t bsz = fh_block_bytes(np);
	for (int k = 0; k < p->ow / 8; k++, blk += bsz) {
		memset(blk, 0, bsz);
		int32_t *base = (int32_t *)(void *)blk;
		/* the first tap and the end of the taps of each group, and of both */
		int first[3] = {INT32_MAX, INT32_MAX, INT32_MAX}, end[3] = {0, 0, 0};
		for (int q = 0; q < 8; q++) {
			int j = 8 * k + q, s = p->flip ? p->ow - 1 - j : j, lo = p->hb[2 * s], hi = lo + p->hb[2 * s + 1];
			if (hi > lo) {
				int g[2] = {q / 4, 2};
				for (int i = 0; i < 2; i++) {
					first[g[i]] = lo < first[g[i]] ? lo : first[g[i]];
					end[g[i]] = hi > end[g[i]] ? hi : end[g[i]];
				}
			}
		}
		int shared = first[2] == INT32_MAX || end[2] - first[2] <= 16;
		for (int h = 0; h < 2; h++) {
			int fits = 1, at = shared ? first[2] : first[h];
			at = at == INT32_MAX ? 0 : at; /* every output is padding: all coefficients 0 */
			base[h] = shared && h == 1 ? -2 : at;
			for (int q = 0; q < 4; q++) {
				int j = 8 * k + 4 * h + q, s = p->flip ? p->ow - 1 - j : j;
				int n = p->hb[2 * s + 1], off = p->hb[2 * s] - at;
				for (int t = 0; t < 2 * np; t++) {
					uint8_t *m = blk + 32 + 64 * (size_t)(t / 2) + 16 * h + 4 * q + 2 * (t % 2);
					int16_t *c = (int16_t *)(void *)(blk + 64 + 64 * (size_t)(t / 2) + 16 * h) + 2 * q + t % 2;
					m[0] = m[1] = 0x80;
					if (t >= n) {
						continue;
					}
					if (off + t > 15) {
						fits = 0;
						break;
					}
					m[0] = (uint8_t)(off + t);
					*c = fast_hk(p->hk[(size_t)s * p->hks + t]);
				}
			}
			if (!fits) {
				base[0] = base[1] = -1;
				break;
			}
		}
	}
}

AVX2 static inline __m256i ld2(const uint8_t *pl, const int32_t *base) {
	return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(pl + base[0]))),
				       _mm_loadu_si128((const __m128i *)(pl + base[1])), 1);
}

AVX2 static void fh_avx2(float *const o[3], const uint8_t *const pl[3], const tb_plan *p, const uint8_t *blk, int np) {
	const __m256 a0 = _mm256_set1_ps(p->scale[0]), a1 = _mm256_set1_ps(p->scale[1]), a2 = _mm256_set1_ps(p->scale[2]);
	const __m256 b0 = _mm256_set1_ps(p->bias[0]), b1 = _mm256_set1_ps(p->bias[1]), b2 = _mm256_set1_ps(p->bias[2]);
	size_t bsz = fh_block_bytes(np);
	int nb = p->ow / 8;
	float *o0 = o[0], *o1 = o[1], *o2 = o[2]; /* in registers: the stores cannot move them */
	const uint8_t *p0 = pl[0], *p1 = pl[1], *p2 = pl[2];
	for (int k = 0; k < nb; k++, blk += bsz) {
		const int32_t *base = (const int32_t *)(const void *)blk;
		if (base[0] < 0) {
			fh_scalar(o, pl, p, 8 * k, 8 * k + 8);
			continue;
		}
		__m256i v0, v1, v2;
		if (base[1] == -2) {
			v0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p0 + base[0])));
			v1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p1 + base[0])));
			v2 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p2 + base[0])));
		} else {
			v0 = ld2(p0, base), v1 = ld2(p1, base), v2 = ld2(p2, base);
		}
		const __m256i *e = (const __m256i *)(const void *)(blk + 32);
		__m256i m = _mm256_load_si256(e), c = _mm256_load_si256(e + 1);
		__m256i s0 = _mm256_madd_epi16(_mm256_shuffle_epi8(v0, m), c), s1 = _mm256_madd_epi16(_mm256_shuffle_epi8(v1, m), c),
			s2 = _mm256_madd_epi16(_mm256_shuffle_epi8(v2, m), c);
		for (int t = 1; t < np; t++) {
			e += 2;
			m = _mm256_load_si256(e), c = _mm256_load_si256(e + 1);
			s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_shuffle_epi8(v0, m), c));
			s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_shuffle_epi8(v1, m), c));
			s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(_mm256_shuffle_epi8(v2, m), c));
		}
		_mm256_storeu_ps(o0 + 8 * k, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s0), a0), b0));
		_mm256_storeu_ps(o1 + 8 * k, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s1), a1), b1));
		_mm256_storeu_ps(o2 + 8 * k, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s2), a2), b2));
	}
	fh_scalar(o, pl, p, 8 * nb, p->ow);
}

/* fu8_avx2 writes n floats as bytes, as fast_u8 does. */
AVX2 static void fu8_avx2(uint8_t *dst, const float *x, int n) {
	const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(255);
	int j = 0;
	for (; j + 16 <= n; j += 16) {
		__m256i a = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_loadu_ps(x + j), lo), hi));
		__m256i b = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_loadu_ps(x + j + 8), lo), hi));
		__m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8); /* 16 words in order */
		__m128i v = _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
		_mm_storeu_si128((__m128i *)(dst + j), v);
	}
	for (; j < n; j++) {
		dst[j] = fast_u8(x[j]);
	}
}

/* fmerge_avx2 interleaves three planes of w bytes into RGB pixels: fsplit_avx2 undone. */
AVX2 static void fmerge_avx2(uint8_t *dst, const uint8_t *const pl[3], int w) {
	/* m[o][c]: where output bytes 16o..16o+15 take plane c's bytes (byte k is plane k%3's byte k/3) */
	const __m128i m[3][3] = {
	    {_mm_setr_epi8(0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1, -1, 5), _mm_setr_epi8(-1, 0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1, -1),
	     _mm_setr_epi8(-1, -1, 0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1)},
	    {_mm_setr_epi8(-1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1, 10, -1), _mm_setr_epi8(5, -1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1, 10),
	     _mm_setr_epi8(-1, 5, -1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1)},
	    {_mm_setr_epi8(-1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15, -1, -1), _mm_setr_epi8(-1, -1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15, -1),
	     _mm_setr_epi8(10, -1, -1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15)},
	};
	int x = 0;
	for (; x + 16 <= w; x += 16) {
		__m128i r = _mm_loadu_si128((const __m128i *)(pl[0] + x)), g = _mm_loadu_si128((const __m128i *)(pl[1] + x)),
			b = _mm_loadu_si128((const __m128i *)(pl[2] + x));
		for (int o = 0; o < 3; o++) {
			__m128i v = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(r, m[o][0]), _mm_shuffle_epi8(g, m[o][1])), _mm_shuffle_epi8(b, m[o][2]));
			_mm_storeu_si128((__m128i *)(dst + 3 * x + 16 * o), v);
		}
	}
	for (; x < w; x++) {
		dst[3 * x] = pl[0][x], dst[3 * x + 1] = pl[1][x], dst[3 * x + 2] = pl[2][x];
	}
}
#endif

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

static int fs_begin(tb_fs *f, tb_imgdec *d, const tb_plan *p, void *dst, int path, int bpp) {
	memset(f, 0, sizeof *f);
	f->d = d, f->p = p, f->dst = dst, f->path = path, f->bpp = bpp;
	f->w = p->x1 - p->x0, f->h = p->y1 - p->y0;
	if (f->w <= 0 || f->h <= 0 || !fast_plan_ok(p, f->w, f->h)) {
		return fail(d, TB_IMG_EARG, "plan: a read outside the %dx%d region", f->w, f->h);
	}
	int maxn = 0;
	for (int j = 0; j < p->ow; j++) {
		maxn = p->hb[2 * j + 1] > maxn ? p->hb[2 * j + 1] : maxn;
	}
	f->np = (maxn + 1) / 2;
	size_t plane = (size_t)f->w + 32, tabs = simd(path) ? fh_block_bytes(f->np) * (size_t)(p->ow / 8) : 0;
	size_t need = (size_t)f->w * 4 + 64 + 3 * plane + tabs + 64;
	if (grow((void **)&d->band, &d->band_cap, need) || grow((void **)&d->fline, &d->fline_cap, (size_t)p->ow * 3 * (sizeof(float) + 1) + 64) ||
	    grow((void **)&d->mid, &d->mid_cap, (size_t)p->oh * p->vks * sizeof(uint16_t) + (size_t)p->vks * sizeof(uint8_t *) + 64)) {
		return fail(d, TB_IMG_ENOMEM, "out of memory for a %dx%d resampling", p->ow, p->oh);
	}
	/* band: fv, the planes, the tables (32-byte aligned); mid: the vertical coefficients, then row pointers */
	uint8_t *b = d->band + (size_t)f->w * 4 + 64;
	for (int c = 0; c < 3; c++) {
		f->pl[c] = b + (size_t)c * plane;
	}
	f->tabs = (uint8_t *)(((uintptr_t)(b + 3 * plane) + 31) & ~(uintptr_t)31);
#ifdef TB_X86
	if (simd(path)) {
		fh_tables(f->tabs, p, f->np);
	}
#endif
	uint16_t *vk = (uint16_t *)(void *)d->mid;
	for (size_t i = 0; i < (size_t)p->oh * p->vks; i++) {
		vk[i] = fast_vk(p->vk[i]);
	}
	float *fl = d->fline;
	for (int c = 0; c < 3; c++) {
		f->o[c] = p->out == TB_OUT_F32_CHW ? (float *)dst + (size_t)c * p->oh * p->ow : fl + (size_t)c * p->ow;
	}
	return TB_IMG_OK;
}

/* fs_row writes output row i. */
static void fs_row(tb_fs *f, int i) {
	const tb_plan *p = f->p;
	tb_imgdec *d = f->d;
	int ymin = p->vb[2 * i], n = p->vb[2 * i + 1];
	const uint16_t *vk = (const uint16_t *)(const void *)d->mid + (size_t)i * p->vks;
	const uint8_t **rows = (const uint8_t **)(void *)(d->mid + (((size_t)p->oh * p->vks * sizeof(uint16_t) + 7) & ~(size_t)7));
	for (int t = 0, r = ymin % f->ring; t < n; t++, r = r + 1 < f->ring ? r + 1 : 0) {
		rows[t] = f->rows + (size_t)r * f->stride;
	}
	uint8_t *fv = d->band;
	int nbytes = f->w * f->bpp;
	size_t ow = (size_t)p->ow, plane = (size_t)p->oh * ow;
	float *o[3];
	for (int c = 0; c < 3; c++) {
		o[c] = f->o[c] + (p->out == TB_OUT_F32_CHW ? (size_t)i * ow : 0);
	}
#ifdef TB_X86
	if (simd(f->path)) {
		fv_avx2(fv, rows, nbytes, n, vk);
		fsplit_avx2(f->pl, fv, f->w, f->bpp);
		fh_avx2(o, (const uint8_t *const *)f->pl, p, f->tabs, f->np);
	} else
#endif
	{
		fv_scalar(fv, rows, 0, nbytes, n, vk);
		fsplit_scalar(f->pl, fv, 0, f->w, f->bpp);
		fh_scalar(o, (const uint8_t *const *)f->pl, p, 0, p->ow);
	}
	switch (p->out) {
	case TB_OUT_F16_CHW:
	case TB_OUT_BF16_CHW:
		for (int c = 0; c < 3; c++) {
			uint16_t *dst = (uint16_t *)f->dst + c * plane + (size_t)i * ow;
			if (p->out == TB_OUT_F16_CHW) {
				tb_f32_to_f16(f->path, dst, o[c], ow);
			} else {
				tb_f32_to_bf16(f->path, dst, o[c], ow);
			}
		}
		break;
	case TB_OUT_U8_CHW:
	case TB_OUT_U8_HWC:
#ifdef TB_X86
		if (simd(f->path)) {
			uint8_t *dst = (uint8_t *)f->dst, *row[3];
			for (int c = 0; c < 3; c++) {
				/* HWC: through three rows after fline's floats */
				row[c] = p->out == TB_OUT_U8_CHW ? dst + c * plane + (size_t)i * ow : (uint8_t *)(d->fline + 3 * ow) + c * ow;
				fu8_avx2(row[c], o[c], p->ow);
			}
			if (p->out == TB_OUT_U8_HWC) {
				fmerge_avx2(dst + (size_t)i * ow * 3, (const uint8_t *const *)row, p->ow);
			}
			break;
		}
#endif
		for (int c = 0; c < 3; c++) {
			uint8_t *dst = (uint8_t *)f->dst;
			size_t at = p->out == TB_OUT_U8_CHW ? c * plane + (size_t)i * ow : (size_t)i * ow * 3 + (size_t)c;
			size_t step = p->out == TB_OUT_U8_CHW ? 1 : 3;
			for (size_t j = 0; j < ow; j++) {
				dst[at + j * step] = fast_u8(o[c][j]);
			}
		}
		break;
	}
}

/* fs_ready writes every output row whose source rows are among the first
 * have rows of the region. */
static void fs_ready(tb_fs *f, int have) {
	while (f->next < f->p->oh && f->p->vb[2 * f->next] + f->p->vb[2 * f->next + 1] <= have) {
		fs_row(f, f->next++);
	}
}

static int fs_resample(tb_imgdec *d, const tb_plan *p, const uint8_t *src, size_t stride, void *dst, int path) {
	tb_fs f;
	int st = fs_begin(&f, d, p, dst, path, 4);
	if (st != TB_IMG_OK) {
		return st;
	}
	f.rows = src, f.stride = stride, f.ring = f.h;
	fs_ready(&f, f.h);
	return TB_IMG_OK;
}

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
		fail(d, TB_IMG_EDECODE, "no scanline at row %u", y);
	}
	for (unsigned k = 0; cmyk && k < got; k++) {
		cmyk_to_rgbx(rowp[k] + xb * 4, rw);
	}
	return got;
}

/* jpeg_run decodes rows [y0, y1) x columns [x0, x1) and hands each row to
 * r (the exact resampling) or f (the fast one), or copies it to region. */
static int jpeg_run(tb_imgdec *d, const uint8_t *data, size_t n, const tb_jreq *q, int x0, int y0, int x1, int y1, tb_rs *r,
		    tb_fs *f, uint8_t *region, size_t rstride) {
	const tb_jpeg_lib *L = d->lib;
	tb_jpeg_decompress *ci = &d->cinfo;
	d->msg[0] = 0;
	d->status = TB_IMG_OK;
	if (L == NULL || L->lib == NULL) {
		return fail(d, TB_IMG_EARG, "libjpeg is not loaded");
	}
	if (q->scale_denom != 1 && q->scale_denom != 2 && q->scale_denom != 4 && q->scale_denom != 8) {
		return fail(d, TB_IMG_EARG, "DCT scaling 1/%d: want 1, 2, 4 or 8", q->scale_denom);
	}
	if (setjmp(d->jb)) {
		L->abort_decompress(ci);
		return d->status;
	}
	L->mem_src(ci, data, (unsigned long)n);
	if (L->read_header(ci, 1) != TB_JPEG_HEADER_OK) {
		L->abort_decompress(ci);
		return fail(d, TB_IMG_EDECODE, "no image in the JPEG stream");
	}
	if (ci->image_width != q->width || ci->image_height != q->height) {
		unsigned w = ci->image_width, h = ci->image_height;
		L->abort_decompress(ci);
		return fail(d, TB_IMG_EFORMAT, "libjpeg reads a %ux%u image where the header parsed as %ux%u", w, h, q->width, q->height);
	}
	if (q->max_pixels && (uint64_t)ci->image_width * ci->image_height > q->max_pixels) {
		L->abort_decompress(ci);
		return fail(d, TB_IMG_ETOOBIG, "%ux%u pixels, more than the limit of %llu", q->width, q->height,
			    (unsigned long long)q->max_pixels);
	}
	int cmyk = 0;
	switch (ci->num_components) {
	case 1:
	case 3:
		ci->out_color_space = f != NULL ? TB_JCS_RGB : TB_JCS_EXT_RGBX;
		break;
	case 4:
		ci->out_color_space = TB_JCS_CMYK;
		cmyk = 1;
		break;
	default: {
		int nc = ci->num_components;
		L->abort_decompress(ci);
		return fail(d, TB_IMG_EFORMAT, "a JPEG of %d components", nc);
	}
	}
	ci->scale_num = 1;
	ci->scale_denom = (unsigned)q->scale_denom;
	ci->dct_method = q->fast_dct ? TB_JDCT_IFAST : TB_JDCT_ISLOW;
	/* always libjpeg's smooth (fancy) upsampling: its merged upsampler
	 * returns stale rows after jpeg_skip_scanlines (libjpeg-turbo 2.1.5) */
	ci->do_fancy_upsampling = 1;
	L->start_decompress(ci);
	unsigned ow = ci->output_width, oh = ci->output_height;
	if (x0 < 0 || y0 < 0 || x0 >= x1 || y0 >= y1 || (unsigned)x1 > ow || (unsigned)y1 > oh) {
		L->abort_decompress(ci);
		return fail(d, TB_IMG_EARG, "region [%d,%d)x[%d,%d) outside the %ux%u decoded image", x0, x1, y0, y1, ow, oh);
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
	int bpp = f != NULL && !cmyk ? 3 : 4;
	size_t stride = (size_t)cw * bpp + 64;
	int rec = ci->rec_outbuf_height < 1 ? 1 : ci->rec_outbuf_height > 16 ? 16 : ci->rec_outbuf_height;
	/* the fast resampling keeps its source rows in a ring: what the next
	 * output row still needs (fewer than its taps) plus FAST_BATCH rows
	 * decoded before they are resampled (libjpeg and the resampler each
	 * run longer, keeping their code and tables in cache), plus one read */
	int nrows = f != NULL ? f->p->vks + FAST_BATCH + 16 : rec;
	if (grow((void **)&d->rows, &d->rows_cap, stride * (size_t)nrows)) {
		L->abort_decompress(ci);
		return fail(d, TB_IMG_ENOMEM, "out of memory for %d rows of %u pixels", rec, cw);
	}
	unsigned char *rowp[16];
	for (int i = 0; i < rec; i++) {
		rowp[i] = d->rows + (size_t)i * stride;
	}
	if (y0 > 0 && L->skip_scanlines(ci, (unsigned)y0) != (unsigned)y0) {
		L->abort_decompress(ci);
		return fail(d, TB_IMG_EDECODE, "could not skip %d rows", y0);
	}
	size_t xb = (size_t)x0 - xoff, rw = (size_t)(x1 - x0);
	if (f != NULL) {
		f->bpp = bpp, f->rows = d->rows + xb * (size_t)bpp, f->stride = stride, f->ring = nrows;
		while (ci->output_scanline < (unsigned)y1) {
			unsigned y = ci->output_scanline, want = (unsigned)y1 - y;
			want = want < (unsigned)rec ? want : (unsigned)rec;
			for (unsigned k = 0; k < want; k++) {
				rowp[k] = d->rows + (size_t)((y + k - (unsigned)y0) % (unsigned)nrows) * stride;
			}
			unsigned got = read_rows(d, rowp, want, cmyk, xb, rw);
			if (got == 0) {
				return d->status;
			}
			int have = (int)(y + got - (unsigned)y0);
			if (have - f->read >= FAST_BATCH || y + got >= (unsigned)y1) {
				fs_ready(f, have);
				f->read = have;
			}
		}
		L->abort_decompress(ci);
		return TB_IMG_OK;
	}
	if (r != NULL && simd(r->path)) {
		/* libjpeg writes straight into the band's rows */
		if (rs_bands(r, stride, xb * 4) != TB_IMG_OK) {
			L->abort_decompress(ci);
			return d->status;
		}
		while (ci->output_scanline < (unsigned)y1) {
			unsigned y = ci->output_scanline, want = (unsigned)y1 - y;
			want = want < (unsigned)rec ? want : (unsigned)rec;
			want = want < (unsigned)(8 - r->nband) ? want : (unsigned)(8 - r->nband);
			for (unsigned k = 0; k < want; k++) {
				rowp[k] = d->band + (size_t)(r->nband + (int)k) * stride;
			}
			unsigned got = read_rows(d, rowp, want, cmyk, xb, rw);
			if (got == 0) {
				return d->status;
			}
			r->nband += (int)got;
			if (r->nband == 8) {
				rs_band(r);
			}
		}
		L->abort_decompress(ci);
		return TB_IMG_OK;
	}
	while (ci->output_scanline < (unsigned)y1) {
		unsigned y = ci->output_scanline, want = (unsigned)y1 - y;
		if (want > (unsigned)rec) {
			want = (unsigned)rec;
		}
		unsigned got = read_rows(d, rowp, want, cmyk, xb, rw);
		if (got == 0) {
			return d->status;
		}
		for (unsigned k = 0; k < got; k++) {
			uint8_t *row = rowp[k] + xb * 4;
			if (r != NULL) {
				rs_push(r, row);
			} else {
				memcpy(region + (size_t)(y + k - (unsigned)y0) * rstride, row, rw * 4);
			}
		}
	}
	L->abort_decompress(ci);
	return TB_IMG_OK;
}

int tb_jpeg_resample(tb_imgdec *d, const uint8_t *data, size_t n, const tb_jreq *q, const tb_plan *p, void *dst, int path) {
	d->msg[0] = 0;
	if (p->fast) {
		tb_fs f;
		int st = fs_begin(&f, d, p, dst, path, 3);
		if (st == TB_IMG_OK) {
			st = jpeg_run(d, data, n, q, p->x0, p->y0, p->x1, p->y1, NULL, &f, NULL, 0);
		}
		return st;
	}
	tb_rs r;
	int st = rs_begin(&r, d, p, dst, path);
	if (st != TB_IMG_OK) {
		return st;
	}
	st = jpeg_run(d, data, n, q, p->x0, p->y0, p->x1, p->y1, &r, NULL, NULL, 0);
	if (st != TB_IMG_OK) {
		return st;
	}
	return rs_end(&r);
}

int tb_jpeg_region(tb_imgdec *d, const uint8_t *data, size_t n, const tb_jreq *q, int x0, int y0, int x1, int y1, uint8_t *dst,
		   size_t stride) {
	return jpeg_run(d, data, n, q, x0, y0, x1, y1, NULL, NULL, dst, stride);
}
