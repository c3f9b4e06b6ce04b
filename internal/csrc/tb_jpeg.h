/* tb_jpeg: just enough of libjpeg's API (the libjpeg 6.2 ABI that
 * libjpeg-turbo's libjpeg.so.62 exports) to decode with it after loading
 * it at run time: no jpeglib.h is needed to build. The structs mirror
 * jpeglib.h field for field (JPEG_LIB_VERSION 62, 8-bit samples, boolean
 * an int); `go build -tags jpegcheck ./csrc/` checks every offset, size,
 * constant and prototype against the real header (Debian's
 * libjpeg62-turbo-dev), and jpeg_CreateDecompress itself refuses a struct
 * whose size differs from the library's. */
#ifndef TB_JPEG_H
#define TB_JPEG_H

#include <stddef.h>
#include <stdint.h>

typedef int tb_jboolean;

struct tb_jpeg_error_mgr_s {
	void (*error_exit)(void *cinfo);
	void (*emit_message)(void *cinfo, int msg_level);
	void (*output_message)(void *cinfo);
	void (*format_message)(void *cinfo, char *buffer);
	void (*reset_error_mgr)(void *cinfo);
	int msg_code;
	union {
		int i[8];
		char s[80];
	} msg_parm;
	int trace_level;
	long num_warnings;
	const char *const *jpeg_message_table;
	int last_jpeg_message;
	const char *const *addon_message_table;
	int first_addon_message;
	int last_addon_message;
};

struct tb_jpeg_decompress_s {
	/* jpeg_common_fields */
	struct tb_jpeg_error_mgr_s *err;
	void *mem;
	void *progress;
	void *client_data;
	tb_jboolean is_decompressor;
	int global_state;

	void *src;
	unsigned int image_width, image_height;
	int num_components;
	int jpeg_color_space;
	int out_color_space;
	unsigned int scale_num, scale_denom;
	double output_gamma;
	tb_jboolean buffered_image, raw_data_out;
	int dct_method;
	tb_jboolean do_fancy_upsampling, do_block_smoothing, quantize_colors;
	int dither_mode;
	tb_jboolean two_pass_quantize;
	int desired_number_of_colors;
	tb_jboolean enable_1pass_quant, enable_external_quant, enable_2pass_quant;
	unsigned int output_width, output_height;
	int out_color_components, output_components, rec_outbuf_height;
	int actual_number_of_colors;
	void *colormap;
	unsigned int output_scanline;
	int input_scan_number;
	unsigned int input_iMCU_row;
	int output_scan_number;
	unsigned int output_iMCU_row;
	void *coef_bits;
	void *quant_tbl_ptrs[4];
	void *dc_huff_tbl_ptrs[4], *ac_huff_tbl_ptrs[4];
	int data_precision;
	void *comp_info;
	tb_jboolean progressive_mode, arith_code;
	uint8_t arith_dc_L[16], arith_dc_U[16], arith_ac_K[16];
	unsigned int restart_interval;
	tb_jboolean saw_JFIF_marker;
	uint8_t JFIF_major_version, JFIF_minor_version, density_unit;
	uint16_t X_density, Y_density;
	tb_jboolean saw_Adobe_marker;
	uint8_t Adobe_transform;
	tb_jboolean CCIR601_sampling;
	void *marker_list;
	int max_h_samp_factor, max_v_samp_factor;
	int min_DCT_scaled_size;
	unsigned int total_iMCU_rows;
	void *sample_range_limit;
	int comps_in_scan;
	void *cur_comp_info[4];
	unsigned int MCUs_per_row, MCU_rows_in_scan;
	int blocks_in_MCU;
	int MCU_membership[10];
	int Ss, Se, Ah, Al;
	int unread_marker;
	void *master, *main, *coef, *post, *inputctl, *marker, *entropy, *idct, *upsample, *cconvert, *cquantize;
};

/* jpegcheck.c defines TB_JPEG_TYPES to instantiate the prototypes below
 * with jpeglib.h's own types. */
#ifndef TB_JPEG_TYPES
typedef struct tb_jpeg_decompress_s tb_jpeg_decompress;
typedef struct tb_jpeg_error_mgr_s tb_jpeg_error_mgr;
typedef unsigned char **tb_jsamparray;
#endif

enum {
	TB_JPEG_LIB_VERSION = 62,
	TB_JPEG_HEADER_OK = 1,
	/* J_COLOR_SPACE */
	TB_JCS_UNKNOWN = 0,
	TB_JCS_GRAYSCALE = 1,
	TB_JCS_RGB = 2,
	TB_JCS_YCbCr = 3,
	TB_JCS_CMYK = 4,
	TB_JCS_YCCK = 5,
	TB_JCS_EXT_RGBX = 7,
	/* J_DCT_METHOD */
	TB_JDCT_ISLOW = 0,
	TB_JDCT_IFAST = 1,
	/* warnings (J_MESSAGE_CODE) that mean lost or corrupt data: decoding
	 * stops with an error instead of a partly grey image */
	TB_JWRN_ARITH_BAD_CODE = 126,
	TB_JWRN_BOGUS_PROGRESSION = 115,
	TB_JWRN_HIT_MARKER = 117,
	TB_JWRN_HUFF_BAD_CODE = 118,
	TB_JWRN_JPEG_EOF = 120,
	TB_JWRN_MUST_RESYNC = 121,
	TB_JWRN_NOT_SEQUENTIAL = 122,
};

/* The entry points: field, symbol, return type, parameters. */
#define TB_JPEG_API(X)                                                                                     \
	X(std_error, jpeg_std_error, tb_jpeg_error_mgr *, (tb_jpeg_error_mgr * err))                          \
	X(create_decompress, jpeg_CreateDecompress, void, (tb_jpeg_decompress * cinfo, int version, size_t structsize)) \
	X(destroy_decompress, jpeg_destroy_decompress, void, (tb_jpeg_decompress * cinfo))                    \
	X(mem_src, jpeg_mem_src, void, (tb_jpeg_decompress * cinfo, const unsigned char *buf, unsigned long n)) \
	X(read_header, jpeg_read_header, int, (tb_jpeg_decompress * cinfo, tb_jboolean require_image))       \
	X(start_decompress, jpeg_start_decompress, tb_jboolean, (tb_jpeg_decompress * cinfo))                \
	X(read_scanlines, jpeg_read_scanlines, unsigned int, (tb_jpeg_decompress * cinfo, tb_jsamparray rows, unsigned int max_lines)) \
	X(skip_scanlines, jpeg_skip_scanlines, unsigned int, (tb_jpeg_decompress * cinfo, unsigned int num_lines)) \
	X(crop_scanline, jpeg_crop_scanline, void, (tb_jpeg_decompress * cinfo, unsigned int *xoffset, unsigned int *width)) \
	X(abort_decompress, jpeg_abort_decompress, void, (tb_jpeg_decompress * cinfo))

typedef struct tb_jpeg_lib {
	void *lib;
#define TB_JPEG_FIELD(field, sym, ret, params) ret(*field) params;
	TB_JPEG_API(TB_JPEG_FIELD)
#undef TB_JPEG_FIELD
} tb_jpeg_lib;

#endif
