// Package collate provides the tensors and batch layouts of tensorbatch:
// element types (DType), per-sample schemas (Field, Schema), Tensor views
// over raw bytes, typed views (As) and the Layout that places every field
// of a batch at an aligned offset of one buffer.
//
// A Tensor never owns its memory: it is a view, valid as long as the buffer
// it was taken from. Tensors are little-endian and dense (row-major, no
// strides).
//
// The collation kernels (Gather, U8HWCToCHW, the half and bfloat16
// conversions, PadStack, FillNormal and FillUniform) run in C with the
// fastest kernels the CPU supports (AVX-512, AVX2, baseline; see
// AvailableKernels and TENSORBATCH_KERNELS) and give the same bits as
// their plain Go reference with every Kernels. Destinations are named dst and come first.
package collate
