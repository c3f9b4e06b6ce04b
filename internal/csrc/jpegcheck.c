//go:build jpegcheck

/* Compiled by `go build -tags jpegcheck ./csrc/` (and make vet): checks
 * tb_jpeg.h's hand-declared structs, constants and prototypes against the
 * real <jpeglib.h> and <jerror.h> (Debian's libjpeg62-turbo-dev). A
 * mismatch is a compile error naming the field or entry point. */
#include <stddef.h>
#include <stdio.h>

#include <jpeglib.h>
#include <jerror.h>

#define TB_JPEG_TYPES
typedef struct jpeg_decompress_struct tb_jpeg_decompress;
typedef struct jpeg_error_mgr tb_jpeg_error_mgr;
typedef JSAMPARRAY tb_jsamparray;
#include "tb_jpeg.h"

_Static_assert((int)JPEG_LIB_VERSION == (int)TB_JPEG_LIB_VERSION, "JPEG_LIB_VERSION");
_Static_assert(sizeof(boolean) == sizeof(tb_jboolean), "boolean");
_Static_assert(sizeof(JDIMENSION) == sizeof(unsigned int), "JDIMENSION");
_Static_assert(sizeof(J_COLOR_SPACE) == sizeof(int), "J_COLOR_SPACE");
_Static_assert(sizeof(JSAMPLE) == 1, "8-bit JSAMPLE");

#define TB_CHECK(field, sym, ret, params)                                                   \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&sym), ret(*) params),         \
		       "tb_jpeg.h: the prototype of " #sym " does not match jpeglib.h");
TB_JPEG_API(TB_CHECK)
#undef TB_CHECK

#define SAME(type, mirror, f)                                                                           \
	_Static_assert(offsetof(type, f) == offsetof(mirror, f), "tb_jpeg.h: offset of " #type "." #f);     \
	_Static_assert(sizeof(((type *)0)->f) == sizeof(((mirror *)0)->f), "tb_jpeg.h: size of " #type "." #f);

_Static_assert(sizeof(struct jpeg_error_mgr) == sizeof(struct tb_jpeg_error_mgr_s), "sizeof jpeg_error_mgr");
#define E(f) SAME(struct jpeg_error_mgr, struct tb_jpeg_error_mgr_s, f)
E(error_exit) E(emit_message) E(output_message) E(format_message) E(reset_error_mgr) E(msg_code) E(msg_parm)
E(trace_level) E(num_warnings) E(jpeg_message_table) E(last_jpeg_message) E(addon_message_table)
E(first_addon_message) E(last_addon_message)
#undef E

_Static_assert(sizeof(struct jpeg_decompress_struct) == sizeof(struct tb_jpeg_decompress_s), "sizeof jpeg_decompress_struct");
#define D(f) SAME(struct jpeg_decompress_struct, struct tb_jpeg_decompress_s, f)
D(err) D(mem) D(progress) D(client_data) D(is_decompressor) D(global_state) D(src) D(image_width) D(image_height)
D(num_components) D(jpeg_color_space) D(out_color_space) D(scale_num) D(scale_denom) D(output_gamma)
D(buffered_image) D(raw_data_out) D(dct_method) D(do_fancy_upsampling) D(do_block_smoothing) D(quantize_colors)
D(dither_mode) D(two_pass_quantize) D(desired_number_of_colors) D(enable_1pass_quant) D(enable_external_quant)
D(enable_2pass_quant) D(output_width) D(output_height) D(out_color_components) D(output_components)
D(rec_outbuf_height) D(actual_number_of_colors) D(colormap) D(output_scanline) D(input_scan_number)
D(input_iMCU_row) D(output_scan_number) D(output_iMCU_row) D(coef_bits) D(quant_tbl_ptrs) D(dc_huff_tbl_ptrs)
D(ac_huff_tbl_ptrs) D(data_precision) D(comp_info) D(progressive_mode) D(arith_code) D(arith_dc_L) D(arith_dc_U)
D(arith_ac_K) D(restart_interval) D(saw_JFIF_marker) D(JFIF_major_version) D(JFIF_minor_version) D(density_unit)
D(X_density) D(Y_density) D(saw_Adobe_marker) D(Adobe_transform) D(CCIR601_sampling) D(marker_list)
D(max_h_samp_factor) D(max_v_samp_factor) D(min_DCT_scaled_size) D(total_iMCU_rows) D(sample_range_limit)
D(comps_in_scan) D(cur_comp_info) D(MCUs_per_row) D(MCU_rows_in_scan) D(blocks_in_MCU) D(MCU_membership) D(Ss)
D(Se) D(Ah) D(Al) D(unread_marker) D(master) D(main) D(coef) D(post) D(inputctl) D(marker) D(entropy) D(idct)
D(upsample) D(cconvert) D(cquantize)
#undef D

_Static_assert((int)JPEG_HEADER_OK == (int)TB_JPEG_HEADER_OK, "JPEG_HEADER_OK");
_Static_assert((int)JCS_UNKNOWN == (int)TB_JCS_UNKNOWN && (int)JCS_GRAYSCALE == (int)TB_JCS_GRAYSCALE && (int)JCS_RGB == (int)TB_JCS_RGB &&
		       (int)JCS_YCbCr == (int)TB_JCS_YCbCr && (int)JCS_CMYK == (int)TB_JCS_CMYK && (int)JCS_YCCK == (int)TB_JCS_YCCK &&
		       (int)JCS_EXT_RGBX == (int)TB_JCS_EXT_RGBX,
	       "J_COLOR_SPACE values");
_Static_assert((int)JDCT_ISLOW == (int)TB_JDCT_ISLOW && (int)JDCT_IFAST == (int)TB_JDCT_IFAST, "J_DCT_METHOD values");
_Static_assert((int)JWRN_ARITH_BAD_CODE == (int)TB_JWRN_ARITH_BAD_CODE, "JWRN_ARITH_BAD_CODE");
_Static_assert((int)JWRN_BOGUS_PROGRESSION == (int)TB_JWRN_BOGUS_PROGRESSION, "JWRN_BOGUS_PROGRESSION");
_Static_assert((int)JWRN_HIT_MARKER == (int)TB_JWRN_HIT_MARKER, "JWRN_HIT_MARKER");
_Static_assert((int)JWRN_HUFF_BAD_CODE == (int)TB_JWRN_HUFF_BAD_CODE, "JWRN_HUFF_BAD_CODE");
_Static_assert((int)JWRN_JPEG_EOF == (int)TB_JWRN_JPEG_EOF, "JWRN_JPEG_EOF");
_Static_assert((int)JWRN_MUST_RESYNC == (int)TB_JWRN_MUST_RESYNC, "JWRN_MUST_RESYNC");
_Static_assert((int)JWRN_NOT_SEQUENTIAL == (int)TB_JWRN_NOT_SEQUENTIAL, "JWRN_NOT_SEQUENTIAL");
