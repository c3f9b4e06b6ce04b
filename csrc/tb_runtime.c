#include "tb_runtime.h"

#include "tb_dl.h"

#include <stdio.h>
#include <string.h>

typedef struct {
	const char *cuda, *hip;
	size_t offset; /* of the field in tb_runtime */
} tb_symbol;

static const tb_symbol tb_symbols[] = {
#define TB_SYM(field, cuda, hip, params) {#cuda, #hip, offsetof(tb_runtime, field)},
	TB_RUNTIME_API(TB_SYM) TB_RUNTIME_STR_API(TB_SYM)
#undef TB_SYM
};

int tb_runtime_symbols(void) { return (int)(sizeof tb_symbols / sizeof tb_symbols[0]); }

int tb_runtime_open(tb_runtime *rt, int kind, const char *path, char *err, size_t errlen) {
	memset(rt, 0, sizeof *rt);
	if (kind != TB_KIND_CUDA && kind != TB_KIND_HIP) {
		snprintf(err, errlen, "unknown runtime kind %d", kind);
		return -1;
	}
	void *lib = tb_dl_open(path, err, errlen);
	if (lib == NULL) {
		return -1;
	}
	for (int i = 0; i < tb_runtime_symbols(); i++) {
		const char *name = kind == TB_KIND_CUDA ? tb_symbols[i].cuda : tb_symbols[i].hip;
		void *sym = tb_dl_sym(lib, name);
		if (sym == NULL) {
			snprintf(err, errlen, "%s: symbol %s not found", path, name);
			tb_dl_close(lib);
			memset(rt, 0, sizeof *rt);
			return -1;
		}
		/* POSIX guarantees that a data pointer from dlsym converts to a
		 * function pointer (GetProcAddress returns one); every field is a
		 * function pointer. */
		memcpy((char *)rt + tb_symbols[i].offset, &sym, sizeof sym);
	}
	rt->kind = kind;
	rt->lib = lib;
	return 0;
}

void tb_runtime_close(tb_runtime *rt) {
	if (rt->lib != NULL) {
		tb_dl_close(rt->lib);
	}
	memset(rt, 0, sizeof *rt);
}
