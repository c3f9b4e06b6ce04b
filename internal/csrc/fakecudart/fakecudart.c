/* fakecudart: a stand-in for libcudart on machines with no GPU, for tests.
 *
 * It exports the CUDA runtime symbols tensorbatch loads. "Device" memory is
 * host memory; each stream is a thread that runs its operations in order,
 * later than they were issued, and a copy reads its source only when it
 * runs, as DMA does. Memory reused before the stream work that reads it has
 * completed therefore shows as corrupted data instead of going unseen.
 *
 * Semantics modelled (CUDA's, which HIP shares):
 *   - cudaMemcpyAsync, cudaEventRecord and cudaStreamWaitEvent queue an
 *     operation on the stream; a copy takes TB_FAKE_COPY_DELAY_US once it
 *     starts, in both directions.
 *   - cudaEventRecord captures the work queued on the stream so far; query,
 *     synchronize and waits see the record that was last made when they
 *     were called. An event never recorded is complete.
 *   - cudaStreamWaitEvent(s, e, 0): the work queued on s afterwards runs
 *     after e's current record has completed, without blocking the host.
 *   - Stream NULL is the legacy default stream of the calling thread's
 *     current device (a thread of its own, made at first use). An operation
 *     queued on it first waits for the work already queued on every
 *     blocking stream of the device (flags 0, and cudaStreamCreate), and an
 *     operation queued on a blocking stream first waits for the work already
 *     queued on it. Non-blocking streams (flag 1) do not synchronize with
 *     it. cudaMemcpy is a copy on the legacy stream that the host waits for.
 *   - The current device is per OS thread (cudaSetDevice, default 0).
 *     Streams, events and cudaMalloc memory belong to the device current at
 *     their creation. cudaEventRecord returns cudaErrorInvalidResourceHandle
 *     (400) when the event's device is not the stream's (for stream NULL,
 *     the current device's). As in CUDA, a copy or a wait issued on a stream
 *     of another device than the current one succeeds, unless
 *     TB_FAKE_STRICT_DEVICE is set.
 *   - cudaStreamDestroy waits for the stream's work; cudaEventDestroy of an
 *     event whose record is pending returns at once, the record completes
 *     later. cudaDeviceSynchronize waits for every stream of the device.
 *
 * Environment, read at each call:
 *   TB_FAKE_DEVICES=N        devices reported (default 1, at most 16); 0 gives cudaErrorNoDevice
 *   TB_FAKE_NO_DRIVER=1      cudaGetDeviceCount returns 35 (insufficient driver)
 *   TB_FAKE_COPY_DELAY_US=N  each async copy takes N µs once it starts (default 200),
 *                            read when the copy is issued; cudaMemcpy takes no time
 *   TB_FAKE_JITTER=1         the delay varies per copy (0..2N), so streams finish out of order
 *   TB_FAKE_FAIL=name=code   the call `name` returns `code` (e.g. cudaMalloc=2)
 *   TB_FAKE_NO_WC=1          cudaHostAlloc refuses cudaHostAllocWriteCombined (4) with 1
 *   TB_FAKE_STRICT_DEVICE=1  stricter than CUDA, to check that callers make the stream's
 *                            device current: cudaMemcpyAsync, cudaEventRecord and
 *                            cudaStreamWaitEvent on a stream of another device than the
 *                            current one return 400, and cudaMemcpyAsync to or from
 *                            cudaMalloc memory of another device than the stream's returns 1
 *
 * Test hooks: tbfake_live_allocs, tbfake_live_streams and tbfake_live_events
 * count what was made and not yet freed or destroyed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Windows (mingw-w64 with winpthreads) has no posix_memalign. */
#ifdef _WIN32
#include <malloc.h>
#include <windows.h>
#define aligned_alloc_(p, align, size) ((*(p) = _aligned_malloc((size), (align))) ? 0 : ENOMEM)
#define aligned_free_ _aligned_free
#else
#define aligned_alloc_ posix_memalign
#define aligned_free_ free
#endif

enum {
	OK = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	NO_DRIVER = 35,
	NO_DEVICE = 100,
	INVALID_DEVICE = 101,
	INVALID_HANDLE = 400,
	NOT_READY = 600,
};

enum { MAX_DEVICES = 16, STREAM_NON_BLOCKING = 1 };

/* env returns the variable's value (in buf), or NULL. On Windows it reads
 * the process environment, which Go's os.Setenv changes, not the copy the
 * C runtime took at start. */
static const char *env(const char *name, char *buf, size_t size) {
#ifdef _WIN32
	DWORD n = GetEnvironmentVariableA(name, buf, (DWORD)size);
	return n > 0 && n < size ? buf : NULL;
#else
	(void)buf;
	(void)size;
	return getenv(name);
#endif
}

static int env_int(const char *name, int def) {
	char buf[64];
	const char *v = env(name, buf, sizeof buf);
	return v && *v ? atoi(v) : def;
}

/* xorshift is a small PRNG for the jitter (rand_r is not on every OS). */
static unsigned xorshift(unsigned *state) {
	unsigned x = *state;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *state = x;
}

/* fail returns the code TB_FAKE_FAIL sets for call, or 0. */
static int fail(const char *call) {
	char buf[256];
	const char *v = env("TB_FAKE_FAIL", buf, sizeof buf);
	size_t n = strlen(call);
	if (v && strncmp(v, call, n) == 0 && v[n] == '=') {
		return atoi(v + n + 1);
	}
	return 0;
}

static atomic_long live_allocs, live_streams, live_events;

/* tbfake_live_allocs reports host and device allocations not yet freed. */
long tbfake_live_allocs(void) { return atomic_load(&live_allocs); }

/* tbfake_live_streams reports streams created and not yet destroyed (the
 * legacy streams are not counted). */
long tbfake_live_streams(void) { return atomic_load(&live_streams); }

/* tbfake_live_events reports events created and not yet destroyed. */
long tbfake_live_events(void) { return atomic_load(&live_events); }

/* The device current on this OS thread. */
static _Thread_local int current_device;

/* mu guards every stream queue, fence, event and the device memory table;
 * cv is broadcast whenever a queue grows, an operation completes or a
 * stream is asked to close. One lock is plenty for a test fake. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* A fence is done once the operation it belongs to has run. The operation,
 * its stream (as the last one queued), an event (as its last record) and
 * waiting operations each hold a reference. */
typedef struct fence {
	int done, refs;
} fence;

static fence *fence_new(void) {
	fence *f = calloc(1, sizeof *f);
	f->refs = 1;
	return f;
}

static fence *fence_ref(fence *f) {
	if (f != NULL) {
		f->refs++;
	}
	return f;
}

static void fence_unref(fence *f) {
	if (f != NULL && --f->refs == 0) {
		free(f);
	}
}

/* fence_wait blocks until f is done; mu is held. */
static void fence_wait(fence *f) {
	while (f != NULL && !f->done) {
		pthread_cond_wait(&cv, &mu);
	}
}

enum op_kind { COPY, MARK, WAIT };

typedef struct op {
	struct op *next;
	enum op_kind kind;
	void *dst; /* COPY */
	const void *src;
	size_t n;
	long delay_us;
	fence *wait; /* WAIT: runs once this is done */
	fence *done; /* done once the operation has run */
} op;

typedef struct stream {
	struct stream *next_all; /* in streams, unless legacy */
	pthread_t thread;
	op *head, *tail;
	fence *last; /* of the last operation queued; NULL before the first */
	int device, blocking, legacy, closing;
	unsigned seed;
} stream;

static stream *streams;              /* the user's streams */
static stream *legacy[MAX_DEVICES]; /* the legacy default streams, made at first use */

typedef struct event {
	fence *last; /* of the last record; NULL before the first */
	int device;
} event;

typedef struct dev_alloc {
	char *p;
	size_t n;
	int device;
} dev_alloc;

static dev_alloc *dev_allocs; /* cudaMalloc memory not yet freed */
static size_t ndev_allocs, cap_dev_allocs;

static void sleep_us(long us) {
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
	}
}

static void *stream_main(void *arg) {
	stream *s = arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (s->head == NULL && !s->closing) {
			pthread_cond_wait(&cv, &mu);
		}
		if (s->head == NULL) {
			break;
		}
		op *o = s->head;
		if (o->kind == WAIT) {
			fence_wait(o->wait);
		} else if (o->kind == COPY) {
			pthread_mutex_unlock(&mu);
			sleep_us(o->delay_us);
			memcpy(o->dst, o->src, o->n);
			pthread_mutex_lock(&mu);
		}
		s->head = o->next;
		if (s->head == NULL) {
			s->tail = NULL;
		}
		o->done->done = 1;
		fence_unref(o->done);
		fence_unref(o->wait);
		free(o);
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* stream_new makes a stream and starts its thread; mu is held. */
static stream *stream_new(int device, int blocking, int is_legacy) {
	stream *s = calloc(1, sizeof *s);
	if (s == NULL) {
		return NULL;
	}
	s->device = device;
	s->blocking = blocking;
	s->legacy = is_legacy;
	s->seed = (unsigned)(uintptr_t)s | 1; /* xorshift needs a non-zero state */
	if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

/* stream_free ends s's thread once its queue is drained and frees it; mu
 * is not held. */
static void stream_free(stream *s) {
	pthread_mutex_lock(&mu);
	s->closing = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(s->thread, NULL);
	pthread_mutex_lock(&mu);
	fence_unref(s->last);
	pthread_mutex_unlock(&mu);
	free(s);
}

/* resolve returns the stream a handle names: NULL is the legacy stream of
 * the current device. mu is held. */
static stream *resolve(void *sp) {
	if (sp != NULL) {
		return sp;
	}
	int d = current_device;
	if (legacy[d] == NULL) {
		legacy[d] = stream_new(d, 1, 1);
	}
	return legacy[d];
}

/* push appends o to s's queue; mu is held. */
static void push(stream *s, op *o) {
	o->done = fence_new();
	if (s->tail) {
		s->tail->next = o;
	} else {
		s->head = o;
	}
	s->tail = o;
	fence_unref(s->last);
	s->last = fence_ref(o->done);
	pthread_cond_broadcast(&cv);
}

/* push_wait makes s wait for f, unless f is done already; mu is held. */
static void push_wait(stream *s, fence *f) {
	if (f == NULL || f->done) {
		return;
	}
	op *o = calloc(1, sizeof *o);
	o->kind = WAIT;
	o->wait = fence_ref(f);
	push(s, o);
}

/* enqueue queues o on s after the legacy stream's implicit synchronization
 * and returns o's fence; mu is held. */
static fence *enqueue(stream *s, op *o) {
	if (s->legacy) {
		for (stream *b = streams; b != NULL; b = b->next_all) {
			if (b->blocking && b->device == s->device) {
				push_wait(s, b->last);
			}
		}
	} else if (s->blocking && legacy[s->device] != NULL) {
		push_wait(s, legacy[s->device]->last);
	}
	push(s, o);
	return o->done;
}

/* strict_stream returns 400 when TB_FAKE_STRICT_DEVICE is set and s is not a
 * stream of the current device. */
static int strict_stream(const stream *s) {
	return env_int("TB_FAKE_STRICT_DEVICE", 0) && s->device != current_device ? INVALID_HANDLE : OK;
}

/* device_of returns the device of the cudaMalloc memory p points into, or
 * -1; mu is held. */
static int device_of(const void *p) {
	for (size_t i = 0; i < ndev_allocs; i++) {
		if ((const char *)p >= dev_allocs[i].p && (const char *)p < dev_allocs[i].p + dev_allocs[i].n) {
			return dev_allocs[i].device;
		}
	}
	return -1;
}

/* The library may be unloaded (dlclose): the legacy streams' threads end
 * first. The user's streams are the user's to destroy. */
#ifdef _WIN32
/* Windows runs destructors inside FreeLibrary under the loader lock, where
 * joining the stream threads deadlocks (a thread needs that lock to exit).
 * So the DLL pins itself: it stays loaded until the process exits, which
 * ends its threads. */
__attribute__((constructor)) static void fake_pin(void) {
	HMODULE self;
	GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_PIN | GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS,
			   (LPCWSTR)(uintptr_t)&fake_pin, &self);
}
#else
__attribute__((destructor)) static void fake_unload(void) {
	for (int d = 0; d < MAX_DEVICES; d++) {
		pthread_mutex_lock(&mu);
		stream *s = legacy[d];
		legacy[d] = NULL;
		pthread_mutex_unlock(&mu);
		if (s != NULL) {
			stream_free(s);
		}
	}
	free(dev_allocs);
	dev_allocs = NULL;
	ndev_allocs = cap_dev_allocs = 0;
}
#endif

int cudaGetDeviceCount(int *count) {
	if (count == NULL) {
		return INVALID_VALUE;
	}
	*count = 0;
	if (env_int("TB_FAKE_NO_DRIVER", 0)) {
		return NO_DRIVER;
	}
	int n = env_int("TB_FAKE_DEVICES", 1);
	if (n <= 0) {
		return NO_DEVICE;
	}
	*count = n < MAX_DEVICES ? n : MAX_DEVICES;
	return OK;
}

int cudaSetDevice(int device) {
	int n = 0;
	int err = cudaGetDeviceCount(&n);
	if (err) {
		return err;
	}
	if (device < 0 || device >= n) {
		return INVALID_DEVICE;
	}
	err = fail("cudaSetDevice");
	if (err == OK) {
		current_device = device;
	}
	return err;
}

int cudaDeviceSynchronize(void) {
	int err = fail("cudaDeviceSynchronize");
	if (err) {
		return err;
	}
	int d = current_device;
	pthread_mutex_lock(&mu);
	size_t n = 1;
	for (stream *s = streams; s != NULL; s = s->next_all) {
		n++;
	}
	fence **fs = calloc(n, sizeof *fs);
	size_t k = 0;
	if (legacy[d] != NULL) {
		fs[k++] = fence_ref(legacy[d]->last);
	}
	for (stream *s = streams; s != NULL; s = s->next_all) {
		if (s->device == d) {
			fs[k++] = fence_ref(s->last);
		}
	}
	for (size_t i = 0; i < k; i++) {
		fence_wait(fs[i]);
		fence_unref(fs[i]);
	}
	pthread_mutex_unlock(&mu);
	free(fs);
	return OK;
}

static int alloc(void **p, size_t size, size_t align, const char *call) {
	if (p == NULL) {
		return INVALID_VALUE;
	}
	int err = fail(call);
	if (err) {
		return err;
	}
	if (aligned_alloc_(p, align, size ? size : 1) != 0) {
		return OUT_OF_MEMORY;
	}
	atomic_fetch_add(&live_allocs, 1);
	return OK;
}

static int release(void *p) {
	if (p != NULL) {
		aligned_free_(p);
		atomic_fetch_sub(&live_allocs, 1);
	}
	return OK;
}

int cudaHostAlloc(void **p, size_t size, unsigned int flags) {
	if ((flags & 4) && env_int("TB_FAKE_NO_WC", 0)) {
		return INVALID_VALUE;
	}
	return alloc(p, size, 4096, "cudaHostAlloc");
}

int cudaFreeHost(void *p) { return release(p); }

int cudaMalloc(void **p, size_t size) {
	int err = alloc(p, size, 256, "cudaMalloc");
	if (err) {
		return err;
	}
	pthread_mutex_lock(&mu);
	if (ndev_allocs == cap_dev_allocs) {
		size_t cap = cap_dev_allocs ? 2 * cap_dev_allocs : 16;
		dev_alloc *a = realloc(dev_allocs, cap * sizeof *a);
		if (a == NULL) {
			pthread_mutex_unlock(&mu);
			release(*p);
			*p = NULL;
			return OUT_OF_MEMORY;
		}
		dev_allocs = a;
		cap_dev_allocs = cap;
	}
	dev_allocs[ndev_allocs++] = (dev_alloc){*p, size ? size : 1, current_device};
	pthread_mutex_unlock(&mu);
	return OK;
}

int cudaFree(void *p) {
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < ndev_allocs; i++) {
		if (dev_allocs[i].p == p) {
			dev_allocs[i] = dev_allocs[--ndev_allocs];
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return release(p);
}

int cudaStreamCreateWithFlags(void **out, unsigned int flags) {
	if (out == NULL || (flags & ~(unsigned)STREAM_NON_BLOCKING) != 0) {
		return INVALID_VALUE;
	}
	int err = fail("cudaStreamCreateWithFlags");
	if (err) {
		return err;
	}
	pthread_mutex_lock(&mu);
	stream *s = stream_new(current_device, !(flags & STREAM_NON_BLOCKING), 0);
	if (s != NULL) {
		s->next_all = streams;
		streams = s;
	}
	pthread_mutex_unlock(&mu);
	if (s == NULL) {
		return OUT_OF_MEMORY;
	}
	atomic_fetch_add(&live_streams, 1);
	*out = s;
	return OK;
}

/* cudaStreamCreate makes a blocking stream. */
int cudaStreamCreate(void **out) { return cudaStreamCreateWithFlags(out, 0); }

int cudaStreamSynchronize(void *sp) {
	pthread_mutex_lock(&mu);
	stream *s = resolve(sp);
	fence *f = fence_ref(s ? s->last : NULL);
	fence_wait(f);
	fence_unref(f);
	pthread_mutex_unlock(&mu);
	return OK;
}

int cudaStreamDestroy(void *sp) {
	stream *s = sp;
	if (s == NULL) {
		return INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	for (stream **p = &streams; *p != NULL; p = &(*p)->next_all) {
		if (*p == s) {
			*p = s->next_all;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	stream_free(s); /* waits for the queue to drain */
	atomic_fetch_sub(&live_streams, 1);
	return OK;
}

int cudaEventCreateWithFlags(void **out, unsigned int flags) {
	(void)flags;
	if (out == NULL) {
		return INVALID_VALUE;
	}
	event *e = calloc(1, sizeof *e);
	if (e == NULL) {
		return OUT_OF_MEMORY;
	}
	e->device = current_device;
	atomic_fetch_add(&live_events, 1);
	*out = e;
	return OK;
}

int cudaEventDestroy(void *ep) {
	event *e = ep;
	if (e == NULL) {
		return INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	fence_unref(e->last); /* a pending record still holds it */
	pthread_mutex_unlock(&mu);
	free(e);
	atomic_fetch_sub(&live_events, 1);
	return OK;
}

int cudaEventRecord(void *ep, void *sp) {
	event *e = ep;
	if (e == NULL) {
		return INVALID_VALUE;
	}
	int err = fail("cudaEventRecord");
	if (err) {
		return err;
	}
	pthread_mutex_lock(&mu);
	stream *s = resolve(sp);
	if (s == NULL) {
		err = OUT_OF_MEMORY;
	} else if (s->device != e->device) {
		err = INVALID_HANDLE;
	} else {
		err = strict_stream(s);
	}
	if (err == OK) {
		op *o = calloc(1, sizeof *o);
		o->kind = MARK;
		fence *f = enqueue(s, o);
		fence_unref(e->last);
		e->last = fence_ref(f);
	}
	pthread_mutex_unlock(&mu);
	return err;
}

int cudaEventQuery(void *ep) {
	event *e = ep;
	if (e == NULL) {
		return INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	int done = e->last == NULL || e->last->done;
	pthread_mutex_unlock(&mu);
	return done ? OK : NOT_READY;
}

int cudaEventSynchronize(void *ep) {
	event *e = ep;
	if (e == NULL) {
		return INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	fence *f = fence_ref(e->last);
	fence_wait(f);
	fence_unref(f);
	pthread_mutex_unlock(&mu);
	return OK;
}

int cudaStreamWaitEvent(void *sp, void *ep, unsigned int flags) {
	event *e = ep;
	if (e == NULL) {
		return INVALID_HANDLE;
	}
	if (flags != 0) {
		return INVALID_VALUE;
	}
	int err = fail("cudaStreamWaitEvent");
	if (err) {
		return err;
	}
	pthread_mutex_lock(&mu);
	stream *s = resolve(sp);
	err = s == NULL ? OUT_OF_MEMORY : strict_stream(s);
	if (err == OK && e->last != NULL && !e->last->done) {
		op *o = calloc(1, sizeof *o);
		o->kind = WAIT;
		o->wait = fence_ref(e->last);
		enqueue(s, o);
	}
	pthread_mutex_unlock(&mu);
	return err;
}

static int check_copy(void *dst, const void *src, size_t n, int kind) {
	if ((dst == NULL || src == NULL) && n > 0) {
		return INVALID_VALUE;
	}
	if (kind < 0 || kind > 4) {
		return INVALID_VALUE;
	}
	return OK;
}

int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *sp) {
	int err = check_copy(dst, src, n, kind);
	if (err) {
		return err;
	}
	err = fail("cudaMemcpyAsync");
	if (err) {
		return err;
	}
	long delay = env_int("TB_FAKE_COPY_DELAY_US", 200);
	int jitter = env_int("TB_FAKE_JITTER", 0);
	int strict = env_int("TB_FAKE_STRICT_DEVICE", 0);
	pthread_mutex_lock(&mu);
	stream *s = resolve(sp);
	err = s == NULL ? OUT_OF_MEMORY : strict_stream(s);
	if (err == OK && strict) {
		int dd = device_of(dst), sd = device_of(src);
		if ((dd >= 0 && dd != s->device) || (sd >= 0 && sd != s->device)) {
			err = INVALID_VALUE;
		}
	}
	if (err == OK) {
		op *o = calloc(1, sizeof *o);
		o->kind = COPY;
		o->dst = dst;
		o->src = src;
		o->n = n;
		o->delay_us = jitter && delay > 0 ? (long)(xorshift(&s->seed) % (unsigned)(2 * delay + 1)) : delay;
		enqueue(s, o);
	}
	pthread_mutex_unlock(&mu);
	return err;
}

int cudaMemcpy(void *dst, const void *src, size_t n, int kind) {
	int err = check_copy(dst, src, n, kind);
	if (err) {
		return err;
	}
	err = fail("cudaMemcpy");
	if (err) {
		return err;
	}
	pthread_mutex_lock(&mu);
	stream *s = resolve(NULL);
	if (s == NULL) {
		pthread_mutex_unlock(&mu);
		return OUT_OF_MEMORY;
	}
	op *o = calloc(1, sizeof *o);
	o->kind = COPY;
	o->dst = dst;
	o->src = src;
	o->n = n;
	fence *f = fence_ref(enqueue(s, o));
	fence_wait(f);
	fence_unref(f);
	pthread_mutex_unlock(&mu);
	return OK;
}

const char *cudaGetErrorString(int err) {
	switch (err) {
	case OK: return "no error";
	case INVALID_VALUE: return "invalid argument";
	case OUT_OF_MEMORY: return "out of memory";
	case NO_DRIVER: return "CUDA driver version is insufficient for CUDA runtime version";
	case NO_DEVICE: return "no CUDA-capable device is detected";
	case INVALID_DEVICE: return "invalid device ordinal";
	case INVALID_HANDLE: return "invalid resource handle";
	case NOT_READY: return "device not ready";
	default: return "unknown error";
	}
}

const char *cudaGetErrorName(int err) {
	switch (err) {
	case OK: return "cudaSuccess";
	case INVALID_VALUE: return "cudaErrorInvalidValue";
	case OUT_OF_MEMORY: return "cudaErrorMemoryAllocation";
	case NO_DRIVER: return "cudaErrorInsufficientDriver";
	case NO_DEVICE: return "cudaErrorNoDevice";
	case INVALID_DEVICE: return "cudaErrorInvalidDevice";
	case INVALID_HANDLE: return "cudaErrorInvalidResourceHandle";
	case NOT_READY: return "cudaErrorNotReady";
	default: return "cudaErrorUnknown";
	}
}
