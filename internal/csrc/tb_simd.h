/* tb_simd: what the C files that must match a Go reference bit for bit
 * (tb_kernels.c, the image kernels) say first, before any other include.
 *
 * Floating point is never contracted into FMA, which rounds once where the
 * Go reference rounds twice, whatever the compiler and its defaults (GCC's
 * GNU modes and clang contract; GCC's target("avx512f") enables FMA). The
 * flag that says so, -ffp-contract=off, is not on cgo's allowlist for
 * #cgo CFLAGS, so these pragmas say it for every build of the file.
 *
 * The SIMD paths are x86-64 only; elsewhere (arm64, or -DTB_NO_SIMD, which
 * make vet uses to compile-check that build) every path runs the baseline
 * code, and package collate offers only go and scalar. */
#ifndef TB_SIMD_H
#define TB_SIMD_H

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#if defined(__x86_64__) && !defined(TB_NO_SIMD)
#define TB_X86 1
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2,f16c")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))
#endif

#endif
