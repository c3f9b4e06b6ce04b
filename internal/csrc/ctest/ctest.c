/* C unit tests of csrc, run by `make ctest` under ASan and UBSan. The GPU
 * runtime is the fake libcudart that TB_FAKE_CUDART points at. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tb_kernels.h"
#include "tb_runtime.h"

#include "check.h"

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
	CHECK(tb_runtime_symbols() == 20, "%d symbols", tb_runtime_symbols());

	int n = -1;
	CHECK(rt.get_device_count(&n) == TB_SUCCESS && n == 1, "device count %d", n);
	CHECK(rt.set_device(0) == TB_SUCCESS, "set device 0");
	CHECK(rt.set_device(3) == TB_ERR_INVALID_DEVICE, "set device 3");
	CHECK(strcmp(rt.get_error_name(TB_ERR_NO_DEVICE), "cudaErrorNoDevice") == 0, "%s", rt.get_error_name(100));
	CHECK(strcmp(rt.get_error_string(TB_ERR_INVALID_VALUE), "invalid argument") == 0, "%s", rt.get_error_string(1));
	CHECK(strcmp(rt.get_error_name(TB_ERR_INVALID_HANDLE), "cudaErrorInvalidResourceHandle") == 0, "%s", rt.get_error_name(400));
	CHECK(strcmp(rt.get_error_string(TB_ERR_INVALID_HANDLE), "invalid resource handle") == 0, "%s", rt.get_error_string(400));

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

/* A fake runtime with its test hooks, opened for one test. */
typedef struct {
	tb_runtime rt;
	long (*live_allocs)(void), (*live_streams)(void), (*live_events)(void);
} fake_rt;

static int fake_open(fake_rt *f, const char *path) {
	char err[512];
	if (tb_runtime_open(&f->rt, TB_KIND_CUDA, path, err, sizeof err) != 0) {
		CHECK(0, "open %s: %s", path, err);
		return -1;
	}
	f->live_allocs = (long (*)(void))dlsym(f->rt.lib, "tbfake_live_allocs");
	f->live_streams = (long (*)(void))dlsym(f->rt.lib, "tbfake_live_streams");
	f->live_events = (long (*)(void))dlsym(f->rt.lib, "tbfake_live_events");
	CHECK(f->live_allocs && f->live_streams && f->live_events, "the fake exports its hooks");
	return f->live_allocs && f->live_streams && f->live_events ? 0 : -1;
}

/* fake_close checks that nothing leaked and unloads the library. */
static void fake_close(fake_rt *f, const char *test) {
	CHECK(f->live_allocs() == 0, "%s: %ld allocations leaked", test, f->live_allocs());
	CHECK(f->live_streams() == 0, "%s: %ld streams leaked", test, f->live_streams());
	CHECK(f->live_events() == 0, "%s: %ld events leaked", test, f->live_events());
	tb_runtime_close(&f->rt);
}

static void set_delay(long us) {
	char v[32];
	snprintf(v, sizeof v, "%ld", us);
	setenv("TB_FAKE_COPY_DELAY_US", v, 1);
}

enum { SLOW_US = 300000, BYTES = 1 << 16 };

/* A late copy on stream B reads device memory that a slow copy on stream A
 * writes: it sees the new data only when B waits for A's event. */
static void test_stream_wait_event(const char *path) {
	fake_rt f;
	if (fake_open(&f, path) != 0) {
		return;
	}
	tb_runtime *rt = &f.rt;
	unsigned char *host = NULL, *back = NULL, *dev = NULL;
	rt->host_alloc((void **)&host, BYTES, TB_HOST_ALLOC_PORTABLE);
	rt->host_alloc((void **)&back, BYTES, TB_HOST_ALLOC_PORTABLE);
	rt->malloc((void **)&dev, BYTES);
	tb_stream_t a = NULL, b = NULL;
	tb_event_t e = NULL, never = NULL;
	CHECK(rt->stream_create(&a, TB_STREAM_NON_BLOCKING) == 0 && rt->stream_create(&b, TB_STREAM_NON_BLOCKING) == 0, "streams");
	CHECK(rt->event_create(&e, TB_EVENT_DISABLE_TIMING) == 0 && rt->event_create(&never, TB_EVENT_DISABLE_TIMING) == 0, "events");
	CHECK(rt->stream_wait_event(b, e, 1) == TB_ERR_INVALID_VALUE, "flags other than 0");
	CHECK(rt->stream_wait_event(b, NULL, 0) == TB_ERR_INVALID_HANDLE, "no event");

	for (int wait = 0; wait < 2; wait++) {
		memset(host, 'O', BYTES);
		CHECK(rt->memcpy(dev, host, BYTES, TB_MEMCPY_HOST_TO_DEVICE) == 0, "old data");
		memset(host, 'N', BYTES);
		set_delay(SLOW_US);
		CHECK(rt->memcpy_async(dev, host, BYTES, TB_MEMCPY_HOST_TO_DEVICE, a) == 0, "slow copy");
		CHECK(rt->event_record(e, a) == 0, "record");
		if (wait) {
			CHECK(rt->stream_wait_event(b, e, 0) == 0, "wait");
		}
		set_delay(0);
		CHECK(rt->memcpy_async(back, dev, BYTES, TB_MEMCPY_DEVICE_TO_HOST, b) == 0, "read back");
		CHECK(rt->stream_synchronize(b) == 0, "sync b");
		if (wait) {
			CHECK(rt->event_query(e) == 0, "b ran before the event it waits for");
			CHECK(back[0] == 'N' && back[BYTES - 1] == 'N', "with the wait: read %c, want N", back[0]);
		} else {
			/* The negative control: the fake does catch a missing wait. */
			CHECK(rt->event_query(e) == TB_ERR_NOT_READY, "a %d ms copy finished at once", SLOW_US / 1000);
			CHECK(back[0] == 'O', "without the wait: read %c, want the stale O", back[0]);
		}
		CHECK(rt->stream_synchronize(a) == 0, "sync a");
	}

	/* A wait captures the record current at the call: an event never
	 * recorded is no wait, and recording it later changes nothing. */
	set_delay(SLOW_US);
	CHECK(rt->stream_wait_event(b, never, 0) == 0, "wait on an event never recorded");
	CHECK(rt->memcpy_async(dev, host, BYTES, TB_MEMCPY_HOST_TO_DEVICE, a) == 0, "slow copy");
	CHECK(rt->event_record(never, a) == 0, "record after the wait");
	set_delay(0);
	CHECK(rt->event_record(e, b) == 0, "record on b");
	CHECK(rt->event_synchronize(e) == 0, "b's event");
	CHECK(rt->event_query(never) == TB_ERR_NOT_READY, "b waited for a record made after its wait");
	/* Destroying a stream whose wait is pending waits for the other stream. */
	CHECK(rt->stream_wait_event(b, never, 0) == 0, "wait on the slow copy");
	CHECK(rt->event_record(e, b) == 0, "record after the wait");
	CHECK(rt->event_destroy(never) == 0, "destroy an event with a pending record");
	CHECK(rt->stream_destroy(b) == 0, "destroy b");
	CHECK(rt->event_query(e) == 0, "b was destroyed before its work ran");
	CHECK(rt->stream_destroy(a) == 0, "destroy a");

	CHECK(rt->event_destroy(e) == 0, "event destroy");
	CHECK(rt->free(dev) == 0 && rt->host_free(host) == 0 && rt->host_free(back) == 0, "free");
	fake_close(&f, "stream wait event");
}

/* The legacy default stream (NULL) waits for the blocking streams of its
 * device, and they for it; non-blocking streams are not ordered with it. */
static void test_legacy_stream(const char *path) {
	fake_rt f;
	if (fake_open(&f, path) != 0) {
		return;
	}
	tb_runtime *rt = &f.rt;
	unsigned char *host = NULL, *back = NULL, *dev = NULL;
	rt->host_alloc((void **)&host, BYTES, TB_HOST_ALLOC_PORTABLE);
	rt->host_alloc((void **)&back, BYTES, TB_HOST_ALLOC_PORTABLE);
	rt->malloc((void **)&dev, BYTES);
	tb_stream_t blocking = NULL, nonblocking = NULL;
	tb_event_t slow = NULL, legacy = NULL;
	CHECK(rt->stream_create(&blocking, TB_STREAM_DEFAULT) == 0, "blocking stream");
	CHECK(rt->stream_create(&nonblocking, TB_STREAM_NON_BLOCKING) == 0, "non-blocking stream");
	CHECK(rt->stream_create(&nonblocking, 8) == TB_ERR_INVALID_VALUE, "unknown flags");
	CHECK(rt->event_create(&slow, TB_EVENT_DISABLE_TIMING) == 0 && rt->event_create(&legacy, TB_EVENT_DISABLE_TIMING) == 0, "events");

	memset(host, 'N', BYTES);
	set_delay(SLOW_US);
	CHECK(rt->memcpy_async(dev, host, BYTES, TB_MEMCPY_HOST_TO_DEVICE, blocking) == 0, "slow copy");
	CHECK(rt->event_record(slow, blocking) == 0, "record");
	CHECK(rt->event_record(legacy, NULL) == 0, "record on the legacy stream");
	CHECK(rt->event_query(legacy) == TB_ERR_NOT_READY, "the legacy stream did not wait for a blocking stream");
	CHECK(rt->event_synchronize(legacy) == 0, "sync");
	CHECK(rt->event_query(slow) == 0, "the legacy stream ran before the blocking stream's work");
	/* And the blocking stream waits for the legacy stream. */
	CHECK(rt->memcpy_async(dev, host, BYTES, TB_MEMCPY_HOST_TO_DEVICE, NULL) == 0, "slow copy on the legacy stream");
	CHECK(rt->event_record(legacy, NULL) == 0, "record");
	set_delay(0);
	CHECK(rt->event_record(slow, blocking) == 0, "record on the blocking stream");
	CHECK(rt->event_query(legacy) == TB_ERR_NOT_READY, "a slow copy on the legacy stream finished at once");
	CHECK(rt->event_synchronize(slow) == 0 && rt->event_query(legacy) == 0, "the blocking stream ran before the legacy stream's work");

	/* A non-blocking stream's work is not waited for. */
	set_delay(SLOW_US);
	CHECK(rt->memcpy_async(dev, host, BYTES, TB_MEMCPY_HOST_TO_DEVICE, nonblocking) == 0, "slow copy");
	CHECK(rt->event_record(slow, nonblocking) == 0, "record");
	CHECK(rt->event_record(legacy, NULL) == 0, "record on the legacy stream");
	CHECK(rt->event_synchronize(legacy) == 0, "sync");
	CHECK(rt->event_query(slow) == TB_ERR_NOT_READY, "the legacy stream waited for a non-blocking stream");
	CHECK(rt->event_synchronize(slow) == 0, "sync"); /* its copy would race the one below */
	/* cudaMemcpy is ordered on the legacy stream; device sync waits for
	 * every stream, non-blocking ones too (a slow copy into the upper half). */
	CHECK(rt->memcpy_async(dev + BYTES / 2, host, BYTES / 2, TB_MEMCPY_HOST_TO_DEVICE, nonblocking) == 0, "slow copy");
	CHECK(rt->event_record(slow, nonblocking) == 0, "record");
	memset(back, 'M', BYTES);
	CHECK(rt->memcpy_async(dev, back, BYTES / 2, TB_MEMCPY_HOST_TO_DEVICE, blocking) == 0, "slow copy");
	set_delay(0);
	unsigned char got[16];
	CHECK(rt->memcpy(got, dev, sizeof got, TB_MEMCPY_DEVICE_TO_HOST) == 0, "synchronous copy");
	CHECK(got[0] == 'M', "cudaMemcpy ran before a blocking stream's copy: %c", got[0]);
	CHECK(rt->device_synchronize() == 0, "device sync");
	CHECK(rt->event_query(slow) == 0, "device sync left work on the non-blocking stream");
	CHECK(rt->stream_synchronize(NULL) == 0, "sync the legacy stream");

	CHECK(rt->event_destroy(slow) == 0 && rt->event_destroy(legacy) == 0, "event destroy");
	CHECK(rt->stream_destroy(blocking) == 0 && rt->stream_destroy(nonblocking) == 0, "stream destroy");
	CHECK(rt->free(dev) == 0 && rt->host_free(host) == 0 && rt->host_free(back) == 0, "free");
	fake_close(&f, "legacy stream");
}

/* Streams, events and memory belong to the device current at their
 * creation; the current device is per thread. */
static void test_devices(const char *path) {
	fake_rt f;
	if (fake_open(&f, path) != 0) {
		return;
	}
	tb_runtime *rt = &f.rt;
	setenv("TB_FAKE_DEVICES", "2", 1);
	set_delay(0);
	unsigned char *host = NULL, *dev0 = NULL, *dev1 = NULL;
	rt->host_alloc((void **)&host, BYTES, TB_HOST_ALLOC_PORTABLE);
	tb_stream_t s0 = NULL, s1 = NULL;
	tb_event_t e0 = NULL, e1 = NULL;
	CHECK(rt->set_device(0) == 0, "device 0");
	rt->malloc((void **)&dev0, BYTES);
	CHECK(rt->stream_create(&s0, TB_STREAM_NON_BLOCKING) == 0 && rt->event_create(&e0, TB_EVENT_DISABLE_TIMING) == 0, "device 0's");
	CHECK(rt->set_device(1) == 0, "device 1");
	rt->malloc((void **)&dev1, BYTES);
	CHECK(rt->stream_create(&s1, TB_STREAM_NON_BLOCKING) == 0 && rt->event_create(&e1, TB_EVENT_DISABLE_TIMING) == 0, "device 1's");
	CHECK(rt->set_device(0) == 0, "device 0");

	/* As in CUDA: an event is recorded only on a stream of its device, and
	 * the legacy stream is the current device's. */
	CHECK(rt->event_record(e0, s1) == TB_ERR_INVALID_HANDLE, "device 0's event on device 1's stream");
	CHECK(rt->event_record(e1, NULL) == TB_ERR_INVALID_HANDLE, "device 1's event on device 0's legacy stream");
	CHECK(rt->event_record(e1, s1) == 0, "an event on its stream, from another device");
	CHECK(rt->memcpy_async(dev1, host, BYTES, TB_MEMCPY_HOST_TO_DEVICE, s1) == 0, "a copy on another device's stream");
	CHECK(rt->stream_wait_event(s0, e1, 0) == 0, "a wait across devices");
	/* Stricter than CUDA: the stream's device must be current. */
	setenv("TB_FAKE_STRICT_DEVICE", "1", 1);
	CHECK(rt->memcpy_async(dev1, host, BYTES, TB_MEMCPY_HOST_TO_DEVICE, s1) == TB_ERR_INVALID_HANDLE, "strict: copy");
	CHECK(rt->event_record(e1, s1) == TB_ERR_INVALID_HANDLE, "strict: record");
	CHECK(rt->stream_wait_event(s1, e0, 0) == TB_ERR_INVALID_HANDLE, "strict: wait");
	CHECK(rt->memcpy_async(dev1, host, BYTES, TB_MEMCPY_HOST_TO_DEVICE, s0) == TB_ERR_INVALID_VALUE, "strict: device 1's memory on device 0's stream");
	CHECK(rt->memcpy_async(dev0 + 8, host, 8, TB_MEMCPY_HOST_TO_DEVICE, s0) == 0, "strict: device 0's memory on its stream");
	CHECK(rt->set_device(1) == 0, "device 1");
	CHECK(rt->memcpy_async(dev1, host, BYTES, TB_MEMCPY_HOST_TO_DEVICE, s1) == 0, "strict: copy on the current device");
	CHECK(rt->event_record(e1, s1) == 0 && rt->event_record(e1, NULL) == 0, "strict: record on the current device");
	CHECK(rt->stream_wait_event(s1, e0, 0) == 0, "strict: wait on the current device");
	unsetenv("TB_FAKE_STRICT_DEVICE");
	CHECK(rt->device_synchronize() == 0 && rt->event_query(e1) == 0, "device 1 synchronized");
	CHECK(rt->set_device(0) == 0, "device 0");

	CHECK(rt->event_destroy(e0) == 0 && rt->event_destroy(e1) == 0, "event destroy");
	CHECK(rt->stream_destroy(s0) == 0 && rt->stream_destroy(s1) == 0, "stream destroy");
	CHECK(rt->free(dev0) == 0 && rt->free(dev1) == 0 && rt->host_free(host) == 0, "free");
	unsetenv("TB_FAKE_DEVICES");
	fake_close(&f, "devices");
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
	CHECK(tb_pad_stack(buf, lens, 3, 4, 3, 2, pad, 2) == 3, "pad stack does every sample");
	const uint8_t want[18] = {0, 1, 2, 3, 0xaa, 0xbb, 0xaa, 0xbb, 0xaa, 0xbb, 0xaa, 0xbb, 16, 17, 18, 19, 20, 21};
	CHECK(memcmp(buf, want, sizeof want) == 0, "pad stack");
	free(buf);
}

/* A bad index or length stops the kernel where it is, before any access
 * out of bounds (ASan would report one). */
static void test_kernel_bounds(void) {
	int p[3], np = paths(p);
	uint8_t src[3 * 40], dst[4 * 40];
	for (size_t i = 0; i < sizeof src; i++) {
		src[i] = (uint8_t)i;
	}
	for (int k = 0; k < np; k++) {
		for (int nt = 0; nt <= 1; nt++) {
			const int64_t good[4] = {2, 0, 1, 2};
			memset(dst, 0, sizeof dst);
			CHECK(tb_gather(p[k], dst, src, 3, good, 4, 40, nt) == 4, "gather path %d nt %d", p[k], nt);
			CHECK(memcmp(dst, src + 80, 40) == 0 && memcmp(dst + 40, src, 40) == 0, "gather path %d nt %d", p[k], nt);
			const int64_t bad[3][4] = {{0, 1, 3, 0}, {0, -1, 0, 0}, {INT64_MIN, 0, 0, 0}};
			const size_t at[3] = {2, 1, 0};
			for (int b = 0; b < 3; b++) {
				memset(dst, 0xee, sizeof dst);
				CHECK(tb_gather(p[k], dst, src, 3, bad[b], 4, 40, nt) == at[b], "gather stops at a bad index, case %d", b);
				CHECK(at[b] == 0 || memcmp(dst, src, 40) == 0, "rows before it are copied, case %d", b);
				CHECK(dst[at[b] * 40] == 0xee, "the bad row is not, case %d", b);
			}
		}
	}
	uint8_t buf[3 * 4 * 2], pad[2] = {0xaa, 0xbb};
	const int64_t lens[3][3] = {{1, 5, 0}, {1, -1, 0}, {INT64_MIN, 0, 0}};
	const size_t at[3] = {1, 1, 0};
	for (int b = 0; b < 3; b++) {
		memset(buf, 0, sizeof buf);
		CHECK(tb_pad_stack(buf, lens[b], 3, 4, 3, 2, pad, 2) == at[b], "pad stack stops at a bad length, case %d", b);
	}
}

int main(void) {
	const char *fake = getenv("TB_FAKE_CUDART");
	if (fake == NULL) {
		fprintf(stderr, "ctest: set TB_FAKE_CUDART to the fake runtime (make ctest does)\n");
		return 2;
	}
	test_open_errors();
	test_fake_runtime(fake);
	test_stream_wait_event(fake);
	test_legacy_stream(fake);
	test_devices(fake);
	test_kernels();
	test_kernel_bounds();
	return check_report();
}
