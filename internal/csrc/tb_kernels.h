/* tb_kernels: collation kernels, each with a baseline path and AVX2 /
 * AVX-512 paths chosen by the caller (package collate, from cpuid). Every
 * path gives the same bits: floating point is done in one fixed order, with
 * no contraction into FMA (tb_kernels.c turns it off with a pragma,
 * as -ffp-contract=off would),
 * and the Go reference in collate follows the same order. */
#ifndef TB_KERNELS_H
#define TB_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* The kernels' implementations, numbered as Go's csrc.Kernels, whose 0 is
 * the Go reference (no C code). */
enum { TB_PATH_SCALAR = 1, TB_PATH_AVX2 = 2, TB_PATH_AVX512 = 3 };

/* Rows idx[0..n) of src (rows rows of row bytes) into dst, one after
 * another. nt: streaming stores, for write-combined or larger-than-cache
 * dst. Returns n, or the position of the first index outside [0, rows),
 * where it stops (the rows before it are copied). */
size_t tb_gather(int path, uint8_t *dst, const uint8_t *src, size_t rows, const int64_t *idx, size_t n, size_t row, int nt);

/* uint8 HWC (c channels, hw pixels) to float32 CHW: dst[ch*hw+p] =
 * (float)src[p*c+ch] * scale[ch] + bias[ch], a multiply then an add. */
void tb_u8hwc_to_f32chw(int path, float *dst, const uint8_t *src, size_t hw, size_t c, const float *scale, const float *bias);

/* IEEE half and bfloat16 conversions, round to nearest even. */
void tb_f32_to_f16(int path, uint16_t *dst, const float *src, size_t n);
void tb_f16_to_f32(int path, float *dst, const uint16_t *src, size_t n);
void tb_f32_to_bf16(int path, uint16_t *dst, const float *src, size_t n);
void tb_bf16_to_f32(int path, float *dst, const uint16_t *src, size_t n);

/* Pads n samples of a batch in place: sample i holds lens[i] rows of row
 * bytes at i*maxlen*row; they move to i*longest*row and rows
 * [lens[i], longest) are filled with the elem-byte pattern pad. The caller
 * ensures longest <= maxlen, n*maxlen*row bytes of buf and elem dividing
 * row. Returns n, or the first i whose lens[i] is outside [0, longest],
 * where it stops (the samples before it are done). */
size_t tb_pad_stack(uint8_t *buf, const int64_t *lens, size_t n, size_t maxlen, size_t longest, size_t row,
		    const uint8_t *pad, size_t elem);

/* Philox4x32-10 keyed by key, counter (block, stream): n float32 from
 * block first (4 values a block). normal: Box-Muller pairs; else uniform
 * in [0, 1). */
void tb_philox_fill(int path, float *dst, size_t n, uint64_t key, uint64_t stream, uint64_t first, int normal);

#endif
