/* tb_runtime: a GPU runtime (CUDA's libcudart or HIP's libamdhip64) loaded
 * at run time with dlopen (LoadLibrary on Windows: cudart64_*.dll,
 * amdhip64*.dll) into a table of function pointers, the same on every OS.
 *
 * The prototypes are declared here by hand, "just enough" of them, so no GPU
 * headers are needed to build. Every entry point is listed once, in
 * TB_RUNTIME_API; the table, both name tables and (with -tags hipcheck) the
 * compile-time check against the real <hip/hip_runtime_api.h> are generated
 * from that list. A symbol missing from the library fails tb_runtime_open,
 * never a later call. */
#ifndef TB_RUNTIME_H
#define TB_RUNTIME_H

#include <stddef.h>

/* The ABI types of the runtime APIs. Error codes and memcpy kinds are C
 * enums (int-sized), streams and events opaque struct pointers; stream NULL
 * is the legacy default stream of the calling thread's current device (the
 * entry points loaded here are never the per-thread-default-stream _ptsz
 * variants). hipcheck.c defines TB_RUNTIME_TYPES and the real types
 * instead. */
#ifndef TB_RUNTIME_TYPES
typedef int tb_err_t;
typedef int tb_memcpy_kind_t;
typedef void *tb_stream_t;
typedef void *tb_event_t;
#endif

/* Constants shared by CUDA and HIP (same values in both APIs). */
enum {
	TB_SUCCESS = 0,
	TB_ERR_INVALID_VALUE = 1,
	TB_ERR_INSUFFICIENT_DRIVER = 35, /* CUDA: no driver */
	TB_ERR_NO_DEVICE = 100,
	TB_ERR_INVALID_DEVICE = 101,
	TB_ERR_INVALID_HANDLE = 400, /* CUDA: cudaErrorInvalidResourceHandle */
	TB_ERR_NOT_READY = 600,
	TB_HOST_ALLOC_PORTABLE = 0x1,
	TB_HOST_ALLOC_WRITE_COMBINED = 0x4,
	TB_STREAM_DEFAULT = 0x0, /* blocking: synchronizes with the legacy default stream */
	TB_STREAM_NON_BLOCKING = 0x1,
	TB_EVENT_DISABLE_TIMING = 0x2,
	TB_MEMCPY_HOST_TO_DEVICE = 1,
	TB_MEMCPY_DEVICE_TO_HOST = 2,
};

/* X(field, CUDA symbol, HIP symbol, parameters): every call returns tb_err_t. */
#define TB_RUNTIME_API(X)                                                                   \
	X(get_device_count, cudaGetDeviceCount, hipGetDeviceCount, (int *count))                \
	X(set_device, cudaSetDevice, hipSetDevice, (int device))                                \
	X(device_synchronize, cudaDeviceSynchronize, hipDeviceSynchronize, (void))              \
	X(host_alloc, cudaHostAlloc, hipHostMalloc, (void **ptr, size_t size, unsigned int flags)) \
	X(host_free, cudaFreeHost, hipHostFree, (void *ptr))                                    \
	X(malloc, cudaMalloc, hipMalloc, (void **ptr, size_t size))                             \
	X(free, cudaFree, hipFree, (void *ptr))                                                 \
	X(stream_create, cudaStreamCreateWithFlags, hipStreamCreateWithFlags,                   \
	  (tb_stream_t * stream, unsigned int flags))                                           \
	X(stream_destroy, cudaStreamDestroy, hipStreamDestroy, (tb_stream_t stream))            \
	X(stream_synchronize, cudaStreamSynchronize, hipStreamSynchronize, (tb_stream_t stream)) \
	X(stream_wait_event, cudaStreamWaitEvent, hipStreamWaitEvent,                           \
	  (tb_stream_t stream, tb_event_t event, unsigned int flags))                           \
	X(event_create, cudaEventCreateWithFlags, hipEventCreateWithFlags,                      \
	  (tb_event_t * event, unsigned int flags))                                             \
	X(event_destroy, cudaEventDestroy, hipEventDestroy, (tb_event_t event))                 \
	X(event_record, cudaEventRecord, hipEventRecord, (tb_event_t event, tb_stream_t stream)) \
	X(event_query, cudaEventQuery, hipEventQuery, (tb_event_t event))                       \
	X(event_synchronize, cudaEventSynchronize, hipEventSynchronize, (tb_event_t event))     \
	X(memcpy_async, cudaMemcpyAsync, hipMemcpyAsync,                                        \
	  (void *dst, const void *src, size_t count, tb_memcpy_kind_t kind, tb_stream_t stream)) \
	X(memcpy, cudaMemcpy, hipMemcpy, (void *dst, const void *src, size_t count, tb_memcpy_kind_t kind))

/* X(field, CUDA symbol, HIP symbol, parameters): these return a string. */
#define TB_RUNTIME_STR_API(X)                                                   \
	X(get_error_string, cudaGetErrorString, hipGetErrorString, (tb_err_t error)) \
	X(get_error_name, cudaGetErrorName, hipGetErrorName, (tb_err_t error))

enum { TB_KIND_CUDA = 1, TB_KIND_HIP = 2 };

typedef struct tb_runtime {
	int kind;
	void *lib;
#define TB_FIELD(field, cuda, hip, params) tb_err_t(*field) params;
	TB_RUNTIME_API(TB_FIELD)
#undef TB_FIELD
#define TB_STR_FIELD(field, cuda, hip, params) const char *(*field) params;
	TB_RUNTIME_STR_API(TB_STR_FIELD)
#undef TB_STR_FIELD
} tb_runtime;

/* tb_runtime_open loads the library at path as a runtime of kind and fills
 * rt. On failure it returns -1 and writes why into err (dlopen's message or
 * the missing symbol); rt is then left closed. */
int tb_runtime_open(tb_runtime *rt, int kind, const char *path, char *err, size_t errlen);

/* tb_runtime_close unloads the library. */
void tb_runtime_close(tb_runtime *rt);

/* tb_runtime_symbols returns the number of entry points in the table. */
int tb_runtime_symbols(void);

#endif
