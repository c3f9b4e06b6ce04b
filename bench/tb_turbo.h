/* tb_turbo: TurboJPEG's full decode (libturbojpeg.so.0, loaded at run
 * time): the bench's decode-only baseline, tjDecompress2 to RGB with the
 * default flags (accurate DCT, fancy upsampling). */
#ifndef TB_TURBO_H
#define TB_TURBO_H

#include <stddef.h>
#include <stdint.h>

#define TB_TURBO_API(X)                                                                                                          \
	X(init_decompress, tjInitDecompress, void *, (void))                                                                        \
	X(decompress_header3, tjDecompressHeader3, int,                                                                              \
	  (void *handle, const unsigned char *jpegBuf, unsigned long jpegSize, int *width, int *height, int *jpegSubsamp,             \
	   int *jpegColorspace))                                                                                                     \
	X(decompress2, tjDecompress2, int,                                                                                           \
	  (void *handle, const unsigned char *jpegBuf, unsigned long jpegSize, unsigned char *dstBuf, int width, int pitch,          \
	   int height, int pixelFormat, int flags))                                                                                  \
	X(destroy, tjDestroy, int, (void *handle))                                                                                   \
	X(get_error_str2, tjGetErrorStr2, char *, (void *handle))

typedef struct tb_turbo {
	void *lib;
#define TB_TURBO_FIELD(field, sym, ret, params) ret(*field) params;
	TB_TURBO_API(TB_TURBO_FIELD)
#undef TB_TURBO_FIELD
} tb_turbo;

enum { TB_TJPF_RGB = 0 };

int tb_turbo_open(tb_turbo *t, const char *path, char *err, size_t errlen);
void tb_turbo_close(tb_turbo *t);

/* Decodes n JPEGs (data[i], size[i]) with one handle into dst (cap bytes,
 * RGB), times rounds; returns the number decoded, or -1 with a message. */
long tb_turbo_decode_all(tb_turbo *t, const uint8_t *const *data, const size_t *size, size_t n, int rounds, uint8_t *dst,
			 size_t cap, char *err, size_t errlen);

#endif
