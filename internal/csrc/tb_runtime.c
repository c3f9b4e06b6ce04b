#include "tb_runtime.h"

#include "tb_dl.h"

#include <stdio.h>
#include <string.h>

/* The API by its CUDA names and by its HIP names: the same fields. */
static const tb_dl_symbol tb_cuda_symbols[] = {
#define TB_SYM(field, cuda, hip, params) {#cuda, offsetof(tb_runtime, field)},
	TB_RUNTIME_API(TB_SYM) TB_RUNTIME_STR_API(TB_SYM)
#undef TB_SYM
};

static const tb_dl_symbol tb_hip_symbols[] = {
#define TB_SYM(field, cuda, hip, params) {#hip, offsetof(tb_runtime, field)},
	TB_RUNTIME_API(TB_SYM) TB_RUNTIME_STR_API(TB_SYM)
#undef TB_SYM
};

int tb_runtime_symbols(void) { return (int)(sizeof tb_cuda_symbols / sizeof tb_cuda_symbols[0]); }

int tb_runtime_open(tb_runtime *rt, int kind, const char *path, char *err, size_t errlen) {
	memset(rt, 0, sizeof *rt);
	if (kind != TB_KIND_CUDA && kind != TB_KIND_HIP) {
		snprintf(err, errlen, "unknown runtime kind %d", kind);
		return -1;
	}
	const tb_dl_symbol *syms = kind == TB_KIND_CUDA ? tb_cuda_symbols : tb_hip_symbols;
	void *lib = tb_dl_load(path, syms, (size_t)tb_runtime_symbols(), rt, err, errlen);
	if (lib == NULL) {
		memset(rt, 0, sizeof *rt);
		return -1;
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
