//go:build cgo

#include "tb_dl.h"

#include <stdio.h>
#include <string.h>

#if defined(_WIN32)
#include <windows.h>

void *tb_dl_open(const char *path, char *err, size_t errlen) {
	HMODULE h = LoadLibraryA(path);
	if (h == NULL) {
		snprintf(err, errlen, "%s: LoadLibrary failed (error %lu)", path, (unsigned long)GetLastError());
	}
	return (void *)h;
}

void *tb_dl_sym(void *lib, const char *name) {
	FARPROC p = GetProcAddress((HMODULE)lib, name);
	void *q;
	/* A function pointer to a data pointer, as POSIX's dlsym returns. */
	memcpy(&q, &p, sizeof q);
	return q;
}

void tb_dl_close(void *lib) { FreeLibrary((HMODULE)lib); }

#else
#include <dlfcn.h>

/* dlerror's state is per thread: it is read in the same C call as dlopen,
 * so no other call on this thread can clear it in between. */
void *tb_dl_open(const char *path, char *err, size_t errlen) {
	dlerror();
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		const char *msg = dlerror();
		snprintf(err, errlen, "%s", msg ? msg : "dlopen failed");
	}
	return lib;
}

void *tb_dl_sym(void *lib, const char *name) { return dlsym(lib, name); }

void tb_dl_close(void *lib) { dlclose(lib); }
#endif
