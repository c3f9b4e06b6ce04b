#include "tb_jpeg_encode.h"

#include <stdio.h>
#include <string.h>

#include "tb_dl.h"

static const tb_dl_symbol tb_tj_enc_symbols[] = {
#define TB_SYM(field, sym, ret, params) {#sym, offsetof(tb_tj_enc, field)},
	TB_TJ_ENC_API(TB_SYM)
#undef TB_SYM
};

int tb_tj_enc_open(tb_tj_enc *t, const char *path, char *err, size_t errlen) {
	memset(t, 0, sizeof *t);
	t->lib = tb_dl_load(path, tb_tj_enc_symbols, sizeof tb_tj_enc_symbols / sizeof tb_tj_enc_symbols[0], t, err, errlen);
	return t->lib == NULL ? -1 : 0;
}

void tb_tj_enc_close(tb_tj_enc *t) {
	if (t->lib != NULL) {
		tb_dl_close(t->lib);
	}
	memset(t, 0, sizeof *t);
}

int tb_tj_encode(tb_tj_enc *t, void *h, const uint8_t *rgb, int w, int hgt, int q, uint8_t **out, size_t *outlen, char *err,
		 size_t errlen) {
	unsigned char *buf = NULL;
	unsigned long n = 0;
	if (t->compress2(h, rgb, w, 3 * w, hgt, TB_TJE_PF_RGB, &buf, &n, TB_TJE_SAMP_420, q, 0) != 0) {
		const char *msg = t->get_error_str2(h);
		snprintf(err, errlen, "tjCompress2: %s", msg ? msg : "failed");
		if (buf != NULL) {
			t->free_buf(buf);
		}
		return -1;
	}
	*out = buf;
	*outlen = (size_t)n;
	return 0;
}
