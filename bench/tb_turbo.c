//go:build cgo && !windows

#include "tb_turbo.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* The bench runs on POSIX systems (the library's name is linux's), so the
 * loader is dlopen: internal/csrc's tb_dl is that package's, and cgo
 * compiles only the C files of the bench's own folder. */
static const struct {
	const char *name;
	size_t offset;
} tb_turbo_symbols[] = {
#define TB_SYM(field, sym, ret, params) {#sym, offsetof(tb_turbo, field)},
	TB_TURBO_API(TB_SYM)
#undef TB_SYM
};

int tb_turbo_open(tb_turbo *t, const char *path, char *err, size_t errlen) {
	memset(t, 0, sizeof *t);
	dlerror();
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *msg = dlerror();
		snprintf(err, errlen, "%s", msg ? msg : "dlopen failed");
		return -1;
	}
	for (size_t i = 0; i < sizeof tb_turbo_symbols / sizeof tb_turbo_symbols[0]; i++) {
		void *sym = dlsym(h, tb_turbo_symbols[i].name);
		if (sym == NULL) {
			snprintf(err, errlen, "%s: symbol %s not found", path, tb_turbo_symbols[i].name);
			dlclose(h);
			memset(t, 0, sizeof *t);
			return -1;
		}
		/* Every field of the table is a function pointer; POSIX
		 * guarantees dlsym's data pointer converts to one. */
		memcpy((char *)t + tb_turbo_symbols[i].offset, &sym, sizeof sym);
	}
	t->lib = h;
	return 0;
}

void tb_turbo_close(tb_turbo *t) {
	if (t->lib != NULL) {
		dlclose(t->lib);
	}
	memset(t, 0, sizeof *t);
}

long tb_turbo_decode_all(tb_turbo *t, const uint8_t *const *data, const size_t *size, size_t n, int rounds, uint8_t *dst,
			 size_t cap, char *err, size_t errlen) {
	void *h = t->init_decompress();
	if (h == NULL) {
		snprintf(err, errlen, "tjInitDecompress failed");
		return -1;
	}
	long done = 0;
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < n; i++) {
			int w, hgt, sub, cs;
			if (t->decompress_header3(h, data[i], size[i], &w, &hgt, &sub, &cs) != 0) {
				snprintf(err, errlen, "image %zu: %s", i, t->get_error_str2(h));
				t->destroy(h);
				return -1;
			}
			if ((size_t)w * (size_t)hgt * 3 > cap) {
				snprintf(err, errlen, "image %zu: %dx%d does not fit %zu bytes", i, w, hgt, cap);
				t->destroy(h);
				return -1;
			}
			if (t->decompress2(h, data[i], size[i], dst, w, 0, hgt, TB_TJPF_RGB, 0) != 0) {
				snprintf(err, errlen, "image %zu: %s", i, t->get_error_str2(h));
				t->destroy(h);
				return -1;
			}
			done++;
		}
	}
	t->destroy(h);
	return done;
}
