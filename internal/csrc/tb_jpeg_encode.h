/* tb_jpeg_encode: JPEG encoding with TurboJPEG (libturbojpeg.so.0, loaded
 * at run time): RGB pixels in, a JPEG out, for shards write --resize. A
 * missing library or symbol is an error when it is opened, never a crash
 * later. */
#ifndef TB_JPEG_ENCODE_H
#define TB_JPEG_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#define TB_TJ_ENC_API(X)                                                                                                         \
	X(init_compress, tjInitCompress, void *, (void))                                                                            \
	X(compress2, tjCompress2, int,                                                                                               \
	  (void *handle, const unsigned char *srcBuf, int width, int pitch, int height, int pixelFormat, unsigned char **jpegBuf,   \
	   unsigned long *jpegSize, int jpegSubsamp, int jpegQual, int flags))                                                       \
	X(destroy, tjDestroy, int, (void *handle))                                                                                   \
	X(free_buf, tjFree, void, (unsigned char *buffer))                                                                           \
	X(get_error_str2, tjGetErrorStr2, char *, (void *handle))

typedef struct tb_tj_enc {
	void *lib;
#define TB_TJ_ENC_FIELD(field, sym, ret, params) ret(*field) params;
	TB_TJ_ENC_API(TB_TJ_ENC_FIELD)
#undef TB_TJ_ENC_FIELD
} tb_tj_enc;

/* TurboJPEG's constants, as turbojpeg.h has them. */
enum { TB_TJE_PF_RGB = 0, TB_TJE_SAMP_420 = 2 };

int tb_tj_enc_open(tb_tj_enc *t, const char *path, char *err, size_t errlen);
void tb_tj_enc_close(tb_tj_enc *t);

/* Encodes w x h RGB pixels (rows of 3w bytes) at quality q (4:2:0) with
 * handle h (tjInitCompress's, for one thread at a time); *out is
 * TurboJPEG's buffer, to free with free_buf. Returns 0, or -1 with the
 * reason in err. */
int tb_tj_encode(tb_tj_enc *t, void *h, const uint8_t *rgb, int w, int hgt, int q, uint8_t **out, size_t *outlen, char *err,
		 size_t errlen);

/* The table's calls, for cgo (which calls no function pointer). */
static inline void *tb_tj_init(tb_tj_enc *t) { return t->init_compress(); }
static inline void tb_tj_free(tb_tj_enc *t, uint8_t *buf) { t->free_buf(buf); }
static inline void tb_tj_destroy(tb_tj_enc *t, void *h) { t->destroy(h); }

#endif
