#include "tb_runtime.h"

#include <stdio.h>
#include <string.h>

/* The one difference between operating systems: how a library is opened.
 * lib_open writes why it failed into err. */
#ifdef _WIN32
#include <stdlib.h>
#include <windows.h>

static void *lib_open(const char *path, char *err, size_t errlen) {
	/* path is UTF-8 (a Go string): convert it for the wide-char API. */
	int n = MultiByteToWideChar(CP_UTF8, 0, path, -1, NULL, 0);
	wchar_t *wpath = n > 0 ? malloc((size_t)n * sizeof *wpath) : NULL;
	HMODULE lib = NULL;
	DWORD code = ERROR_INVALID_PARAMETER;
	if (wpath != NULL && MultiByteToWideChar(CP_UTF8, 0, path, -1, wpath, n) == n) {
		lib = LoadLibraryW(wpath);
		code = GetLastError();
	}
	free(wpath);
	if (lib == NULL) {
		char msg[256] = "";
		FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, code, 0, msg, sizeof msg, NULL);
		msg[strcspn(msg, "\r\n")] = 0;
		snprintf(err, errlen, "%s: LoadLibrary: %s (error %lu)", path, msg, (unsigned long)code);
	}
	return (void *)lib;
}

static void *lib_sym(void *lib, const char *name) { return (void *)GetProcAddress((HMODULE)lib, name); }

static void lib_close(void *lib) { FreeLibrary((HMODULE)lib); }
#else
#include <dlfcn.h>

static void *lib_open(const char *path, char *err, size_t errlen) {
	/* dlerror's state is per thread: it is read here, in the same C call as
	 * dlopen, so no other call can clear it in between. */
	dlerror();
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		const char *msg = dlerror();
		snprintf(err, errlen, "%s", msg ? msg : "dlopen failed");
	}
	return lib;
}

static void *lib_sym(void *lib, const char *name) { return dlsym(lib, name); }

static void lib_close(void *lib) { dlclose(lib); }
#endif

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
	void *lib = lib_open(path, err, errlen);
	if (lib == NULL) {
		return -1;
	}
	for (int i = 0; i < tb_runtime_symbols(); i++) {
		const char *name = kind == TB_KIND_CUDA ? tb_symbols[i].cuda : tb_symbols[i].hip;
		void *sym = lib_sym(lib, name);
		if (sym == NULL) {
			snprintf(err, errlen, "%s: symbol %s not found", path, name);
			lib_close(lib);
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
		lib_close(rt->lib);
	}
	memset(rt, 0, sizeof *rt);
}
