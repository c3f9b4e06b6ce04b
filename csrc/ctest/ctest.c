/* C unit tests of csrc, run by `make ctest` under ASan and UBSan. The GPU
 * runtime is the fake libcudart that TB_FAKE_CUDART points at. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tb_kernels.h"
#include "tb_runtime.h"

static int failures, checks;

#define CHECK(cond, ...)                                                   \
	do {                                                                   \
		checks++;                                                          \
		if (!(cond)) {                                                     \
			failures++;                                                    \
			fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                  \
			fputc('\n', stderr);                                           \
		}                                                                  \
	} while (0)

static void test_open_errors(void) {
	tb_runtime rt;
	char err[512];
	CHECK(tb_runtime_open(&rt, TB_KIND_CUDA, "/nonexistent/libcudart.so", err, sizeof err) == -1, "opened a missing library");
	CHECK(strstr(err, "/nonexistent/libcudart.so") != NULL, "message: %s", err);
	CHECK(rt.lib == NULL, "a failed open left a handle");

	/* A library that loads but is not a runtime: the first missing symbol is named. */
	CHECK(tb_runtime_open(&rt, TB_KIND_HIP, "libc.so.6", err, sizeof err) == -1, "libc is not a runtime");
	CHECK(strstr(err, "symbol hipGetDeviceCount not found") != NULL, "message: %s", err);
	CHECK(tb_runtime_open(&rt, 7, "libc.so.6", err, sizeof err) == -1 && strstr(err, "kind 7"), "message: %s", err);
}

static void test_fake_runtime(const char *path) {
	tb_runtime rt;
	char err[512];
	int rc = tb_runtime_open(&rt, TB_KIND_CUDA, path, err, sizeof err);
	CHECK(rc == 0, "open %s: %s", path, err);
	if (rc != 0) {
		return;
	}
	long (*live)(void) = (long (*)(void))dlsym(rt.lib, "tbfake_live_allocs");
	CHECK(live != NULL, "the fake exports tbfake_live_allocs");
	CHECK(tb_runtime_symbols() == 18, "%d symbols", tb_runtime_symbols());

	int n = -1;
	CHECK(rt.get_device_count(&n) == TB_SUCCESS && n == 1, "device count %d", n);
	CHECK(rt.set_device(0) == TB_SUCCESS, "set device 0");
	CHECK(rt.set_device(3) == TB_ERR_INVALID_DEVICE, "set device 3");
	CHECK(strcmp(rt.get_error_name(TB_ERR_NO_DEVICE), "cudaErrorNoDevice") == 0, "%s", rt.get_error_name(100));
	CHECK(strcmp(rt.get_error_string(TB_ERR_INVALID_VALUE), "invalid argument") == 0, "%s", rt.get_error_string(1));

	enum { N = 1 << 16 };
	unsigned char *host = NULL, *dev = NULL, *back = NULL;
	CHECK(rt.host_alloc((void **)&host, N, TB_HOST_ALLOC_PORTABLE) == 0 && host, "host alloc");
	CHECK(rt.host_alloc((void **)&back, N, TB_HOST_ALLOC_PORTABLE) == 0 && back, "host alloc");
	CHECK(rt.malloc((void **)&dev, N) == 0 && dev, "device alloc");
	for (int i = 0; i < N; i++) {
		host[i] = (unsigned char)(i * 7);
	}
	tb_stream_t s = NULL;
	tb_event_t e1 = NULL, e2 = NULL;
	CHECK(rt.stream_create(&s, TB_STREAM_NON_BLOCKING) == 0, "stream");
	CHECK(rt.event_create(&e1, TB_EVENT_DISABLE_TIMING) == 0, "event");
	CHECK(rt.event_create(&e2, TB_EVENT_DISABLE_TIMING) == 0, "event");
	setenv("TB_FAKE_COPY_DELAY_US", "200000", 1);
	CHECK(rt.memcpy_async(dev, host, N / 2, TB_MEMCPY_HOST_TO_DEVICE, s) == 0, "copy 1");
	CHECK(rt.event_record(e1, s) == 0, "record 1");
	CHECK(rt.memcpy_async(dev + N / 2, host + N / 2, N / 2, TB_MEMCPY_HOST_TO_DEVICE, s) == 0, "copy 2");
	CHECK(rt.event_record(e2, s) == 0, "record 2");
	CHECK(rt.event_query(e2) == TB_ERR_NOT_READY, "a 200 ms copy finished at once");
	CHECK(rt.event_synchronize(e2) == 0, "sync 2");
	/* In-order stream: the later event done means the earlier one is. */
	CHECK(rt.event_query(e1) == 0, "event 1 after event 2");
	CHECK(rt.memcpy(back, dev, N, TB_MEMCPY_DEVICE_TO_HOST) == 0, "copy back");
	CHECK(memcmp(back, host, N) == 0, "device data differs from the host data");
	setenv("TB_FAKE_COPY_DELAY_US", "0", 1);

	/* Errors come back as the runtime's codes. */
	setenv("TB_FAKE_FAIL", "cudaMalloc=2", 1);
	void *p = NULL;
	CHECK(rt.malloc(&p, 16) == 2, "injected failure");
	unsetenv("TB_FAKE_FAIL");
	CHECK(rt.memcpy_async(NULL, host, 4, TB_MEMCPY_HOST_TO_DEVICE, s) == TB_ERR_INVALID_VALUE, "null dst");
	setenv("TB_FAKE_DEVICES", "0", 1);
	CHECK(rt.get_device_count(&n) == TB_ERR_NO_DEVICE && n == 0, "no device");
	unsetenv("TB_FAKE_DEVICES");

	CHECK(rt.event_destroy(e1) == 0 && rt.event_destroy(e2) == 0, "event destroy");
	CHECK(rt.stream_destroy(s) == 0, "stream destroy");
	CHECK(rt.free(dev) == 0 && rt.host_free(host) == 0 && rt.host_free(back) == 0, "free");
	CHECK(live() == 0, "%ld allocations leaked", live());
	tb_runtime_close(&rt);
	CHECK(rt.lib == NULL && rt.malloc == NULL, "close clears the table");
}

/* The paths this CPU runs. */
static int paths(int out[3]) {
	int n = 0;
	out[n++] = TB_PATH_SCALAR;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) {
		out[n++] = TB_PATH_AVX2;
	}
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
		out[n++] = TB_PATH_AVX512;
	}
	return n;
}

/* Kernels on exact-size heap buffers: ASan reports any read or write past
 * them; results must agree across paths. */
static void test_kernels(void) {
	int p[3], np = paths(p);
	for (size_t hw = 1; hw < 70; hw += 3) {
		for (size_t c = 1; c <= 4; c++) {
			uint8_t *src = malloc(hw * c);
			float *ref = malloc(hw * c * sizeof(float)), *got = malloc(hw * c * sizeof(float));
			float scale[4] = {0.5f, 0.25f, 2.0f, 1.5f}, bias[4] = {-1.0f, 0.0f, 0.5f, 3.0f};
			for (size_t i = 0; i < hw * c; i++) {
				src[i] = (uint8_t)(i * 37 + 11);
			}
			tb_u8hwc_to_f32chw(TB_PATH_SCALAR, ref, src, hw, c, scale, bias);
			for (int k = 0; k < np; k++) {
				tb_u8hwc_to_f32chw(p[k], got, src, hw, c, scale, bias);
				CHECK(memcmp(ref, got, hw * c * sizeof(float)) == 0, "u8 hw=%zu c=%zu path %d", hw, c, p[k]);
			}
			free(src);
			free(ref);
			free(got);
		}
	}
	for (size_t n = 0; n < 70; n += 5) {
		float *f = malloc((n + 1) * sizeof(float)), *back = malloc((n + 1) * sizeof(float));
		uint16_t *h = malloc((n + 1) * sizeof(uint16_t)), *href = malloc((n + 1) * sizeof(uint16_t));
		for (size_t i = 0; i < n; i++) {
			f[i] = (float)i * 1.37f - 20.0f;
		}
		tb_f32_to_f16(TB_PATH_SCALAR, href, f, n);
		for (int k = 0; k < np; k++) {
			tb_f32_to_f16(p[k], h, f, n);
			CHECK(memcmp(h, href, n * 2) == 0, "f16 n=%zu path %d", n, p[k]);
			tb_f16_to_f32(p[k], back, h, n);
			tb_f32_to_bf16(p[k], h, f, n);
			tb_bf16_to_f32(p[k], back, h, n);
		}
		free(f);
		free(back);
		free(h);
		free(href);
	}
	/* Philox across the 2^32 block boundary: the high counter word carries. */
	float ref[96], got[96];
	uint64_t first = 0xfffffffdull;
	for (int normal = 0; normal < 2; normal++) {
		tb_philox_fill(TB_PATH_SCALAR, ref, 96, 7, 9, first, normal);
		for (int k = 0; k < np; k++) {
			tb_philox_fill(p[k], got, 96, 7, 9, first, normal);
			CHECK(memcmp(ref, got, sizeof ref) == 0, "philox across 2^32, path %d normal %d", p[k], normal);
		}
		float shifted[4];
		tb_philox_fill(TB_PATH_SCALAR, shifted, 4, 7, 9, first + 3, normal); /* block 2^32 */
		CHECK(memcmp(shifted, ref + 12, sizeof shifted) == 0, "block 2^32 is the 4th block from 2^32-3");
	}
	int64_t lens[3] = {2, 0, 3};
	uint8_t *buf = malloc(3 * 4 * 2), pad[2] = {0xaa, 0xbb};
	for (int i = 0; i < 24; i++) {
		buf[i] = (uint8_t)i;
	}
	tb_pad_stack(buf, lens, 3, 4, 3, 2, pad, 2);
	const uint8_t want[18] = {0, 1, 2, 3, 0xaa, 0xbb, 0xaa, 0xbb, 0xaa, 0xbb, 0xaa, 0xbb, 16, 17, 18, 19, 20, 21};
	CHECK(memcmp(buf, want, sizeof want) == 0, "pad stack");
	free(buf);
}

int main(void) {
	const char *fake = getenv("TB_FAKE_CUDART");
	if (fake == NULL) {
		fprintf(stderr, "ctest: set TB_FAKE_CUDART to the fake runtime (make ctest does)\n");
		return 2;
	}
	test_open_errors();
	test_fake_runtime(fake);
	test_kernels();
	printf("%d passed, %d failed\n", checks - failures, failures);
	return failures != 0;
}
