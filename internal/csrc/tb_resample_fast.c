//go:build cgo

#include "tb_simd.h"

#include "tb_image_internal.h"

#include <string.h>

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

/* rgb_split[c][l]: where plane c's 16 bytes come from in the l-th 16
 * bytes of 16 RGB pixels (6, 5 and 5 bytes for R; 5, 6, 5 for G; 5, 5, 6
 * for B); -1 gives 0, for the OR of the three shuffles. */
static const int8_t rgb_split[3][3][16] = {
    {{0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13}},
    {{1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14}},
    {{2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15}},
};

AVX2 static void fsplit_avx2(uint8_t *const pl[3], const uint8_t *src, int w, int bpp) {
	if (w < 16) {
		fsplit_scalar(pl, src, 0, w, bpp);
		return;
	}
	/* 16 pixels at a time, the last 16 overlapping the ones before */
	if (bpp == 3) {
		__m128i m[3][3];
		for (int c = 0; c < 3; c++) {
			for (int l = 0; l < 3; l++) {
				m[c][l] = _mm_loadu_si128((const __m128i *)(const void *)rgb_split[c][l]);
			}
		}
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

/* fvsplit_avx2 is fv_avx2 then fsplit_avx2 on an RGB row of w >= 32
 * pixels, in one pass: 32 pixels (96 bytes) at a time, the last 32
 * overlapping the ones before, split while in registers (the row in fv
 * is not written and read back). Same bytes as the two passes. */
AVX2 static void fvsplit_avx2(uint8_t *const pl[3], const uint8_t *const *rows, int w, int n, const uint16_t *k) {
	const __m256i z = _mm256_setzero_si256();
	/* rgb_split in both lanes: lane 0 splits pixels 0-15, lane 1 pixels 16-31 */
	__m256i m[3][3];
	for (int c = 0; c < 3; c++) {
		for (int l = 0; l < 3; l++) {
			m[c][l] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)rgb_split[c][l]));
		}
	}
	for (int x = 0;; x += 32) {
		x = x < w - 32 ? x : w - 32;
		size_t b = 3 * (size_t)x;
		__m256i lo0 = z, hi0 = z, lo1 = z, hi1 = z, lo2 = z, hi2 = z;
		for (int t = 0; t < n; t++) {
			__m256i kv = _mm256_set1_epi16((short)k[t]);
			FV_CHUNK(lo0, hi0, rows[t] + b, kv);
			FV_CHUNK(lo1, hi1, rows[t] + b + 32, kv);
			FV_CHUNK(lo2, hi2, rows[t] + b + 64, kv);
		}
		__m256i r0 = fv_round(lo0, hi0), r1 = fv_round(lo1, hi1), r2 = fv_round(lo2, hi2);
		/* bytes [0,16) [48,64), [16,32) [64,80), [32,48) [80,96): fsplit's three loads, per lane */
		__m256i a = _mm256_permute2x128_si256(r0, r1, 0x30), c = _mm256_permute2x128_si256(r0, r2, 0x21),
			e = _mm256_permute2x128_si256(r1, r2, 0x30);
		for (int ch = 0; ch < 3; ch++) {
			__m256i v = _mm256_or_si256(_mm256_or_si256(_mm256_shuffle_epi8(a, m[ch][0]), _mm256_shuffle_epi8(c, m[ch][1])), _mm256_shuffle_epi8(e, m[ch][2]));
			_mm256_storeu_si256((__m256i *)(pl[ch] + x), v);
		}
		if (x == w - 32) {
			return;
		}
	}
}
#undef FV_CHUNK

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
	if (8 * nb < p->ow) { /* a call a row otherwise: 0.3% of the eval profile */
		fh_scalar(o, pl, p, 8 * nb, p->ow);
	}
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


int tb_fs_begin(tb_fs *f, tb_imgdec *d, const tb_plan *p, void *dst, int path, int bpp) {
	memset(f, 0, sizeof *f);
	f->d = d, f->p = p, f->dst = dst, f->path = path, f->bpp = bpp;
	f->w = p->x1 - p->x0, f->h = p->y1 - p->y0;
	if (f->w <= 0 || f->h <= 0 || !fast_plan_ok(p, f->w, f->h)) {
		return tb_img_fail(d, TB_IMG_EARG, "plan: a read outside the %dx%d region", f->w, f->h);
	}
	int maxn = 0;
	for (int j = 0; j < p->ow; j++) {
		maxn = p->hb[2 * j + 1] > maxn ? p->hb[2 * j + 1] : maxn;
	}
	f->np = (maxn + 1) / 2;
	size_t plane = (size_t)f->w + 32, tabs = tb_img_simd(path) ? fh_block_bytes(f->np) * (size_t)(p->ow / 8) : 0;
	size_t need = (size_t)f->w * 4 + 64 + 3 * plane + tabs + 64;
	if (tb_img_grow((void **)&d->band, &d->band_cap, need) || tb_img_grow((void **)&d->fline, &d->fline_cap, (size_t)p->ow * 3 * (sizeof(float) + 1) + 64) ||
	    tb_img_grow((void **)&d->mid, &d->mid_cap, (size_t)p->oh * p->vks * sizeof(uint16_t) + (size_t)p->vks * sizeof(uint8_t *) + 64)) {
		return tb_img_fail(d, TB_IMG_ENOMEM, "out of memory for a %dx%d resampling", p->ow, p->oh);
	}
	/* band: fv, the planes, the tables (32-byte aligned); mid: the vertical coefficients, then row pointers */
	uint8_t *b = d->band + (size_t)f->w * 4 + 64;
	for (int c = 0; c < 3; c++) {
		f->pl[c] = b + (size_t)c * plane;
	}
	f->tabs = (uint8_t *)(((uintptr_t)(b + 3 * plane) + 31) & ~(uintptr_t)31);
#ifdef TB_X86
	if (tb_img_simd(path)) {
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
	if (tb_img_simd(f->path)) {
		if (f->bpp == 3 && f->w >= 32) {
			fvsplit_avx2(f->pl, rows, f->w, n, vk);
		} else {
			fv_avx2(fv, rows, nbytes, n, vk);
			fsplit_avx2(f->pl, fv, f->w, f->bpp);
		}
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
		if (tb_img_simd(f->path)) {
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

/* tb_fs_ready writes every output row whose source rows are among the first
 * have rows of the region. */
void tb_fs_ready(tb_fs *f, int have) {
	while (f->next < f->p->oh && f->p->vb[2 * f->next] + f->p->vb[2 * f->next + 1] <= have) {
		fs_row(f, f->next++);
	}
}

int tb_fs_resample(tb_imgdec *d, const tb_plan *p, const uint8_t *src, size_t stride, void *dst, int path) {
	tb_fs f;
	int st = tb_fs_begin(&f, d, p, dst, path, 4);
	if (st != TB_IMG_OK) {
		return st;
	}
	f.rows = src, f.stride = stride, f.ring = f.h;
	tb_fs_ready(&f, f.h);
	return TB_IMG_OK;
}

/* The JPEG sink: rows decoded into a ring of d->rows that holds what the
 * next output row still needs (fewer than its taps) plus FAST_BATCH rows
 * decoded before they are resampled (libjpeg and the resampler each run
 * longer, keeping their code and tables in cache), plus one read. */

static int fs_sink_begin(void *ctx, size_t stride, size_t xb, int bpp, int nrows) {
	tb_fs *f = ctx;
	f->bpp = bpp, f->rows = f->d->rows + xb * (size_t)bpp, f->stride = stride, f->ring = nrows;
	return TB_IMG_OK;
}

static unsigned fs_sink_place(void *ctx, unsigned char **rowp, unsigned y, unsigned want) {
	tb_fs *f = ctx;
	for (unsigned k = 0; k < want; k++) {
		rowp[k] = f->d->rows + (size_t)((y + k) % (unsigned)f->ring) * f->stride;
	}
	return want;
}

static void fs_sink_take(void *ctx, unsigned char *const *rowp, unsigned y, unsigned got) {
	tb_fs *f = ctx;
	(void)rowp;
	int have = (int)(y + got);
	if (have - f->read >= FAST_BATCH || have >= f->h) {
		tb_fs_ready(f, have);
		f->read = have;
	}
}

tb_row_sink tb_fs_sink(tb_fs *f) {
	return (tb_row_sink){
	    .ctx = f, .rgb = 1, .ring = f->p->vks + FAST_BATCH + 16, .begin = fs_sink_begin, .place = fs_sink_place, .take = fs_sink_take};
}
