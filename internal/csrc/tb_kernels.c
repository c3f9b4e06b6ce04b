#include "tb_simd.h"

#include "tb_kernels.h"

#include <math.h>
#include <string.h>

static inline uint32_t f32bits(float f) {
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static inline float bitsf32(uint32_t u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* ---- gather ---- */

static void copy_plain(uint8_t *dst, const uint8_t *src, size_t n) { memcpy(dst, src, n); }

#ifdef TB_X86
AVX2 static void copy_nt_avx2(uint8_t *dst, const uint8_t *src, size_t n) {
	size_t head = (32 - ((uintptr_t)dst & 31)) & 31;
	if (head > n) {
		head = n;
	}
	memcpy(dst, src, head);
	size_t i = head;
	for (; i + 32 <= n; i += 32) {
		_mm256_stream_si256((__m256i *)(dst + i), _mm256_loadu_si256((const __m256i *)(src + i)));
	}
	memcpy(dst + i, src + i, n - i);
}

AVX512 static void copy_nt_avx512(uint8_t *dst, const uint8_t *src, size_t n) {
	size_t head = (64 - ((uintptr_t)dst & 63)) & 63;
	if (head > n) {
		head = n;
	}
	memcpy(dst, src, head);
	size_t i = head;
	for (; i + 64 <= n; i += 64) {
		_mm512_stream_si512((void *)(dst + i), _mm512_loadu_si512((const void *)(src + i)));
	}
	memcpy(dst + i, src + i, n - i);
}

#endif

size_t tb_gather(int path, uint8_t *dst, const uint8_t *src, size_t rows, const int64_t *idx, size_t n, size_t row, int nt) {
	void (*copy)(uint8_t *, const uint8_t *, size_t) = copy_plain;
#ifdef TB_X86
	if (nt && path == TB_PATH_AVX2) {
		copy = copy_nt_avx2;
	} else if (nt && path == TB_PATH_AVX512) {
		copy = copy_nt_avx512;
	}
#else
	(void)path;
	(void)nt;
#endif
	size_t i = 0;
	for (; i < n; i++) {
		if (idx[i] < 0 || (uint64_t)idx[i] >= rows) {
			break;
		}
		copy(dst + i * row, src + (size_t)idx[i] * row, row);
	}
#ifdef TB_X86
	if (copy != copy_plain) {
		_mm_sfence();
	}
#endif
	return i;
}

/* ---- uint8 HWC to float32 CHW ---- */

static void u8_scalar(float *dst, const uint8_t *src, size_t from, size_t hw, size_t c, const float *scale, const float *bias) {
	for (size_t ch = 0; ch < c; ch++) {
		for (size_t p = from; p < hw; p++) {
			float x = (float)src[p * c + ch] * scale[ch];
			dst[ch * hw + p] = x + bias[ch];
		}
	}
}

#ifdef TB_X86
/* gathers 32-bit words at src+p*c+ch; stops where a word would pass the end. */
AVX2 static size_t u8_avx2(float *dst, const uint8_t *src, size_t hw, size_t c, const float *scale, const float *bias) {
	size_t total = hw * c, p = 0;
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	const __m256i vc = _mm256_set1_epi32((int)c), mask = _mm256_set1_epi32(0xff);
	if (total > (size_t)INT32_MAX) {
		return 0;
	}
	for (; (p + 7) * c + (c - 1) + 4 <= total; p += 8) {
		__m256i off = _mm256_mullo_epi32(_mm256_add_epi32(_mm256_set1_epi32((int)p), lane), vc);
		for (size_t ch = 0; ch < c; ch++) {
			__m256i w = _mm256_i32gather_epi32((const int *)(src + ch), off, 1);
			__m256 x = _mm256_cvtepi32_ps(_mm256_and_si256(w, mask));
			x = _mm256_mul_ps(x, _mm256_set1_ps(scale[ch]));
			_mm256_storeu_ps(dst + ch * hw + p, _mm256_add_ps(x, _mm256_set1_ps(bias[ch])));
		}
	}
	return p;
}

AVX512 static size_t u8_avx512(float *dst, const uint8_t *src, size_t hw, size_t c, const float *scale, const float *bias) {
	size_t total = hw * c, p = 0;
	const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	const __m512i vc = _mm512_set1_epi32((int)c), mask = _mm512_set1_epi32(0xff);
	if (total > (size_t)INT32_MAX) {
		return 0;
	}
	for (; (p + 15) * c + (c - 1) + 4 <= total; p += 16) {
		__m512i off = _mm512_mullo_epi32(_mm512_add_epi32(_mm512_set1_epi32((int)p), lane), vc);
		for (size_t ch = 0; ch < c; ch++) {
			__m512i w = _mm512_i32gather_epi32(off, (const int *)(src + ch), 1);
			__m512 x = _mm512_cvtepi32_ps(_mm512_and_si512(w, mask));
			x = _mm512_mul_ps(x, _mm512_set1_ps(scale[ch]));
			_mm512_storeu_ps(dst + ch * hw + p, _mm512_add_ps(x, _mm512_set1_ps(bias[ch])));
		}
	}
	return p;
}

/* Three channels (RGB), 8 pixels at a time: two overlapping 16-byte loads
 * cover the 24 bytes, and byte shuffles pull each channel's 8 values out. */
AVX2 static size_t u8_rgb_avx2(float *dst, const uint8_t *src, size_t hw, const float *scale, const float *bias) {
	__m128i mlo[3], mhi[3];
	for (int ch = 0; ch < 3; ch++) {
		char lo[16], hi[16];
		for (int k = 0; k < 16; k++) {
			int b = 3 * k + ch; /* the byte of pixel k, channel ch; k < 8 used */
			lo[k] = (char)(k < 8 && b < 16 ? b : -1);
			hi[k] = (char)(k < 8 && b >= 16 ? b - 8 : -1);
		}
		mlo[ch] = _mm_loadu_si128((const __m128i *)lo);
		mhi[ch] = _mm_loadu_si128((const __m128i *)hi);
	}
	size_t p = 0;
	for (; (p + 8) * 3 <= hw * 3; p += 8) {
		__m128i lo = _mm_loadu_si128((const __m128i *)(src + 3 * p));
		__m128i hi = _mm_loadu_si128((const __m128i *)(src + 3 * p + 8));
		for (int ch = 0; ch < 3; ch++) {
			__m128i v = _mm_or_si128(_mm_shuffle_epi8(lo, mlo[ch]), _mm_shuffle_epi8(hi, mhi[ch]));
			__m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
			x = _mm256_mul_ps(x, _mm256_set1_ps(scale[ch]));
			_mm256_storeu_ps(dst + ch * hw + p, _mm256_add_ps(x, _mm256_set1_ps(bias[ch])));
		}
	}
	return p;
}

#endif

void tb_u8hwc_to_f32chw(int path, float *dst, const uint8_t *src, size_t hw, size_t c, const float *scale, const float *bias) {
	size_t done = 0;
#ifdef TB_X86
	if (c == 3 && (path == TB_PATH_AVX2 || path == TB_PATH_AVX512)) {
		done = u8_rgb_avx2(dst, src, hw, scale, bias);
	} else if (path == TB_PATH_AVX2) {
		done = u8_avx2(dst, src, hw, c, scale, bias);
	} else if (path == TB_PATH_AVX512) {
		done = u8_avx512(dst, src, hw, c, scale, bias);
	}
#else
	(void)path;
#endif
	u8_scalar(dst, src, done, hw, c, scale, bias);
}

/* ---- half and bfloat16 ---- */

/* The reference conversions: IEEE round to nearest even; a NaN keeps its
 * sign and top payload bits and becomes quiet, as F16C does. */
static uint16_t f32_to_f16_1(float f) {
	uint32_t u = f32bits(f);
	uint32_t sign = (u >> 16) & 0x8000, exp = (u >> 23) & 0xff, man = u & 0x7fffff;
	if (exp == 0xff) {
		return (uint16_t)(man ? sign | 0x7e00 | (man >> 13) : sign | 0x7c00);
	}
	int e = (int)exp - 127 + 15;
	if (e >= 31) {
		return (uint16_t)(sign | 0x7c00);
	}
	if (e <= 0) { /* subnormal half, or zero */
		if (e < -10) {
			return (uint16_t)sign;
		}
		man |= 0x800000;
		uint32_t shift = (uint32_t)(14 - e);
		uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1))) {
			h++;
		}
		return (uint16_t)(sign | h);
	}
	uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) {
		h++; /* may carry into the exponent, up to infinity: correct */
	}
	return (uint16_t)(sign | h);
}

static float f16_to_f32_1(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	if (exp == 0x1f) {
		return bitsf32(sign | 0x7f800000 | (man ? 0x400000 | (man << 13) : 0));
	}
	if (exp == 0) {
		if (man == 0) {
			return bitsf32(sign);
		}
		int e = -1;
		do { /* normalize the subnormal */
			man <<= 1;
			e++;
		} while (!(man & 0x400));
		return bitsf32(sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13));
	}
	return bitsf32(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

static uint16_t f32_to_bf16_1(float f) {
	uint32_t u = f32bits(f);
	if ((u & 0x7fffffff) > 0x7f800000) {
		return (uint16_t)((u >> 16) | 0x40);
	}
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

#ifdef TB_X86
AVX2 static size_t f32_to_f16_avx2(uint16_t *dst, const float *src, size_t n) {
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		_mm_storeu_si128((__m128i *)(dst + i), h);
	}
	return i;
}

AVX512 static size_t f32_to_f16_avx512(uint16_t *dst, const float *src, size_t n) {
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		_mm256_storeu_si256((__m256i *)(dst + i), h);
	}
	return i;
}

#endif

void tb_f32_to_f16(int path, uint16_t *dst, const float *src, size_t n) {
#ifdef TB_X86
	size_t i = path == TB_PATH_AVX2 ? f32_to_f16_avx2(dst, src, n) : path == TB_PATH_AVX512 ? f32_to_f16_avx512(dst, src, n) : 0;
#else
	size_t i = 0;
	(void)path;
#endif
	for (; i < n; i++) {
		dst[i] = f32_to_f16_1(src[i]);
	}
}

#ifdef TB_X86
AVX2 static size_t f16_to_f32_avx2(float *dst, const uint16_t *src, size_t n) {
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		_mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
	}
	return i;
}

AVX512 static size_t f16_to_f32_avx512(float *dst, const uint16_t *src, size_t n) {
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		_mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
	}
	return i;
}

#endif

void tb_f16_to_f32(int path, float *dst, const uint16_t *src, size_t n) {
#ifdef TB_X86
	size_t i = path == TB_PATH_AVX2 ? f16_to_f32_avx2(dst, src, n) : path == TB_PATH_AVX512 ? f16_to_f32_avx512(dst, src, n) : 0;
#else
	size_t i = 0;
	(void)path;
#endif
	for (; i < n; i++) {
		dst[i] = f16_to_f32_1(src[i]);
	}
}

#ifdef TB_X86
AVX2 static size_t f32_to_bf16_avx2(uint16_t *dst, const float *src, size_t n) {
	const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
	const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m256i r[2];
		for (int k = 0; k < 2; k++) {
			__m256i u = _mm256_loadu_si256((const __m256i *)(src + i + 8 * k));
			__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
			__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
			__m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), 16);
			__m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet);
			r[k] = _mm256_blendv_epi8(rounded, qnan, nan);
		}
		/* pack the two halves of 8 words to 16 bits, in order */
		__m256i packed = _mm256_packus_epi32(r[0], r[1]);
		packed = _mm256_permute4x64_epi64(packed, 0xd8);
		_mm256_storeu_si256((__m256i *)(dst + i), packed);
	}
	return i;
}

AVX512 static size_t f32_to_bf16_avx512(uint16_t *dst, const float *src, size_t n) {
	const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
	const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512i u = _mm512_loadu_si512((const void *)(src + i));
		__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
		__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
		__m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
		__m512i qnan = _mm512_or_si512(_mm512_srli_epi32(u, 16), quiet);
		_mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, qnan)));
	}
	return i;
}

#endif

void tb_f32_to_bf16(int path, uint16_t *dst, const float *src, size_t n) {
#ifdef TB_X86
	size_t i = path == TB_PATH_AVX2 ? f32_to_bf16_avx2(dst, src, n) : path == TB_PATH_AVX512 ? f32_to_bf16_avx512(dst, src, n) : 0;
#else
	size_t i = 0;
	(void)path;
#endif
	for (; i < n; i++) {
		dst[i] = f32_to_bf16_1(src[i]);
	}
}

void tb_bf16_to_f32(int path, float *dst, const uint16_t *src, size_t n) {
	(void)path; /* a shift: the compiler vectorises the loop on every path */
	for (size_t i = 0; i < n; i++) {
		dst[i] = bitsf32((uint32_t)src[i] << 16);
	}
}

/* ---- pad-stack ---- */

size_t tb_pad_stack(uint8_t *buf, const int64_t *lens, size_t n, size_t maxlen, size_t longest, size_t row,
		    const uint8_t *pad, size_t elem) {
	for (size_t i = 0; i < n; i++) {
		if (lens[i] < 0 || (uint64_t)lens[i] > longest) {
			return i;
		}
		uint8_t *dst = buf + i * longest * row;
		size_t len = (size_t)lens[i];
		memmove(dst, buf + i * maxlen * row, len * row); /* dst <= src: ascending i is safe */
		for (size_t b = len * row; b < longest * row; b += elem) {
			memcpy(dst + b, pad, elem);
		}
	}
	return n;
}

/* ---- Philox4x32-10 and Box-Muller ----
 *
 * Block j of (key, stream) is Philox4x32-10 of counter (lo32 j, hi32 j,
 * lo32 stream, hi32 stream) under key (lo32 key, hi32 key): four words
 * x0..x3. Uniform: u = (x >> 8) * 2^-24, in [0, 1), in order x0..x3.
 * Normal: the pairs (x0, x1) and (x2, x3) each give two values by
 * Box-Muller, u1 = ((a >> 8) + 1) * 2^-24 in (0, 1], u2 = (b >> 8) * 2^-24,
 * r = sqrt(-2 log u1), out = r cos(2 pi u2), r sin(2 pi u2), with the
 * log and sincos polynomials below, evaluated in exactly this order. */

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static void philox_1(uint32_t c[4], uint32_t k0, uint32_t k1) {
	for (int r = 0; r < 10; r++) {
		uint64_t p0 = (uint64_t)PHILOX_M0 * c[0], p1 = (uint64_t)PHILOX_M1 * c[2];
		uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
		c[0] = n0;
		c[1] = (uint32_t)p1;
		c[2] = n2;
		c[3] = (uint32_t)p0;
		k0 += PHILOX_W0;
		k1 += PHILOX_W1;
	}
}

static const float LOG_P[9] = {7.0376836292e-2f, -1.1514610310e-1f, 1.1676998740e-1f, -1.2420140846e-1f, 1.4249322787e-1f,
			       -1.6668057665e-1f, 2.0000714765e-1f, -2.4999993993e-1f, 3.3333331174e-1f};
#define SQRT2F 1.41421356f
#define LN2_HI 0.693359375f
#define LN2_LO -2.12194440e-4f
#define TWO_PI 6.28318530717958647692f
static const float SIN_P[3] = {-1.9515295891e-4f, 8.3321608736e-3f, -1.6666654611e-1f};
static const float COS_P[3] = {2.443315711809948e-5f, -1.388731625493765e-3f, 4.166664568298827e-2f};

static float log_1(float u) {
	uint32_t b = f32bits(u);
	int e = (int)(b >> 23) - 127;
	float m = bitsf32((b & 0x7fffff) | 0x3f800000);
	if (m > SQRT2F) {
		m = m * 0.5f;
		e = e + 1;
	}
	float x = m - 1.0f, z = x * x, y = LOG_P[0], ef = (float)e;
	for (int i = 1; i < 9; i++) {
		y = y * x;
		y = y + LOG_P[i];
	}
	y = y * x;
	y = y * z;
	y = y + LN2_LO * ef;
	y = y - 0.5f * z;
	float r = x + y;
	return r + LN2_HI * ef;
}

/* sin and cos of 2 pi u for u in [0, 1). */
static void sincos2pi_1(float u, float *s, float *c) {
	int k = (int)(u * 4.0f + 0.5f);
	float f = u - (float)k * 0.25f, x = f * TWO_PI, z = x * x;
	float sp = SIN_P[0];
	sp = sp * z;
	sp = sp + SIN_P[1];
	sp = sp * z;
	sp = sp + SIN_P[2];
	sp = sp * z;
	sp = sp * x;
	float sv = sp + x;
	float cp = COS_P[0];
	cp = cp * z;
	cp = cp + COS_P[1];
	cp = cp * z;
	cp = cp + COS_P[2];
	cp = cp * z;
	cp = cp * z;
	cp = cp - 0.5f * z;
	float cv = cp + 1.0f;
	switch (k & 3) {
	case 0: *s = sv; *c = cv; break;
	case 1: *s = cv; *c = -sv; break;
	case 2: *s = -sv; *c = -cv; break;
	default: *s = -cv; *c = sv; break;
	}
}

static void boxmuller_1(uint32_t a, uint32_t b, float *z0, float *z1) {
	float u1 = (float)((a >> 8) + 1) * 0x1p-24f, u2 = (float)(b >> 8) * 0x1p-24f;
	float r = sqrtf(-2.0f * log_1(u1)), s, c;
	sincos2pi_1(u2, &s, &c);
	*z0 = r * c;
	*z1 = r * s;
}

static void block_1(float out[4], uint64_t j, uint64_t key, uint64_t stream, int normal) {
	uint32_t c[4] = {(uint32_t)j, (uint32_t)(j >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
	philox_1(c, (uint32_t)key, (uint32_t)(key >> 32));
	if (normal) {
		boxmuller_1(c[0], c[1], &out[0], &out[1]);
		boxmuller_1(c[2], c[3], &out[2], &out[3]);
	} else {
		for (int i = 0; i < 4; i++) {
			out[i] = (float)(c[i] >> 8) * 0x1p-24f;
		}
	}
}

#ifdef TB_X86
/* AVX2: 8 blocks at a time, one block a lane. */
AVX2 static inline __m256i mulhi_avx2(__m256i a, __m256i m) {
	__m256i even = _mm256_srli_epi64(_mm256_mul_epu32(a, m), 32);
	__m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
	return _mm256_blend_epi32(even, odd, 0xaa);
}

AVX2 static __m256 log_avx2(__m256 u) {
	__m256i b = _mm256_castps_si256(u);
	__m256i e = _mm256_sub_epi32(_mm256_srli_epi32(b, 23), _mm256_set1_epi32(127));
	__m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffff)), _mm256_set1_epi32(0x3f800000)));
	__m256 big = _mm256_cmp_ps(m, _mm256_set1_ps(SQRT2F), _CMP_GT_OQ);
	m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5f)), big);
	e = _mm256_sub_epi32(e, _mm256_castps_si256(big)); /* big is all ones: -(-1) */
	__m256 x = _mm256_sub_ps(m, _mm256_set1_ps(1.0f)), z = _mm256_mul_ps(x, x), ef = _mm256_cvtepi32_ps(e);
	__m256 y = _mm256_set1_ps(LOG_P[0]);
	for (int i = 1; i < 9; i++) {
		y = _mm256_add_ps(_mm256_mul_ps(y, x), _mm256_set1_ps(LOG_P[i]));
	}
	y = _mm256_mul_ps(_mm256_mul_ps(y, x), z);
	y = _mm256_add_ps(y, _mm256_mul_ps(_mm256_set1_ps(LN2_LO), ef));
	y = _mm256_sub_ps(y, _mm256_mul_ps(_mm256_set1_ps(0.5f), z));
	return _mm256_add_ps(_mm256_add_ps(x, y), _mm256_mul_ps(_mm256_set1_ps(LN2_HI), ef));
}

AVX2 static void boxmuller_avx2(__m256i a, __m256i b, __m256 *z0, __m256 *z1) {
	const __m256 scale = _mm256_set1_ps(0x1p-24f);
	__m256 u1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_srli_epi32(a, 8), _mm256_set1_epi32(1))), scale);
	__m256 u2 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b, 8)), scale);
	__m256 r = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), log_avx2(u1)));
	__m256i k = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(u2, _mm256_set1_ps(4.0f)), _mm256_set1_ps(0.5f)));
	__m256 f = _mm256_sub_ps(u2, _mm256_mul_ps(_mm256_cvtepi32_ps(k), _mm256_set1_ps(0.25f)));
	__m256 x = _mm256_mul_ps(f, _mm256_set1_ps(TWO_PI)), z = _mm256_mul_ps(x, x);
	__m256 sp = _mm256_mul_ps(_mm256_set1_ps(SIN_P[0]), z);
	sp = _mm256_mul_ps(_mm256_add_ps(sp, _mm256_set1_ps(SIN_P[1])), z);
	sp = _mm256_mul_ps(_mm256_mul_ps(_mm256_add_ps(sp, _mm256_set1_ps(SIN_P[2])), z), x);
	__m256 sv = _mm256_add_ps(sp, x);
	__m256 cp = _mm256_mul_ps(_mm256_set1_ps(COS_P[0]), z);
	cp = _mm256_mul_ps(_mm256_add_ps(cp, _mm256_set1_ps(COS_P[1])), z);
	cp = _mm256_mul_ps(_mm256_mul_ps(_mm256_add_ps(cp, _mm256_set1_ps(COS_P[2])), z), z);
	cp = _mm256_sub_ps(cp, _mm256_mul_ps(_mm256_set1_ps(0.5f), z));
	__m256 cv = _mm256_add_ps(cp, _mm256_set1_ps(1.0f));
	/* quadrant: 1 and 3 swap sin and cos; sin < 0 in 2, 3; cos < 0 in 1, 2 */
	__m256i q = _mm256_and_si256(k, _mm256_set1_epi32(3));
	__m256 swap = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(q, _mm256_set1_epi32(1)), _mm256_set1_epi32(1)));
	__m256 s = _mm256_blendv_ps(sv, cv, swap), c = _mm256_blendv_ps(cv, sv, swap);
	__m256 sneg = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(q, 1), 31));
	__m256 cneg = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_xor_si256(_mm256_srli_epi32(q, 1), _mm256_and_si256(q, _mm256_set1_epi32(1))), 31));
	*z0 = _mm256_mul_ps(r, _mm256_xor_ps(c, cneg));
	*z1 = _mm256_mul_ps(r, _mm256_xor_ps(s, sneg));
}

/* Stores 8 blocks: lane l of v0..v3 is block l's four values. */
AVX2 static inline void store_blocks8_avx2(float *out, __m256 v0, __m256 v1, __m256 v2, __m256 v3) {
	__m256 t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1);
	__m256 t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3);
	__m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
	__m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
	_mm256_storeu_ps(out + 0, _mm256_permute2f128_ps(s0, s1, 0x20));
	_mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(s2, s3, 0x20));
	_mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(s0, s1, 0x31));
	_mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(s2, s3, 0x31));
}

/* 8 blocks from j: values in block order into out[32]. */
AVX2 static void blocks8_avx2(float *out, uint64_t j, uint64_t key, uint64_t stream, int normal) {
	__m256i lo = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)j), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	/* the high word carries where the low one wrapped */
	__m256i wrapped = _mm256_cmpgt_epi32(_mm256_xor_si256(_mm256_set1_epi32((int)(uint32_t)j), _mm256_set1_epi32(INT32_MIN)),
					     _mm256_xor_si256(lo, _mm256_set1_epi32(INT32_MIN)));
	__m256i c0 = lo, c1 = _mm256_sub_epi32(_mm256_set1_epi32((int)(uint32_t)(j >> 32)), wrapped);
	__m256i c2 = _mm256_set1_epi32((int)(uint32_t)stream), c3 = _mm256_set1_epi32((int)(uint32_t)(stream >> 32));
	__m256i k0 = _mm256_set1_epi32((int)(uint32_t)key), k1 = _mm256_set1_epi32((int)(uint32_t)(key >> 32));
	const __m256i m0 = _mm256_set1_epi32((int)PHILOX_M0), m1 = _mm256_set1_epi32((int)PHILOX_M1);
	for (int r = 0; r < 10; r++) {
		__m256i hi0 = mulhi_avx2(c0, m0), lo0 = _mm256_mullo_epi32(c0, m0);
		__m256i hi1 = mulhi_avx2(c2, m1), lo1 = _mm256_mullo_epi32(c2, m1);
		c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), k0);
		c1 = lo1;
		c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), k1);
		c3 = lo0;
		k0 = _mm256_add_epi32(k0, _mm256_set1_epi32((int)PHILOX_W0));
		k1 = _mm256_add_epi32(k1, _mm256_set1_epi32((int)PHILOX_W1));
	}
	__m256 v0, v1, v2, v3;
	if (normal) {
		boxmuller_avx2(c0, c1, &v0, &v1);
		boxmuller_avx2(c2, c3, &v2, &v3);
	} else {
		const __m256 scale = _mm256_set1_ps(0x1p-24f);
		v0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c0, 8)), scale);
		v1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c1, 8)), scale);
		v2 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c2, 8)), scale);
		v3 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c3, 8)), scale);
	}
	store_blocks8_avx2(out, v0, v1, v2, v3);
}

/* AVX-512: 16 blocks at a time, the same arithmetic in 16 lanes. */
AVX512 static inline __m512i mulhi_avx512(__m512i a, __m512i m) {
	__m512i even = _mm512_srli_epi64(_mm512_mul_epu32(a, m), 32);
	__m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
	return _mm512_mask_blend_epi32(0xaaaa, even, odd);
}

AVX512 static __m512 log_avx512(__m512 u) {
	__m512i b = _mm512_castps_si512(u);
	__m512i e = _mm512_sub_epi32(_mm512_srli_epi32(b, 23), _mm512_set1_epi32(127));
	__m512 m = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(b, _mm512_set1_epi32(0x7fffff)), _mm512_set1_epi32(0x3f800000)));
	__mmask16 big = _mm512_cmp_ps_mask(m, _mm512_set1_ps(SQRT2F), _CMP_GT_OQ);
	m = _mm512_mask_mul_ps(m, big, m, _mm512_set1_ps(0.5f));
	e = _mm512_mask_add_epi32(e, big, e, _mm512_set1_epi32(1));
	__m512 x = _mm512_sub_ps(m, _mm512_set1_ps(1.0f)), z = _mm512_mul_ps(x, x), ef = _mm512_cvtepi32_ps(e);
	__m512 y = _mm512_set1_ps(LOG_P[0]);
	for (int i = 1; i < 9; i++) {
		y = _mm512_add_ps(_mm512_mul_ps(y, x), _mm512_set1_ps(LOG_P[i]));
	}
	y = _mm512_mul_ps(_mm512_mul_ps(y, x), z);
	y = _mm512_add_ps(y, _mm512_mul_ps(_mm512_set1_ps(LN2_LO), ef));
	y = _mm512_sub_ps(y, _mm512_mul_ps(_mm512_set1_ps(0.5f), z));
	return _mm512_add_ps(_mm512_add_ps(x, y), _mm512_mul_ps(_mm512_set1_ps(LN2_HI), ef));
}

AVX512 static void boxmuller_avx512(__m512i a, __m512i b, __m512 *z0, __m512 *z1) {
	const __m512 scale = _mm512_set1_ps(0x1p-24f);
	__m512 u1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_srli_epi32(a, 8), _mm512_set1_epi32(1))), scale);
	__m512 u2 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(b, 8)), scale);
	__m512 r = _mm512_sqrt_ps(_mm512_mul_ps(_mm512_set1_ps(-2.0f), log_avx512(u1)));
	__m512i k = _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(u2, _mm512_set1_ps(4.0f)), _mm512_set1_ps(0.5f)));
	__m512 f = _mm512_sub_ps(u2, _mm512_mul_ps(_mm512_cvtepi32_ps(k), _mm512_set1_ps(0.25f)));
	__m512 x = _mm512_mul_ps(f, _mm512_set1_ps(TWO_PI)), z = _mm512_mul_ps(x, x);
	__m512 sp = _mm512_mul_ps(_mm512_set1_ps(SIN_P[0]), z);
	sp = _mm512_mul_ps(_mm512_add_ps(sp, _mm512_set1_ps(SIN_P[1])), z);
	sp = _mm512_mul_ps(_mm512_mul_ps(_mm512_add_ps(sp, _mm512_set1_ps(SIN_P[2])), z), x);
	__m512 sv = _mm512_add_ps(sp, x);
	__m512 cp = _mm512_mul_ps(_mm512_set1_ps(COS_P[0]), z);
	cp = _mm512_mul_ps(_mm512_add_ps(cp, _mm512_set1_ps(COS_P[1])), z);
	cp = _mm512_mul_ps(_mm512_mul_ps(_mm512_add_ps(cp, _mm512_set1_ps(COS_P[2])), z), z);
	cp = _mm512_sub_ps(cp, _mm512_mul_ps(_mm512_set1_ps(0.5f), z));
	__m512 cv = _mm512_add_ps(cp, _mm512_set1_ps(1.0f));
	__m512i q = _mm512_and_si512(k, _mm512_set1_epi32(3));
	__mmask16 swap = _mm512_test_epi32_mask(q, _mm512_set1_epi32(1));
	__m512 sn = _mm512_mask_blend_ps(swap, sv, cv), cn = _mm512_mask_blend_ps(swap, cv, sv);
	__m512i hi = _mm512_srli_epi32(q, 1);
	__m512i sneg = _mm512_slli_epi32(hi, 31);
	__m512i cneg = _mm512_slli_epi32(_mm512_xor_si512(hi, _mm512_and_si512(q, _mm512_set1_epi32(1))), 31);
	*z0 = _mm512_mul_ps(r, _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(cn), cneg)));
	*z1 = _mm512_mul_ps(r, _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(sn), sneg)));
}

/* The upper 8 floats, with AVX512F alone (no DQ). */
AVX512 static inline __m256 high256(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

/* 16 blocks from j: values in block order into out[64]. */
AVX512 static void blocks16_avx512(float *out, uint64_t j, uint64_t key, uint64_t stream, int normal) {
	__m512i base = _mm512_set1_epi32((int)(uint32_t)j);
	__m512i lo = _mm512_add_epi32(base, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
	__mmask16 wrapped = _mm512_cmplt_epu32_mask(lo, base); /* the high word carries */
	__m512i c0 = lo, c1 = _mm512_mask_add_epi32(_mm512_set1_epi32((int)(uint32_t)(j >> 32)), wrapped,
						      _mm512_set1_epi32((int)(uint32_t)(j >> 32)), _mm512_set1_epi32(1));
	__m512i c2 = _mm512_set1_epi32((int)(uint32_t)stream), c3 = _mm512_set1_epi32((int)(uint32_t)(stream >> 32));
	__m512i k0 = _mm512_set1_epi32((int)(uint32_t)key), k1 = _mm512_set1_epi32((int)(uint32_t)(key >> 32));
	const __m512i m0 = _mm512_set1_epi32((int)PHILOX_M0), m1 = _mm512_set1_epi32((int)PHILOX_M1);
	for (int r = 0; r < 10; r++) {
		__m512i hi0 = mulhi_avx512(c0, m0), lo0 = _mm512_mullo_epi32(c0, m0);
		__m512i hi1 = mulhi_avx512(c2, m1), lo1 = _mm512_mullo_epi32(c2, m1);
		c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), k0);
		c1 = lo1;
		c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), k1);
		c3 = lo0;
		k0 = _mm512_add_epi32(k0, _mm512_set1_epi32((int)PHILOX_W0));
		k1 = _mm512_add_epi32(k1, _mm512_set1_epi32((int)PHILOX_W1));
	}
	__m512 v[4];
	if (normal) {
		boxmuller_avx512(c0, c1, &v[0], &v[1]);
		boxmuller_avx512(c2, c3, &v[2], &v[3]);
	} else {
		const __m512 scale = _mm512_set1_ps(0x1p-24f);
		__m512i c[4] = {c0, c1, c2, c3};
		for (int i = 0; i < 4; i++) {
			v[i] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(c[i], 8)), scale);
		}
	}
	/* blocks 0-7 and 8-15: the AVX2 transpose on each half */
	store_blocks8_avx2(out, _mm512_castps512_ps256(v[0]), _mm512_castps512_ps256(v[1]), _mm512_castps512_ps256(v[2]),
			   _mm512_castps512_ps256(v[3]));
	store_blocks8_avx2(out + 32, high256(v[0]), high256(v[1]), high256(v[2]), high256(v[3]));
}

#endif

void tb_philox_fill(int path, float *dst, size_t n, uint64_t key, uint64_t stream, uint64_t first, int normal) {
	size_t i = 0;
	uint64_t j = first;
#ifdef TB_X86
	if (path == TB_PATH_AVX512) {
		for (; i + 64 <= n; i += 64, j += 16) {
			blocks16_avx512(dst + i, j, key, stream, normal);
		}
	}
	if (path == TB_PATH_AVX2 || path == TB_PATH_AVX512) {
		for (; i + 32 <= n; i += 32, j += 8) {
			blocks8_avx2(dst + i, j, key, stream, normal);
		}
	}
#else
	(void)path;
#endif
	for (; i < n; i += 4, j++) {
		float out[4];
		block_1(out, j, key, stream, normal);
		size_t m = n - i < 4 ? n - i : 4;
		memcpy(dst + i, out, m * sizeof(float));
	}
}
