//go:build cgo

#include "tb_simd.h"

#include "tb_image_internal.h"

#include <string.h>

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


static void hpass(uint8_t *out, const uint8_t *src, const tb_plan *p) { hpass_scalar(out, src, 0, p); }

static void vpass(int path, uint8_t *line, const uint8_t *mid, size_t ms, int nbytes, int ymin, int n, const int32_t *k) {
#ifdef TB_X86
	if (tb_img_simd(path)) {
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



int tb_rs_begin(tb_rs *r, tb_imgdec *d, const tb_plan *p, void *dst, int path) {
	memset(r, 0, sizeof *r);
	r->d = d, r->p = p, r->dst = dst, r->path = path;
	r->w = p->x1 - p->x0;
	/* scalar: mid rows of RGBX pixels; SIMD: planar rows (see rs_band) */
	r->ms = (size_t)p->ow * (tb_img_simd(path) ? 3 : 4);
	size_t rows = (size_t)(p->y1 - p->y0);
	if (tb_img_grow((void **)&d->mid, &d->mid_cap, rows * r->ms + 64) || tb_img_grow((void **)&d->line, &d->line_cap, r->ms + 64) ||
	    tb_img_grow((void **)&d->fline, &d->fline_cap, (size_t)p->ow * sizeof(float) + 64)) {
		return tb_img_fail(d, TB_IMG_ENOMEM, "out of memory for a %dx%d resampling", p->ow, p->oh);
	}
	if (tb_img_simd(path)) {
		return tb_rs_bands(r, (size_t)r->w * 4 + 32, 0);
	}
	return TB_IMG_OK;
}

/* tb_rs_bands lays out the band: 8 rows of bs bytes, the region's first
 * column at boff, then the transposed band and its output columns. */
int tb_rs_bands(tb_rs *r, size_t bs, size_t boff) {
	tb_imgdec *d = r->d;
	/* bt and mt: 32 bytes a column (the last 8 unused), 32-byte aligned */
	size_t nb = (8 * bs + 31) & ~(size_t)31, nt = (size_t)r->w * 32, nm = (size_t)r->p->ow * 32;
	if (tb_img_grow((void **)&d->band, &d->band_cap, nb + nt + nm + 32)) {
		return tb_img_fail(d, TB_IMG_ENOMEM, "out of memory for a %dx%d resampling", r->p->ow, r->p->oh);
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
		if (tb_img_simd(r->path)) {
			write_planar(r->d, p, r->path, r->d->line, i, r->dst);
			r->next++;
			continue;
		}
#endif
		write_row(r->d, p, r->path, r->d->line, i, r->dst);
		r->next++;
	}
}

/* tb_rs_band resizes the rows waiting in the band. */
void tb_rs_band(tb_rs *r) {
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

/* tb_rs_push takes the next row of the region (row points at its column x0). */
void tb_rs_push(tb_rs *r, const uint8_t *row) {
	if (tb_img_simd(r->path)) {
		memcpy(r->d->band + (size_t)r->nband * r->bs, row, (size_t)r->w * 4);
		if (++r->nband == 8) {
			tb_rs_band(r);
		}
		return;
	}
	hpass(r->d->mid + (size_t)r->pushed * r->ms, row, r->p);
	r->pushed++;
	rs_emit(r);
}

int tb_rs_end(tb_rs *r) {
	tb_rs_band(r);
	rs_emit(r);
	if (r->next != r->p->oh) {
		return tb_img_fail(r->d, TB_IMG_EARG, "plan: output row %d reads past the region's %d rows", r->next, r->pushed);
	}
	return TB_IMG_OK;
}

/* The JPEG sinks of the exact resampling. SIMD paths: libjpeg writes
 * straight into the band's rows, at most up to the band's 8. Scalar: the
 * rows of one read in d->rows, pushed one by one. */

static int rs_band_begin(void *ctx, size_t stride, size_t xb, int bpp, int nrows) {
	(void)bpp, (void)nrows;
	return tb_rs_bands(ctx, stride, xb * 4);
}

static unsigned rs_band_place(void *ctx, unsigned char **rowp, unsigned y, unsigned want) {
	tb_rs *r = ctx;
	(void)y;
	want = want < (unsigned)(8 - r->nband) ? want : (unsigned)(8 - r->nband);
	for (unsigned k = 0; k < want; k++) {
		rowp[k] = r->d->band + (size_t)(r->nband + (int)k) * r->bs;
	}
	return want;
}

static void rs_band_take(void *ctx, unsigned char *const *rowp, unsigned y, unsigned got) {
	tb_rs *r = ctx;
	(void)rowp, (void)y;
	r->nband += (int)got;
	if (r->nband == 8) {
		tb_rs_band(r);
	}
}

static int rs_rows_begin(void *ctx, size_t stride, size_t xb, int bpp, int nrows) {
	tb_rs *r = ctx;
	(void)nrows;
	r->rstride = stride, r->roff = xb * (size_t)bpp;
	return TB_IMG_OK;
}

static unsigned rs_rows_place(void *ctx, unsigned char **rowp, unsigned y, unsigned want) {
	tb_rs *r = ctx;
	(void)y;
	for (unsigned k = 0; k < want; k++) {
		rowp[k] = r->d->rows + (size_t)k * r->rstride;
	}
	return want;
}

static void rs_rows_take(void *ctx, unsigned char *const *rowp, unsigned y, unsigned got) {
	tb_rs *r = ctx;
	(void)y;
	for (unsigned k = 0; k < got; k++) {
		tb_rs_push(r, rowp[k] + r->roff);
	}
}

tb_row_sink tb_rs_sink(tb_rs *r) {
	if (tb_img_simd(r->path)) {
		return (tb_row_sink){.ctx = r, .begin = rs_band_begin, .place = rs_band_place, .take = rs_band_take};
	}
	return (tb_row_sink){.ctx = r, .begin = rs_rows_begin, .place = rs_rows_place, .take = rs_rows_take};
}

int tb_resample(tb_imgdec *d, const tb_plan *p, const uint8_t *src, size_t stride, void *dst, int path) {
	tb_rs r;
	d->msg[0] = 0;
	if (p->fast) {
		return tb_fs_resample(d, p, src, stride, dst, path);
	}
	int st = tb_rs_begin(&r, d, p, dst, path);
	if (st != TB_IMG_OK) {
		return st;
	}
	for (int y = p->y0; y < p->y1; y++) {
		tb_rs_push(&r, src + (size_t)(y - p->y0) * stride);
	}
	return tb_rs_end(&r);
}
