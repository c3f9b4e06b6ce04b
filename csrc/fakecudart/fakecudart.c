/* fakecudart: a stand-in for libcudart on machines with no GPU, for tests.
 *
 * It exports the CUDA runtime symbols tensorbatch loads. "Device" memory is
 * host memory; each stream is a thread that runs its copies and event
 * records in order, later than they were issued, and reads a copy's source
 * only when it runs, as DMA does. A host buffer reused before its copy
 * completed therefore corrupts the device data instead of going unseen.
 *
 * Environment, read at each call:
 *   TB_FAKE_DEVICES=N        devices reported (default 1); 0 gives cudaErrorNoDevice
 *   TB_FAKE_NO_DRIVER=1      cudaGetDeviceCount returns 35 (insufficient driver)
 *   TB_FAKE_COPY_DELAY_US=N  each async copy runs N µs after the previous op (default 200)
 *   TB_FAKE_JITTER=1         the delay varies per copy (0..2N), so streams finish out of order
 *   TB_FAKE_FAIL=name=code   the call `name` returns `code` (e.g. cudaMalloc=2)
 *   TB_FAKE_NO_WC=1          cudaHostAlloc refuses cudaHostAllocWriteCombined (4) with 1
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NO_DRIVER = 35, NO_DEVICE = 100, NOT_READY = 600 };

static int env_int(const char *name, int def) {
	const char *v = getenv(name);
	return v && *v ? atoi(v) : def;
}

/* fail returns the code TB_FAKE_FAIL sets for call, or 0. */
static int fail(const char *call) {
	const char *v = getenv("TB_FAKE_FAIL");
	size_t n = strlen(call);
	if (v && strncmp(v, call, n) == 0 && v[n] == '=') {
		return atoi(v + n + 1);
	}
	return 0;
}

static atomic_long live_allocs;

/* tbfake_live_allocs reports host and device allocations not yet freed. */
long tbfake_live_allocs(void) { return atomic_load(&live_allocs); }

typedef struct event {
	atomic_ulong recorded, completed; /* sequence numbers */
} event;

typedef struct op {
	struct op *next;
	void *dst;
	const void *src;
	size_t n;
	event *ev;       /* an event record when set, else a copy */
	unsigned long seq;
} op;

typedef struct stream {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	op *head, *tail;
	int busy, closing;
	unsigned seed;
} stream;

static pthread_mutex_t event_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t event_cv = PTHREAD_COND_INITIALIZER;

static void sleep_us(long us) {
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
	}
}

static void *stream_main(void *arg) {
	stream *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (s->head == NULL && !s->closing) {
			pthread_cond_wait(&s->cv, &s->mu);
		}
		if (s->head == NULL) {
			break;
		}
		op *o = s->head;
		s->busy = 1;
		pthread_mutex_unlock(&s->mu);
		if (o->ev == NULL) {
			long delay = env_int("TB_FAKE_COPY_DELAY_US", 200);
			if (env_int("TB_FAKE_JITTER", 0)) {
				delay = delay > 0 ? rand_r(&s->seed) % (2 * delay + 1) : 0;
			}
			sleep_us(delay);
			memcpy(o->dst, o->src, o->n);
		} else {
			pthread_mutex_lock(&event_mu);
			atomic_store(&o->ev->completed, o->seq);
			pthread_cond_broadcast(&event_cv);
			pthread_mutex_unlock(&event_mu);
		}
		pthread_mutex_lock(&s->mu);
		s->head = o->next;
		if (s->head == NULL) {
			s->tail = NULL;
		}
		s->busy = 0;
		pthread_cond_broadcast(&s->cv);
		free(o);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static int enqueue(stream *s, op *o) {
	pthread_mutex_lock(&s->mu);
	if (s->tail) {
		s->tail->next = o;
	} else {
		s->head = o;
	}
	s->tail = o;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return OK;
}

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
	*count = n;
	return OK;
}

int cudaSetDevice(int device) {
	int n = 0;
	int err = cudaGetDeviceCount(&n);
	if (err) {
		return err;
	}
	return device < 0 || device >= n ? 101 : fail("cudaSetDevice");
}

static int alloc(void **p, size_t size, size_t align, const char *call) {
	if (p == NULL) {
		return INVALID_VALUE;
	}
	int err = fail(call);
	if (err) {
		return err;
	}
	if (posix_memalign(p, align, size ? size : 1) != 0) {
		return OUT_OF_MEMORY;
	}
	atomic_fetch_add(&live_allocs, 1);
	return OK;
}

static int release(void *p) {
	if (p != NULL) {
		free(p);
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
int cudaMalloc(void **p, size_t size) { return alloc(p, size, 256, "cudaMalloc"); }
int cudaFree(void *p) { return release(p); }

int cudaStreamCreateWithFlags(void **out, unsigned int flags) {
	(void)flags;
	if (out == NULL) {
		return INVALID_VALUE;
	}
	int err = fail("cudaStreamCreateWithFlags");
	if (err) {
		return err;
	}
	stream *s = calloc(1, sizeof *s);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->seed = (unsigned)(uintptr_t)s;
	pthread_create(&s->thread, NULL, stream_main, s);
	*out = s;
	return OK;
}

int cudaStreamSynchronize(void *sp) {
	stream *s = sp;
	if (s == NULL) {
		return OK;
	}
	pthread_mutex_lock(&s->mu);
	while (s->head != NULL || s->busy) {
		pthread_cond_wait(&s->cv, &s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return OK;
}

int cudaStreamDestroy(void *sp) {
	stream *s = sp;
	if (s == NULL) {
		return INVALID_VALUE;
	}
	pthread_mutex_lock(&s->mu);
	s->closing = 1; /* the thread drains the queue, then ends */
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
	return OK;
}

int cudaEventCreateWithFlags(void **out, unsigned int flags) {
	(void)flags;
	if (out == NULL) {
		return INVALID_VALUE;
	}
	event *e = calloc(1, sizeof *e);
	*out = e;
	return OK;
}

int cudaEventDestroy(void *e) {
	free(e);
	return OK;
}

int cudaEventRecord(void *ep, void *sp) {
	event *e = ep;
	if (e == NULL) {
		return INVALID_VALUE;
	}
	unsigned long seq = atomic_fetch_add(&e->recorded, 1) + 1;
	if (sp == NULL) {
		atomic_store(&e->completed, seq);
		return OK;
	}
	op *o = calloc(1, sizeof *o);
	o->ev = e;
	o->seq = seq;
	return enqueue(sp, o);
}

int cudaEventQuery(void *ep) {
	event *e = ep;
	if (e == NULL) {
		return INVALID_VALUE;
	}
	return atomic_load(&e->completed) == atomic_load(&e->recorded) ? OK : NOT_READY;
}

int cudaEventSynchronize(void *ep) {
	event *e = ep;
	if (e == NULL) {
		return INVALID_VALUE;
	}
	pthread_mutex_lock(&event_mu);
	while (atomic_load(&e->completed) != atomic_load(&e->recorded)) {
		pthread_cond_wait(&event_cv, &event_mu);
	}
	pthread_mutex_unlock(&event_mu);
	return OK;
}

int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *sp) {
	if ((dst == NULL || src == NULL) && n > 0) {
		return INVALID_VALUE;
	}
	if (kind < 0 || kind > 4) {
		return INVALID_VALUE;
	}
	int err = fail("cudaMemcpyAsync");
	if (err) {
		return err;
	}
	if (sp == NULL) {
		memcpy(dst, src, n);
		return OK;
	}
	op *o = calloc(1, sizeof *o);
	o->dst = dst;
	o->src = src;
	o->n = n;
	return enqueue(sp, o);
}

int cudaMemcpy(void *dst, const void *src, size_t n, int kind) {
	if ((dst == NULL || src == NULL) && n > 0) {
		return INVALID_VALUE;
	}
	if (kind < 0 || kind > 4) {
		return INVALID_VALUE;
	}
	memcpy(dst, src, n);
	return OK;
}

const char *cudaGetErrorString(int err) {
	switch (err) {
	case OK: return "no error";
	case INVALID_VALUE: return "invalid argument";
	case OUT_OF_MEMORY: return "out of memory";
	case NO_DRIVER: return "CUDA driver version is insufficient for CUDA runtime version";
	case NO_DEVICE: return "no CUDA-capable device is detected";
	case 101: return "invalid device ordinal";
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
	case 101: return "cudaErrorInvalidDevice";
	case NOT_READY: return "cudaErrorNotReady";
	default: return "cudaErrorUnknown";
	}
}
