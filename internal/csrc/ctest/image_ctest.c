/* C unit tests of the image kernels (tb_jpeg_decode.c,
 * tb_resample_exact.c, tb_resample_fast.c, tb_dl.c) and the bench's
 * TurboJPEG loader (bench/tb_turbo.c), run by `make ctest` under ASan and
 * UBSan. libjpeg is the real libjpeg-turbo
 * (TB_LIBJPEG, default libjpeg.so.62; its tests are skipped when it does
 * not load); TB_TESTDATA points at vision/testdata. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tb_image.h"
#include "tb_jpeg_encode.h"
#include "tb_kernels.h"
#include "tb_turbo.h"

#include "check.h"

static uint8_t *slurp(const char *dir, const char *name, size_t *n) {
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		return NULL;
	}
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc((size_t)len);
	*n = fread(b, 1, (size_t)len, f);
	fclose(f);
	return b;
}

/* A plan that maps a w x h region onto itself (one tap of weight 1),
 * halves it (two taps of 1/2) when half is 1, or doubles it (each pixel
 * twice) when half is 2; fast picks the fast resampling. */
typedef struct {
	tb_plan p;
	int32_t *hb, *hk, *vb, *vk;
} test_plan;

static void make_plan(test_plan *t, int w, int h, int half, int out, int flip, int fast) {
	int ow = half == 1 ? w / 2 : half == 2 ? 2 * w : w, oh = half == 1 ? h / 2 : half == 2 ? 2 * h : h, ks = half == 1 ? 2 : 1;
	t->hb = calloc((size_t)ow * 2, sizeof(int32_t));
	t->hk = calloc((size_t)ow * ks, sizeof(int32_t));
	t->vb = calloc((size_t)oh * 2, sizeof(int32_t));
	t->vk = calloc((size_t)oh * ks, sizeof(int32_t));
	for (int j = 0; j < ow; j++) {
		t->hb[2 * j] = half == 2 ? j / 2 : j * ks, t->hb[2 * j + 1] = ks;
		for (int k = 0; k < ks; k++) {
			t->hk[j * ks + k] = (1 << 22) / ks;
		}
	}
	for (int i = 0; i < oh; i++) {
		t->vb[2 * i] = half == 2 ? i / 2 : i * ks, t->vb[2 * i + 1] = ks;
		for (int k = 0; k < ks; k++) {
			t->vk[i * ks + k] = (1 << 22) / ks;
		}
	}
	tb_plan p = {0, 0, w, h, ow, oh, ks, ks, t->hb, t->hk, t->vb, t->vk, flip, out, {0.5f, 0.25f, 0}, {0.5f, 2.0f, 1}, fast, {0}, {0}};
	for (int c = 0; c < 3; c++) {
		int u8 = out == TB_OUT_U8_HWC || out == TB_OUT_U8_CHW;
		p.scale[c] = u8 ? 1.0f / 16384 : (float)(1 / (16384 * 255 * (double)p.std[c]));
		p.bias[c] = u8 ? 0.5f : -p.mean[c] / p.std[c];
	}
	t->p = p;
}

static void free_plan(test_plan *t) {
	free(t->hb);
	free(t->hk);
	free(t->vb);
	free(t->vk);
}

static int cpu_simd(void) {
#if defined(__x86_64__)
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#else
	return 0;
#endif
}

/* Resampling from memory: the identity plan copies, every layout and flip
 * agrees between the scalar and SIMD paths, nothing is written past the
 * output. */
static void test_resample(void) {
	tb_imgdec *d = tb_imgdec_new(NULL);
	CHECK(d != NULL, "decoder");
	enum { W = 37, H = 29 };
	uint8_t *src = malloc(W * H * 4);
	for (int i = 0; i < W * H * 4; i++) {
		src[i] = (uint8_t)(i * 131 + 7);
		if (i % 4 == 3) {
			src[i] = 0;
		}
	}
	test_plan t;
	for (int fast = 0; fast < 2; fast++) {
		for (int path = TB_PATH_SCALAR; path <= (cpu_simd() ? TB_PATH_AVX2 : TB_PATH_SCALAR); path++) {
			make_plan(&t, W, H, 0, TB_OUT_U8_HWC, 0, fast);
			uint8_t *out = malloc(W * H * 3 + 16);
			memset(out + W * H * 3, 0xab, 16);
			CHECK(tb_resample(d, &t.p, src, W * 4, out, path) == TB_IMG_OK, "%s", tb_imgdec_error(d));
			int same = 1;
			for (int p = 0; p < W * H; p++) {
				for (int c = 0; c < 3; c++) {
					same &= out[3 * p + c] == src[4 * p + c];
				}
			}
			CHECK(same, "the identity plan copies (fast %d, path %d)", fast, path);
			CHECK(out[W * H * 3] == 0xab && out[W * H * 3 + 15] == 0xab, "wrote past the output");
			free(out);
			free_plan(&t);
		}
		for (int out_kind = TB_OUT_F32_CHW; out_kind <= TB_OUT_U8_CHW; out_kind++) {
			for (int flip = 0; flip < 2; flip++) {
				for (int half = 0; half < 3; half++) {
					make_plan(&t, W, H, half, out_kind, flip, fast);
					size_t elem = out_kind == TB_OUT_F32_CHW ? 4 : out_kind <= TB_OUT_BF16_CHW ? 2 : 1;
					size_t n = (size_t)t.p.ow * t.p.oh * 3 * elem;
					uint8_t *a = malloc(n), *b = malloc(n);
					CHECK(tb_resample(d, &t.p, src, W * 4, a, TB_PATH_SCALAR) == TB_IMG_OK, "%s", tb_imgdec_error(d));
					if (cpu_simd()) {
						CHECK(tb_resample(d, &t.p, src, W * 4, b, TB_PATH_AVX2) == TB_IMG_OK, "%s", tb_imgdec_error(d));
						CHECK(memcmp(a, b, n) == 0, "scalar and avx2 differ: out %d flip %d half %d fast %d", out_kind, flip, half, fast);
					}
					free(a);
					free(b);
					free_plan(&t);
				}
			}
		}
		/* A plan reading past its region is refused, not run. */
		make_plan(&t, W, H, 0, TB_OUT_U8_HWC, 0, fast);
		t.vb[2 * (H - 1)] = H; /* the last row reads row H of H */
		uint8_t *out = malloc(W * H * 3);
		CHECK(tb_resample(d, &t.p, src, W * 4, out, TB_PATH_SCALAR) == TB_IMG_EARG, "a bad plan ran (fast %d)", fast);
		free(out);
		free_plan(&t);
	}
	free(src);
	tb_imgdec_free(d);
}

/* Random plans (taps anywhere in the region, random weights summing to at
 * most 1, downscales far past the fast pass's 16-byte windows): on both
 * resamplings and every output the scalar and SIMD paths agree, and
 * under ASan nothing reads or writes outside its buffers. */
static void test_random_plans(void) {
	tb_imgdec *d = tb_imgdec_new(NULL);
	uint32_t seed = 12345;
#define RND(n) ((int)((seed = seed * 1103515245u + 12345u) >> 8) % (n))
	for (int it = 0; it < 400; it++) {
		int w = 1 + RND(300), h = 1 + RND(120), ow = 1 + RND(90), oh = 1 + RND(40), hks = 1 + RND(12), vks = 1 + RND(12);
		int32_t *hb = calloc((size_t)ow * 2, 4), *hk = calloc((size_t)ow * hks, 4), *vb = calloc((size_t)oh * 2, 4),
			*vk = calloc((size_t)oh * vks, 4);
		for (int j = 0; j < ow; j++) {
			int n = RND((hks < w ? hks : w) + 1);
			hb[2 * j] = RND(w - n + 1), hb[2 * j + 1] = n;
			for (int t = 0, left = 1 << 22; t < n; t++) {
				hk[j * hks + t] = RND(left / 2 + 1), left -= hk[j * hks + t];
			}
		}
		for (int i = 0, lo = 0; i < oh; i++) {
			int n = 1 + RND((vks < h ? vks : h));
			lo = lo + n <= h ? lo + RND(h - lo - n + 1) / 4 : h - n; /* rows in order, as a filter's are */
			vb[2 * i] = lo, vb[2 * i + 1] = n;
			for (int t = 0, left = 1 << 22; t < n; t++) {
				vk[i * vks + t] = RND(left / 2 + 1), left -= vk[i * vks + t];
			}
		}
		size_t stride = (size_t)w * 4 + (size_t)RND(3) * 4;
		uint8_t *src = malloc(stride * h);
		for (size_t i = 0; i < stride * h; i++) {
			src[i] = (uint8_t)RND(256);
		}
		int out = RND(5), fast = RND(2), flip = RND(2);
		tb_plan p = {0, 0, w, h, ow, oh, hks, vks, hb, hk, vb, vk, flip, out, {0.4f, 0.5f, 0.6f}, {0.2f, 0.3f, 0.25f}, fast, {0}, {0}};
		for (int c = 0; c < 3; c++) {
			p.scale[c] = out >= TB_OUT_U8_HWC ? 1.0f / 16384 : (float)(1 / (16384 * 255 * (double)p.std[c]));
			p.bias[c] = out >= TB_OUT_U8_HWC ? 0.5f : -p.mean[c] / p.std[c];
		}
		size_t elem = out == TB_OUT_F32_CHW ? 4 : out <= TB_OUT_BF16_CHW ? 2 : 1, n = (size_t)ow * oh * 3 * elem;
		uint8_t *a = malloc(n), *b = malloc(n);
		CHECK(tb_resample(d, &p, src, stride, a, TB_PATH_SCALAR) == TB_IMG_OK, "case %d: %s", it, tb_imgdec_error(d));
		if (cpu_simd()) {
			CHECK(tb_resample(d, &p, src, stride, b, TB_PATH_AVX2) == TB_IMG_OK, "case %d: %s", it, tb_imgdec_error(d));
			CHECK(memcmp(a, b, n) == 0, "case %d (%dx%d to %dx%d, %d and %d taps, out %d, fast %d, flip %d): scalar and avx2 differ", it, w,
			      h, ow, oh, hks, vks, out, fast, flip);
		}
		free(a), free(b), free(src), free(hb), free(hk), free(vb), free(vk);
	}
#undef RND
	tb_imgdec_free(d);
}

static void test_open_errors(void) {
	tb_jpeg_lib lib;
	char err[512];
	CHECK(tb_jpeg_open(&lib, "/nonexistent/libjpeg.so.62", err, sizeof err) == -1, "opened a missing library");
	CHECK(strstr(err, "/nonexistent/libjpeg.so.62") != NULL, "message: %s", err);
	CHECK(tb_jpeg_open(&lib, "libc.so.6", err, sizeof err) == -1, "libc is not libjpeg");
	CHECK(strstr(err, "symbol jpeg_std_error not found") != NULL, "message: %s", err);
	tb_turbo tj;
	CHECK(tb_turbo_open(&tj, "libc.so.6", err, sizeof err) == -1 && strstr(err, "tjInitDecompress"), "message: %s", err);
}

/* Decoding real files: the fused path equals the region decode through
 * the identity plan; truncated, corrupt and oversized inputs fail with a
 * status and a message. */
static void test_jpeg(const char *libpath, const char *dir) {
	tb_jpeg_lib lib;
	char err[512];
	if (tb_jpeg_open(&lib, libpath, err, sizeof err) != 0) {
		printf("image_ctest: skipping libjpeg tests: %s\n", err);
		return;
	}
	tb_imgdec *d = tb_imgdec_new(&lib);
	CHECK(d != NULL && tb_imgdec_error(d)[0] == 0, "decoder: %s", d ? tb_imgdec_error(d) : "");
	const char *files[] = {"rgb420.jpg", "rgb422_odd.jpg", "gray.jpg", "cmyk.jpg", "progressive.jpg", "restart.jpg"};
	const int dims[][2] = {{160, 120}, {131, 97}, {120, 100}, {100, 80}, {140, 105}, {96, 128}};
	for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
		size_t n = 0;
		uint8_t *data = slurp(dir, files[f], &n);
		CHECK(data != NULL, "read %s/%s", dir, files[f]);
		if (data == NULL) {
			continue;
		}
		int w = dims[f][0], h = dims[f][1];
		tb_jreq q = {(uint32_t)w, (uint32_t)h, 0, 1, 0, 0};
		/* an inner region, so the crop and the skip both run */
		int x0 = w / 3, y0 = h / 4, rw = w / 2, rh = h / 2;
		uint8_t *region = malloc((size_t)rw * rh * 4);
		CHECK(tb_jpeg_region(d, data, n, &q, x0, y0, x0 + rw, y0 + rh, region, (size_t)rw * 4) == TB_IMG_OK, "%s: %s", files[f],
		      tb_imgdec_error(d));
		test_plan t;
		uint8_t *out = malloc((size_t)rw * rh * 3);
		for (int fast = 0; fast < 2; fast++) {
			/* the fast mode's decode: the fast IDCT, box upsampling */
			tb_jreq qf = q;
			qf.fast_dct = qf.box_upsample = fast;
			CHECK(tb_jpeg_region(d, data, n, &qf, x0, y0, x0 + rw, y0 + rh, region, (size_t)rw * 4) == TB_IMG_OK, "%s: %s", files[f],
			      tb_imgdec_error(d));
			make_plan(&t, rw, rh, 0, TB_OUT_U8_HWC, 0, fast);
			t.p.x0 = x0, t.p.y0 = y0, t.p.x1 = x0 + rw, t.p.y1 = y0 + rh;
			for (int path = TB_PATH_SCALAR; path <= (cpu_simd() ? TB_PATH_AVX2 : TB_PATH_SCALAR); path++) {
				CHECK(tb_jpeg_resample(d, data, n, &qf, &t.p, out, path) == TB_IMG_OK, "%s: %s", files[f], tb_imgdec_error(d));
				int same = 1;
				for (int p = 0; p < rw * rh; p++) {
					for (int c = 0; c < 3; c++) {
						same &= out[3 * p + c] == region[4 * p + c];
					}
				}
				CHECK(same, "%s on path %d (fast %d): the fused decode differs from the region decode", files[f], path, fast);
			}
			free_plan(&t);
		}
		/* truncated: an error, never a grey image */
		CHECK(tb_jpeg_region(d, data, n / 2, &q, x0, y0, x0 + rw, y0 + rh, region, (size_t)rw * 4) == TB_IMG_EDECODE,
		      "%s truncated: %s", files[f], tb_imgdec_error(d));
		CHECK(tb_imgdec_error(d)[0] != 0, "a message");
		/* the wrong size from the caller's parse */
		tb_jreq bad = q;
		bad.width++;
		CHECK(tb_jpeg_region(d, data, n, &bad, x0, y0, x0 + rw, y0 + rh, region, (size_t)rw * 4) == TB_IMG_EFORMAT, "%s", files[f]);
		/* the pixel limit */
		tb_jreq small = q;
		small.max_pixels = 100;
		CHECK(tb_jpeg_region(d, data, n, &small, x0, y0, x0 + rw, y0 + rh, region, (size_t)rw * 4) == TB_IMG_ETOOBIG, "%s", files[f]);
		/* the decoder works again after every failure */
		CHECK(tb_jpeg_region(d, data, n, &q, x0, y0, x0 + rw, y0 + rh, region, (size_t)rw * 4) == TB_IMG_OK, "%s", files[f]);
		free(out);
		free(region);
		free(data);
	}
	uint8_t garbage[64];
	for (int i = 0; i < 64; i++) {
		garbage[i] = (uint8_t)(i * 37);
	}
	tb_jreq q = {10, 10, 0, 1, 0, 0};
	uint8_t px[400];
	CHECK(tb_jpeg_region(d, garbage, sizeof garbage, &q, 0, 0, 10, 10, px, 40) == TB_IMG_EDECODE, "garbage decoded");
	tb_imgdec_free(d);
	tb_jpeg_close(&lib);
}

/* The TurboJPEG encoder: a gradient encoded whole, from SOI to EOI, at
 * two qualities (the higher larger); a library without its symbols is
 * refused naming the first missing. */
static void test_encode(void) {
	tb_tj_enc t;
	char err[512];
	CHECK(tb_tj_enc_open(&t, "libc.so.6", err, sizeof err) == -1 && strstr(err, "tjInitCompress"), "message: %s", err);
	if (tb_tj_enc_open(&t, "libturbojpeg.so.0", err, sizeof err) != 0) {
		CHECK(0, "libturbojpeg.so.0: %s", err);
		return;
	}
	enum { W = 37, H = 23 };
	static uint8_t rgb[W * H * 3];
	for (int i = 0; i < W * H; i++) {
		rgb[3 * i] = (uint8_t)(i % W * 7);
		rgb[3 * i + 1] = (uint8_t)(i / W * 11);
		rgb[3 * i + 2] = (uint8_t)(i * 3);
	}
	void *h = tb_tj_init(&t);
	CHECK(h != NULL, "tjInitCompress");
	size_t sizes[2] = {0, 0};
	int qs[2] = {30, 95};
	for (int k = 0; k < 2 && h != NULL; k++) {
		uint8_t *out = NULL;
		size_t n = 0;
		CHECK(tb_tj_encode(&t, h, rgb, W, H, qs[k], &out, &n, err, sizeof err) == 0, "encode: %s", err);
		CHECK(out != NULL && n > 4 && out[0] == 0xFF && out[1] == 0xD8 && out[n - 2] == 0xFF && out[n - 1] == 0xD9,
		      "quality %d: not a whole JPEG (%zu bytes)", qs[k], n);
		sizes[k] = n;
		if (out != NULL) {
			tb_tj_free(&t, out);
		}
	}
	CHECK(sizes[1] > sizes[0], "quality 95 (%zu bytes) is larger than 30 (%zu)", sizes[1], sizes[0]);
	if (h != NULL) {
		tb_tj_destroy(&t, h);
	}
	tb_tj_enc_close(&t);
}

int main(void) {
	const char *lib = getenv("TB_LIBJPEG");
	const char *dir = getenv("TB_TESTDATA");
	test_resample();
	test_random_plans();
	test_open_errors();
	test_encode();
	test_jpeg(lib ? lib : "libjpeg.so.62", dir ? dir : "vision/testdata");
	return check_report();
}
