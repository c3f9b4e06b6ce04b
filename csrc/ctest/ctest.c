/* C unit tests of csrc, run by `make ctest` under ASan and UBSan. The GPU
 * runtime is the fake libcudart that TB_FAKE_CUDART points at. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	setenv("TB_FAKE_COPY_DELAY_US", "20000", 1);
	CHECK(rt.memcpy_async(dev, host, N / 2, TB_MEMCPY_HOST_TO_DEVICE, s) == 0, "copy 1");
	CHECK(rt.event_record(e1, s) == 0, "record 1");
	CHECK(rt.memcpy_async(dev + N / 2, host + N / 2, N / 2, TB_MEMCPY_HOST_TO_DEVICE, s) == 0, "copy 2");
	CHECK(rt.event_record(e2, s) == 0, "record 2");
	CHECK(rt.event_query(e2) == TB_ERR_NOT_READY, "a 20 ms copy finished at once");
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

int main(void) {
	const char *fake = getenv("TB_FAKE_CUDART");
	if (fake == NULL) {
		fprintf(stderr, "ctest: set TB_FAKE_CUDART to the fake runtime (make ctest does)\n");
		return 2;
	}
	test_open_errors();
	test_fake_runtime(fake);
	printf("%d passed, %d failed\n", checks - failures, failures);
	return failures != 0;
}
