//go:build hipcheck

/* Compiled by `go build -tags hipcheck ./csrc/` (and make vet): checks the
 * hand-declared prototypes and constants of tb_runtime.h against ROCm's
 * real <hip/hip_runtime_api.h> (Debian's libamdhip64-dev). A mismatch is a
 * compile error naming the entry point. */
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>

/* Instantiate tb_runtime.h's prototypes with HIP's own types. */
#define TB_RUNTIME_TYPES
typedef hipError_t tb_err_t;
typedef hipMemcpyKind tb_memcpy_kind_t;
typedef hipStream_t tb_stream_t;
typedef hipEvent_t tb_event_t;
#include "tb_runtime.h"

#define TB_CHECK(field, cuda, hip, params)                                                  \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&hip), tb_err_t(*) params),      \
		       "tb_runtime.h: the prototype of " #hip " does not match hip_runtime_api.h");
TB_RUNTIME_API(TB_CHECK)
#undef TB_CHECK
#define TB_CHECK_STR(field, cuda, hip, params)                                              \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&hip), const char *(*)params),    \
		       "tb_runtime.h: the prototype of " #hip " does not match hip_runtime_api.h");
TB_RUNTIME_STR_API(TB_CHECK_STR)
#undef TB_CHECK_STR

/* The table declares these as int and void *: same size, same passing. GCC
 * gives HIP's error enums the type unsigned int. */
_Static_assert(sizeof(hipError_t) == sizeof(int), "hipError_t is not int-sized");
_Static_assert(sizeof(hipMemcpyKind) == sizeof(int), "hipMemcpyKind is not int-sized");
_Static_assert(sizeof(hipStream_t) == sizeof(void *), "hipStream_t is not a pointer");
_Static_assert(sizeof(hipEvent_t) == sizeof(void *), "hipEvent_t is not a pointer");

_Static_assert((int)hipSuccess == (int)TB_SUCCESS, "hipSuccess");
_Static_assert((int)hipErrorInvalidValue == (int)TB_ERR_INVALID_VALUE, "hipErrorInvalidValue");
_Static_assert((int)hipErrorNoDevice == (int)TB_ERR_NO_DEVICE, "hipErrorNoDevice");
_Static_assert((int)hipErrorInvalidDevice == (int)TB_ERR_INVALID_DEVICE, "hipErrorInvalidDevice");
_Static_assert((int)hipErrorInvalidHandle == (int)TB_ERR_INVALID_HANDLE, "hipErrorInvalidHandle");
_Static_assert((int)hipErrorNotReady == (int)TB_ERR_NOT_READY, "hipErrorNotReady");
_Static_assert((int)hipHostMallocPortable == (int)TB_HOST_ALLOC_PORTABLE, "hipHostMallocPortable");
_Static_assert((int)hipHostMallocWriteCombined == (int)TB_HOST_ALLOC_WRITE_COMBINED, "hipHostMallocWriteCombined");
_Static_assert((int)hipStreamDefault == (int)TB_STREAM_DEFAULT, "hipStreamDefault");
_Static_assert((int)hipStreamNonBlocking == (int)TB_STREAM_NON_BLOCKING, "hipStreamNonBlocking");
_Static_assert((int)hipEventDisableTiming == (int)TB_EVENT_DISABLE_TIMING, "hipEventDisableTiming");
_Static_assert((int)hipMemcpyHostToDevice == (int)TB_MEMCPY_HOST_TO_DEVICE, "hipMemcpyHostToDevice");
_Static_assert((int)hipMemcpyDeviceToHost == (int)TB_MEMCPY_DEVICE_TO_HOST, "hipMemcpyDeviceToHost");
